//! `ichor auth login`: the loopback login, stored in the cache.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use jiff::Timestamp;

use super::{
    cache::CacheDir,
    error::AuthError,
    flow::{self, LoginOptions, Target},
    oidc::OidcClient,
};

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
        let _lock = dir.lock(&target.key())?;
        dir.store(&entry)?;
    }
    let groups = if entry.groups.is_empty() {
        "none".to_owned()
    } else {
        entry.groups.join(", ")
    };
    let until = Timestamp::from_second(entry.id_token_exp)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default();
    eprintln!(
        "Signed in to {} as {} (groups: {groups}; audience {}); ID token valid until {until}{}.",
        target.issuer,
        entry.subject,
        target.audience,
        if entry.refresh_token.is_some() {
            ", refreshed automatically after that"
        } else {
            ""
        }
    );
    Ok(ExitCode::SUCCESS)
}
