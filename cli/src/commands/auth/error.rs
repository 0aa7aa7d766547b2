//! The errors of `ichor auth …`: each one a sentence that says what to do, naming the flag,
//! field or file involved. No variant ever carries a token.

use std::path::PathBuf;

use super::cache::{CACHE_VERSION, Unsafe};

/// Why an `ichor auth` step failed.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// A URL (the issuer or an endpoint from discovery) is not acceptable.
    #[error("{field}: {url:?} is not a usable URL: {reason}")]
    BadUrl {
        /// Which flag or discovery field held it.
        field: &'static str,
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Plain http to a host that is not the loopback.
    #[error(
        "{field}: {url:?} uses plain http, which is allowed only to the loopback (127.0.0.0/8, ::1, \
         localhost); use https"
    )]
    InsecureUrl {
        /// Which flag or discovery field held it.
        field: &'static str,
        /// The URL as given.
        url: String,
    },
    /// `--scope` is not a scope a login can ask for.
    #[error("--scope {0:?} must include openid and be at most 512 characters")]
    Scope(String),
    /// `$HOME` is unset, so the cache has no place.
    #[error("HOME is not set, so the login cache (~/.ichor/auth) has no place; set HOME")]
    HomeUnset,
    /// Reading, writing or locking a cache file failed.
    #[error("login cache {path}: cannot {action}: {source}")]
    CacheIo {
        /// The file or directory.
        path: PathBuf,
        /// What was being done (read, write, lock, create the directory …).
        action: &'static str,
        /// The operating system's answer.
        source: std::io::Error,
    },
    /// The cache directory, a cache file or a lock file is not one this ichor makes (see
    /// [`Unsafe`]), so it is not used.
    #[error(
        "login cache {path}: {problem}; ichor never makes it so, so it is not used: check who put it \
         there, then remove it"
    )]
    CacheUnsafe {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong with it.
        problem: Unsafe,
    },
    /// The directory holding the cache directory (`~/.ichor`) is not one only this user can
    /// write into (see [`Unsafe`]), so the cache inside it is not used.
    #[error(
        "login cache: {path}, the directory that holds it, is not used: {problem}; whoever else can \
         write into it could put a directory of theirs in place of the cache and receive your tokens. \
         If it is yours, make it yours alone (chown to you, chmod go-w); otherwise move it away and \
         sign in again, and ichor creates it anew (mode 0700)"
    )]
    CacheParentUnsafe {
        /// The directory (`~/.ichor`).
        path: PathBuf,
        /// What is wrong with it.
        problem: Unsafe,
    },
    /// The cache file could not be read for now (`EIO`, `EMFILE`, a network file system's
    /// timeout): it is kept as it is.
    #[error(
        "login cache {path}: cannot read it: {source}; it is kept as it is: try again, and if this \
         persists check the disk or file system that holds it"
    )]
    CacheRead {
        /// The file.
        path: PathBuf,
        /// The operating system's answer.
        source: std::io::Error,
    },
    /// The cache file is of a format this ichor does not read: a newer ichor wrote it. It is kept.
    #[error(
        "login cache {path} was written by a newer ichor (format v{found}; this one reads \
         v{CACHE_VERSION}), so it is left as it is: upgrade ichor, or run `{login_command}` to replace it \
         with a login this ichor can use"
    )]
    CacheVersion {
        /// The file.
        path: PathBuf,
        /// Its format version.
        found: u32,
        /// The exact command that replaces it.
        login_command: String,
    },
    /// Another process held the login's lock for longer than a browser sign-in may take. A lock
    /// (`flock`) is held only by a live process and ends with it: removing the file frees nothing.
    #[error(
        "login cache lock {path} is still held after {seconds} s by another ichor process (a \
         browser sign-in, or a kubectl stopped with Ctrl-Z?); the lock ends with that process: \
         finish or end it (`fuser -v {path}` names it), then retry"
    )]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
        /// How long this run waited.
        seconds: u64,
    },
    /// The `--ca-file` could not be used.
    #[error("--ca-file {path}: {reason}")]
    CaFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// There is no usable login and none may be started here.
    #[error(
        "no valid login for {issuer} (audience {audience}) and this run cannot sign in interactively; \
         run `{login_command}`"
    )]
    LoginRequired {
        /// The issuer URL.
        issuer: String,
        /// The audience.
        audience: String,
        /// The exact command to run.
        login_command: String,
    },
    /// The refresh token was refused (`invalid_grant`): the session is over.
    #[error(
        "the session at {issuer} has ended ({description}); the cached login was removed; run \
         `{login_command}`"
    )]
    SessionEnded {
        /// The issuer URL.
        issuer: String,
        /// The issuer's description of the refusal.
        description: String,
        /// The exact command to run.
        login_command: String,
    },
    /// An HTTP request did not complete.
    #[error("{what} at {url}: request failed: {reason}")]
    Http {
        /// Which request (discovery, token, revocation).
        what: &'static str,
        /// The URL requested (never carries a token).
        url: String,
        /// The transport's explanation.
        reason: String,
    },
    /// The server answered with an OAuth error or an unexpected status.
    #[error("{what} at {url}: the issuer refused: {error}{}", description_suffix(.description))]
    OAuth {
        /// Which request (discovery, token, revocation).
        what: &'static str,
        /// The URL requested.
        url: String,
        /// The OAuth `error` code or the HTTP status.
        error: String,
        /// The `error_description`, if any.
        description: Option<String>,
    },
    /// A server answer could not be understood.
    #[error("{what} at {url}: unexpected answer: {reason}")]
    BadResponse {
        /// Which request (discovery, token, revocation).
        what: &'static str,
        /// The URL requested.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The ID token in a token response is not one this login asked for.
    #[error("the ID token from {issuer} is unusable: {reason}")]
    IdToken {
        /// The issuer URL.
        issuer: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The issuer's discovery document names no RFC 7009 endpoint.
    #[error("{issuer} publishes no revocation_endpoint, so its refresh token stays valid until it expires")]
    NoRevocationEndpoint {
        /// The issuer URL.
        issuer: String,
    },
    /// The loopback login failed.
    #[error("sign-in failed: {0}")]
    Login(String),
    /// The browser did not come back in time.
    #[error("sign-in timed out after {seconds} s without the browser returning to the loopback address")]
    LoginTimeout {
        /// The timeout.
        seconds: u64,
    },
    /// The operating system's random source failed.
    #[error("cannot draw random bytes for PKCE, state and nonce: {0}")]
    Random(String),
    /// Writing the result to standard output failed.
    #[error("cannot write to standard output: {0}")]
    Stdout(std::io::Error),
    /// The async runtime of the network path could not start.
    #[error("cannot start the network runtime: {0}")]
    Runtime(std::io::Error),
}

fn description_suffix(description: &Option<String>) -> String {
    description
        .as_deref()
        .map(|d| format!(" ({d})"))
        .unwrap_or_default()
}
