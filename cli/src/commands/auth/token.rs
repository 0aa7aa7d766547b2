//! `ichor auth token`: the client-go exec plugin.
//!
//! # Guarantees
//! - Fast path: with a cached ID token that has at least 30 s left (and no more than
//!   [`cache::MAX_EXP_AHEAD_SECONDS`]), the command parses its flags, reads one file and
//!   prints. No lock, no async runtime, no network.
//! - Slow path: the login's lock is taken and the cache read again, so of many concurrent runs
//!   one refreshes and the others print its result. Only then is a runtime built. A run waiting
//!   for the lock says so once on stderr and gives up after [`cache::LOCK_WAIT`]; a cache file
//!   or directory ichor did not make is refused with an error naming it, never replaced; a file
//!   that cannot be read now, or that a newer ichor wrote, is kept and the run fails saying so.
//! - New tokens that cannot be stored (a full disk) are still printed: the issuer may already
//!   have retired the cached refresh token, so the cached login is removed and a warning says
//!   the next run needs a sign-in.
//! - stdout carries only the `ExecCredential`; every diagnostic goes to stderr; no token is
//!   ever written anywhere but stdout and the cache.

use std::{
    io::{IsTerminal, Write},
    path::PathBuf,
    process::ExitCode,
};

use jiff::Timestamp;

use super::{
    cache::{self, CacheDir, CacheEntry, Loaded},
    error::AuthError,
    exec_credential::{self, ExecInfo},
    flow::{self, DEFAULT_LOGIN_TIMEOUT, LoginOptions, Target},
    oidc::OidcClient,
};

/// Runs `ichor auth token`.
///
/// # Errors
/// See [`AuthError`]; the message says which command to run when a login is needed.
pub fn run(target: Target, ca_file: Option<PathBuf>) -> Result<ExitCode, AuthError> {
    let dir = CacheDir::from_env()?;
    let info = exec_credential::parse_exec_info(std::env::var("KUBERNETES_EXEC_INFO").ok().as_deref());
    let key = target.key();
    let interactive = exec_credential::interactive_allowed(&info, std::io::stdin().is_terminal());
    match dir.load(&key) {
        Loaded::Usable(entry) if entry.is_fresh(Timestamp::now()) => print_credential(&info, &entry),
        // Nothing to refresh and no way to sign in: fail at once, without creating anything.
        Loaded::Absent if !interactive => Err(login_required(&target)),
        Loaded::Usable(entry) if entry.refresh_token.is_none() && !interactive => {
            Err(login_required(&target))
        }
        _ => slow_path(&dir, &target, ca_file, &info, interactive),
    }
}

/// The cached path alone: prints the `ExecCredential` when the login cache of `target` holds an
/// ID token with at least 30 s left, and answers `None` (having written nothing) otherwise, for
/// [`run`] to take over. The `ichor` executable calls only this, so it links no runtime, TLS or
/// HTTP code.
///
/// # Errors
/// The `Some` error: the token's `exp` is not a time, or stdout cannot be written.
pub fn run_cached(target: &Target) -> Option<Result<ExitCode, AuthError>> {
    let dir = CacheDir::from_env().ok()?;
    match dir.load(&target.key()) {
        Loaded::Usable(entry) if entry.is_fresh(Timestamp::now()) => {
            let info =
                exec_credential::parse_exec_info(std::env::var("KUBERNETES_EXEC_INFO").ok().as_deref());
            Some(print_credential(&info, &entry))
        }
        _ => None,
    }
}

fn slow_path(
    dir: &CacheDir,
    target: &Target,
    ca_file: Option<PathBuf>,
    info: &ExecInfo,
    interactive: bool,
) -> Result<ExitCode, AuthError> {
    let lock = dir.lock(&target.key())?;
    let cached = match lock.load() {
        Loaded::Usable(e) => Some(*e),
        Loaded::Absent => None,
        Loaded::Unusable(reason) => {
            eprintln!("{}", lock.settle(reason, &target.login_command())?);
            None
        }
    };
    let now = Timestamp::now();
    if let Some(entry) = &cached
        && entry.is_fresh(now)
    {
        return print_credential(info, entry);
    }
    let refreshable = cached.filter(|e| e.refresh_token.is_some());
    if refreshable.is_none() && !interactive {
        return Err(login_required(target));
    }
    let entry = flow::runtime()?.block_on(async {
        let client = OidcClient::new(ca_file.as_deref())?;
        if let Some(entry) = &refreshable {
            match flow::refresh(&client, target, entry, now).await {
                Ok(fresh) => return Ok(fresh),
                Err(e) if e.is_invalid_grant() => {
                    lock.remove()?;
                    let description = match &e {
                        AuthError::OAuth {
                            description: Some(d), ..
                        } => d.clone(),
                        _ => "the refresh token was refused".to_owned(),
                    };
                    if !interactive {
                        return Err(AuthError::SessionEnded {
                            issuer: target.issuer.to_string(),
                            description,
                            login_command: target.login_command(),
                        });
                    }
                    eprintln!("{}", session_ended_notice(target.issuer.as_str(), &description));
                }
                Err(e) => return Err(e),
            }
        }
        let options = LoginOptions {
            open_browser: true,
            timeout: DEFAULT_LOGIN_TIMEOUT,
        };
        flow::login(&client, target, options, now).await
    })?;
    // The issuer has handed out new tokens (and may have retired the cached refresh token): the
    // valid ID token is printed even when they cannot be stored.
    if let Err(warning) = lock.store_fresh(&entry, &target.login_command()) {
        eprintln!("{warning}");
    }
    if entry.exp_too_far_ahead(Timestamp::now()) {
        eprintln!(
            "warning: the new ID token from {} expires more than {} s from now by this machine's \
             clock, longer than Ichor issues tokens for; is the clock right? Until it is, every \
             run refreshes the login.",
            target.issuer,
            cache::MAX_EXP_AHEAD_SECONDS
        );
    }
    print_credential(info, &entry)
}

/// The notice of an interactive run whose session ended: `description` is the issuer's
/// `error_description`, printed with control characters escaped. Pure.
fn session_ended_notice(issuer: &str, description: &str) -> String {
    format!(
        "The session at {issuer} has ended ({}); signing in again.",
        crate::terminal::escape_controls(description)
    )
}

fn login_required(target: &Target) -> AuthError {
    AuthError::LoginRequired {
        issuer: target.issuer.to_string(),
        audience: target.audience.clone(),
        login_command: target.login_command(),
    }
}

fn print_credential(info: &ExecInfo, entry: &CacheEntry) -> Result<ExitCode, AuthError> {
    let text = exec_credential::render(info.api_version, entry.id_token.expose(), entry.id_token_exp)
        .map_err(|e| AuthError::IdToken {
            issuer: entry.issuer.clone(),
            reason: e.to_string(),
        })?;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(AuthError::Stdout)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The issuer's `error_description` reaches the terminal: an issuer that sends escape
    /// sequences (retitle the window, clear the screen) has them printed as text.
    #[test]
    fn the_session_ended_notice_escapes_the_issuers_description() {
        let notice = session_ended_notice("https://i.example", "gone\u{1b}]0;owned\u{7}\u{1b}[2J");
        assert!(
            !notice.contains('\u{1b}') && !notice.contains('\u{7}'),
            "{notice:?}"
        );
        assert!(notice.contains("gone\\u{1b}]0;owned\\u{7}\\u{1b}[2J"), "{notice}");
    }
}
