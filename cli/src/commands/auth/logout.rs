//! `ichor auth logout`: revoke, then forget, the matching cached logins.
//!
//! Revocation is best effort: every matching refresh token is sent to its issuer's RFC 7009
//! endpoint concurrently, with [`REVOKE_BUDGET`] for all of them together; a failure only
//! warns. The cache files are deleted in every case. No login lock is taken: a concurrent
//! `ichor auth token` could otherwise hold it for the length of a browser login, and a refresh
//! that lands after the delete only recreates a login the user can log out of again.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use super::{
    cache::{CacheDir, CacheEntry},
    error::AuthError,
    flow,
    issuer_url::IssuerUrl,
    oidc::OidcClient,
};

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

/// Runs `ichor auth logout`.
///
/// # Errors
/// The cache cannot be listed or a file cannot be deleted.
pub fn run(selection: Selection, ca_file: Option<PathBuf>) -> Result<ExitCode, AuthError> {
    let dir = CacheDir::from_env()?;
    let mut selected = Vec::new();
    let mut unusable = Vec::new();
    for listed in dir.list()? {
        match listed.entry {
            Ok(e) if selection.matches(&e) => selected.push((listed.path, e)),
            Ok(_) => {}
            // A file nobody can read belongs to no issuer: removed only by a logout of all.
            Err(_) if selection.is_everything() => unusable.push(listed.path),
            Err(_) => {}
        }
    }
    if selected.is_empty() && unusable.is_empty() {
        eprintln!("No cached login matches; nothing to do.");
        return Ok(ExitCode::SUCCESS);
    }
    let with_refresh: Vec<CacheEntry> = selected
        .iter()
        .filter(|(_, e)| e.refresh_token.is_some())
        .map(|(_, e)| e.clone())
        .collect();
    if !with_refresh.is_empty() {
        revoke_all(with_refresh, ca_file);
    }
    for (path, e) in &selected {
        dir.remove_file(path)?;
        eprintln!(
            "Signed out of {} (user {}, audience {}).",
            e.issuer, e.subject, e.audience
        );
    }
    for path in &unusable {
        dir.remove_file(path)?;
        eprintln!("Removed the unusable login cache {}.", path.display());
    }
    Ok(ExitCode::SUCCESS)
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
                        Some(Ok((entry, Err(e)))) => eprintln!(
                            "warning: could not revoke the refresh token of {} (audience {}): {e}",
                            entry.issuer, entry.audience
                        ),
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
        eprintln!("warning: no refresh token was revoked: {e}");
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
}
