//! `ichor auth login`: the loopback login, stored in the cache.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use jiff::Timestamp;

use super::{
    cache::{CacheDir, CacheEntry},
    error::AuthError,
    flow::{self, LoginOptions, Target},
    oidc::OidcClient,
};
use crate::terminal::escape_controls;

/// Runs `ichor auth login`.
///
/// # Errors
/// See [`AuthError`].
pub fn run(
    target: Target,
    ca_file: Option<PathBuf>,
    open_browser: bool,
    timeout: Duration,
) -> Result<ExitCode, AuthError> {
    let dir = CacheDir::from_env()?;
    dir.ensure()?;
    let now = Timestamp::now();
    let entry = flow::runtime()?.block_on(async {
        let client = OidcClient::new(ca_file.as_deref())?;
        flow::login(
            &client,
            &target,
            LoginOptions {
                open_browser,
                timeout,
            },
            now,
        )
        .await
    })?;
    {
        let lock = dir.lock(&target.key())?;
        match lock.store(&entry) {
            // Saved, only not yet durable: the login is there for the next run.
            Err(e @ AuthError::CacheNotSynced { .. }) => eprintln!("warning: {e}"),
            other => other?,
        }
    }
    eprintln!("{}", signed_in_message(&target, &entry));
    Ok(ExitCode::SUCCESS)
}

/// The line a sign-in ends with. The user and groups are the issuer's claims: printed with
/// control characters escaped. Pure.
fn signed_in_message(target: &Target, entry: &CacheEntry) -> String {
    let groups = if entry.groups.is_empty() {
        "none".to_owned()
    } else {
        entry.groups.join(", ")
    };
    let until = Timestamp::from_second(entry.id_token_exp)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default();
    format!(
        "Signed in to {} as {} (groups: {}; audience {}); ID token valid until {until}{}.",
        target.issuer,
        escape_controls(&entry.subject),
        escape_controls(&groups),
        escape_controls(&target.audience),
        if entry.refresh_token.is_some() {
            ", refreshed automatically after that"
        } else {
            ""
        }
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::commands::auth::{cache::CACHE_VERSION, issuer_url::IssuerUrl, secret::Secret};

    /// An issuer that puts escape sequences in `sub` or `groups` has them printed as text.
    #[test]
    fn the_signed_in_line_escapes_the_issuers_user_and_groups() {
        let target = Target::new(
            IssuerUrl::parse("https://i.example").unwrap(),
            "ichor-cli",
            "ichor-kube",
        );
        let entry = CacheEntry {
            v: CACHE_VERSION,
            issuer: "https://i.example".into(),
            client_id: "ichor-cli".into(),
            audience: "ichor-kube".into(),
            endpoints: None,
            subject: "alice\u{1b}[2J".into(),
            groups: vec!["admin\u{1b}]0;owned\u{7}".into(), "\u{9b}31m".into()],
            id_token: Secret::new("t".into()),
            id_token_exp: 2_000_000_000,
            refresh_token: None,
        };
        let line = signed_in_message(&target, &entry);
        assert!(!line.chars().any(char::is_control), "{line:?}");
        assert!(
            line.contains("as alice\\u{1b}[2J (groups: admin\\u{1b}]0;owned\\u{7}, \\u{9b}31m;"),
            "{line}"
        );
    }
}
