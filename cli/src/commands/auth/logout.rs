//! `ichor auth logout`: revoke, then forget, the matching cached logins.
//!
//! Revocation is best effort: every matching refresh token is sent to its issuer's RFC 7009
//! endpoint concurrently, with [`REVOKE_BUDGET`] for all of them together; a failure only
//! warns. The cache files are deleted in every case, through the directory's descriptor the
//! listing opened, each removal synced; so are the temporary files an interrupted write left for
//! a selected login, which hold its tokens too. No login lock is taken: a concurrent
//! `ichor auth token` could otherwise hold it for the length of a browser login, and a refresh
//! that lands after the delete only recreates a login the user can log out of again.

use std::{
    collections::HashSet,
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use super::{
    cache::{CacheDir, CacheEntry, Listing},
    error::AuthError,
    flow,
    issuer_url::IssuerUrl,
    oidc::OidcClient,
};
use crate::terminal::escape_controls;

/// The time all revocations together may take.
pub const REVOKE_BUDGET: Duration = Duration::from_secs(10);

/// Which logins a logout removes.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only this issuer's.
    pub issuer: Option<IssuerUrl>,
    /// Only this audience's.
    pub audience: Option<String>,
}

impl Selection {
    /// Whether `entry` is selected. Pure.
    pub fn matches(&self, entry: &CacheEntry) -> bool {
        self.issuer.as_ref().is_none_or(|i| i.as_str() == entry.issuer)
            && self.audience.as_ref().is_none_or(|a| *a == entry.audience)
    }

    fn is_everything(&self) -> bool {
        self.issuer.is_none() && self.audience.is_none()
    }
}

/// What a logout removes from a listing. Pure: [`plan`] decides, [`run`] acts.
#[derive(Debug, Default)]
pub struct Plan<'a> {
    /// The selected logins' cache files.
    pub selected: Vec<(&'a Path, &'a CacheEntry)>,
    /// Cache files nobody can read (a logout of everything only).
    pub unusable: Vec<&'a Path>,
    /// Temporary files an interrupted write left for a selected login: they hold its tokens, the
    /// readable ones a refresh token to revoke too.
    pub leftovers: Vec<(&'a Path, Option<&'a CacheEntry>)>,
}

impl Plan<'_> {
    fn is_empty(&self) -> bool {
        self.selected.is_empty() && self.unusable.is_empty() && self.leftovers.is_empty()
    }
}

/// Which of `listing`'s files a logout of `selection` removes. A leftover temporary file belongs
/// to the login whose cache file it was written for (its stem); one that parses also says which
/// login it holds. Pure.
pub fn plan<'a>(listing: &'a Listing, selection: &Selection) -> Plan<'a> {
    let mut plan = Plan::default();
    let mut stems = HashSet::new();
    for listed in &listing.files {
        match &listed.entry {
            Ok(e) if selection.matches(e) => {
                stems.extend(listed.stem());
                plan.selected.push((listed.path.as_path(), e));
            }
            Ok(_) => {}
            // A file nobody can read belongs to no issuer: removed only by a logout of all.
            Err(_) if selection.is_everything() => plan.unusable.push(listed.path.as_path()),
            Err(_) => {}
        }
    }
    for listed in &listing.leftovers {
        let entry = listed.entry.as_ref().ok();
        if selection.is_everything()
            || listed.stem().is_some_and(|s| stems.contains(s))
            || entry.is_some_and(|e| selection.matches(e))
        {
            plan.leftovers.push((listed.path.as_path(), entry));
        }
    }
    plan
}

/// Runs `ichor auth logout`.
///
/// # Errors
/// The cache cannot be listed or a file cannot be deleted.
pub fn run(selection: Selection, ca_file: Option<PathBuf>) -> Result<ExitCode, AuthError> {
    let dir = CacheDir::from_env()?;
    let listing = dir.listing()?;
    let chosen = plan(&listing, &selection);
    if chosen.is_empty() {
        eprintln!("No cached login matches; nothing to do.");
        return Ok(ExitCode::SUCCESS);
    }
    let with_refresh: Vec<CacheEntry> = chosen
        .selected
        .iter()
        .map(|(_, e)| *e)
        .chain(chosen.leftovers.iter().filter_map(|(_, e)| *e))
        .filter(|e| e.refresh_token.is_some())
        .cloned()
        .collect();
    if !with_refresh.is_empty() {
        revoke_all(with_refresh, ca_file);
    }
    for (path, e) in &chosen.selected {
        listing.remove(path)?;
        eprintln!("{}", signed_out_message(e));
    }
    for path in &chosen.unusable {
        listing.remove(path)?;
        eprintln!("Removed the unusable login cache {}.", path.display());
    }
    for (path, _) in &chosen.leftovers {
        listing.remove(path)?;
        eprintln!(
            "Removed {}, left by an interrupted write of the login cache.",
            path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The line for a login signed out of. Its fields come from the cache file, the user from the
/// issuer's claims: printed with control characters escaped. Pure.
fn signed_out_message(e: &CacheEntry) -> String {
    format!(
        "Signed out of {} (user {}, audience {}).",
        escape_controls(&e.issuer),
        escape_controls(&e.subject),
        escape_controls(&e.audience)
    )
}

/// The warning for a refresh token `error` kept `entry`'s issuer from revoking; the error may
/// carry the issuer's `error_description`: printed with control characters escaped. Pure.
fn revoke_warning(entry: &CacheEntry, error: &AuthError) -> String {
    escape_controls(&format!(
        "warning: could not revoke the refresh token of {} (audience {}): {error}",
        entry.issuer, entry.audience
    ))
    .into_owned()
}

/// Revokes every refresh token, concurrently, within [`REVOKE_BUDGET`]; failures warn.
fn revoke_all(entries: Vec<CacheEntry>, ca_file: Option<PathBuf>) {
    let result = flow::runtime().and_then(|rt| {
        rt.block_on(async {
            let client = OidcClient::new(ca_file.as_deref())?;
            let mut tasks = tokio::task::JoinSet::new();
            for entry in entries {
                let client = client.clone();
                tasks.spawn(async move {
                    let outcome = revoke_one(&client, &entry).await;
                    (entry, outcome)
                });
            }
            let deadline = tokio::time::sleep(REVOKE_BUDGET);
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    next = tasks.join_next() => match next {
                        None => break,
                        Some(Ok((_, Ok(())))) => {}
                        Some(Ok((entry, Err(e)))) => eprintln!("{}", revoke_warning(&entry, &e)),
                        Some(Err(e)) => eprintln!("warning: a revocation did not finish: {e}"),
                    },
                    () = &mut deadline => {
                        eprintln!(
                            "warning: revocation did not finish within {} s; {} refresh token(s) may stay \
                             valid until they expire",
                            REVOKE_BUDGET.as_secs(),
                            tasks.len()
                        );
                        tasks.abort_all();
                        break;
                    }
                }
            }
            Ok::<(), AuthError>(())
        })
    });
    if let Err(e) = result {
        eprintln!(
            "{}",
            escape_controls(&format!("warning: no refresh token was revoked: {e}"))
        );
    }
}

async fn revoke_one(client: &OidcClient, entry: &CacheEntry) -> Result<(), AuthError> {
    let Some(token) = &entry.refresh_token else {
        return Ok(());
    };
    let endpoints = match &entry.endpoints {
        Some(e) => e.clone(),
        None => client.discover(&IssuerUrl::parse(&entry.issuer)?).await?,
    };
    let Some(endpoint) = &endpoints.revocation else {
        return Err(AuthError::NoRevocationEndpoint {
            issuer: entry.issuer.clone(),
        });
    };
    client.revoke(endpoint, &entry.client_id, token).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::commands::auth::{cache::CACHE_VERSION, secret::Secret};

    fn entry(issuer: &str, audience: &str) -> CacheEntry {
        CacheEntry {
            v: CACHE_VERSION,
            issuer: issuer.into(),
            client_id: "ichor-cli".into(),
            audience: audience.into(),
            endpoints: None,
            subject: "alice".into(),
            groups: vec![],
            id_token: Secret::new("t".into()),
            id_token_exp: 0,
            refresh_token: None,
        }
    }

    #[test]
    fn selects_every_audience_of_an_issuer_or_everything_without_flags() {
        let a = entry("https://a.example", "ichor-kube");
        let a_ui = entry("https://a.example", "ichor-ui");
        let b = entry("https://b.example", "ichor-kube");
        let by_issuer = Selection {
            issuer: Some(IssuerUrl::parse("https://a.example/").unwrap()),
            audience: None,
        };
        assert!(by_issuer.matches(&a) && by_issuer.matches(&a_ui) && !by_issuer.matches(&b));
        let by_both = Selection {
            audience: Some("ichor-ui".into()),
            ..by_issuer
        };
        assert!(!by_both.matches(&a) && by_both.matches(&a_ui));
        let all = Selection::default();
        assert!(all.matches(&a) && all.matches(&b) && all.is_everything());
    }

    /// A write interrupted by a crash leaves `.<stem>.json.tmp-…` holding the tokens: a logout of
    /// that login removes it with the cache file (and revokes a refresh token it holds), a logout
    /// of another issuer leaves it, and a logout of everything takes every one.
    #[test]
    fn a_logout_removes_the_temporary_files_an_interrupted_write_left_for_its_logins() {
        use std::os::unix::fs::PermissionsExt as _;
        let home = tempfile::tempdir().unwrap();
        let dir = CacheDir::new(home.path().join(".ichor/auth"));
        let a = entry("https://a.example", "ichor-kube");
        let mut b = entry("https://b.example", "ichor-kube");
        b.refresh_token = Some(Secret::new("refresh-of-b".into()));
        dir.store(&a).unwrap();
        let stem = |e: &CacheEntry| e.key().file_stem();
        let leftover = |stem: String, bytes: &[u8]| {
            let path = dir.path().join(format!(".{stem}.json.tmp-42-00000000000000ff"));
            std::fs::write(&path, bytes).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            path
        };
        let of_a = leftover(stem(&a), b"{\"v\": 1, \"idTok");
        // b's first write never got renamed into place: only the temporary file holds b.
        let of_b = leftover(stem(&b), &serde_json::to_vec(&b).unwrap());
        std::fs::write(dir.path().join(".notes.tmp-1"), b"mine").unwrap();

        let by_issuer = |issuer: &str| Selection {
            issuer: Some(IssuerUrl::parse(issuer).unwrap()),
            audience: None,
        };
        let listing = dir.listing().unwrap();
        assert_eq!(listing.leftovers.len(), 2, "{listing:?}");
        let for_a = plan(&listing, &by_issuer("https://a.example"));
        assert_eq!(for_a.selected.len(), 1);
        assert_eq!(for_a.leftovers.len(), 1);
        assert_eq!(for_a.leftovers[0].0, of_a.as_path());
        let for_b = plan(&listing, &by_issuer("https://b.example"));
        assert!(for_b.selected.is_empty());
        assert_eq!(for_b.leftovers.len(), 1);
        assert_eq!(for_b.leftovers[0].0, of_b.as_path());
        assert!(
            for_b.leftovers[0].1.is_some_and(|e| e.refresh_token.is_some()),
            "its refresh token is revoked too"
        );

        for (path, _) in &for_a.leftovers {
            listing.remove(path).unwrap();
        }
        assert!(!of_a.exists() && of_b.exists());
        let listing = dir.listing().unwrap();
        let all = plan(&listing, &Selection::default());
        assert_eq!(all.leftovers.len(), 1);
        let paths = all.selected.iter().map(|(p, _)| *p);
        for path in paths.chain(all.leftovers.iter().map(|(p, _)| *p)) {
            listing.remove(path).unwrap();
        }
        let left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, [".notes.tmp-1"], "only files of no login are left");
    }

    /// The user comes from the issuer's claims and a revocation error can quote the issuer's
    /// `error_description`: both are printed with escape sequences as text.
    #[test]
    fn the_signed_out_line_and_the_revocation_warning_escape_the_issuers_text() {
        let mut e = entry("https://a.example", "ichor-kube");
        e.subject = "alice\u{1b}[2J".into();
        let line = signed_out_message(&e);
        assert!(
            !line.contains('\u{1b}') && line.contains("alice\\u{1b}[2J"),
            "{line:?}"
        );
        let refused = AuthError::OAuth {
            what: "revocation",
            url: "https://a.example/oidc/revoke".into(),
            error: "invalid_request".into(),
            description: Some("no\u{1b}]0;owned\u{7}".into()),
        };
        let warning = revoke_warning(&e, &refused);
        assert!(!warning.chars().any(char::is_control), "{warning:?}");
        assert!(warning.contains("no\\u{1b}]0;owned\\u{7}"), "{warning}");
    }
}
