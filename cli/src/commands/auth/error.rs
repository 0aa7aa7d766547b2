//! The errors of `ichor auth …`: each one a sentence that says what to do, naming the flag,
//! field or file involved. No variant ever carries a token.

use std::path::{Path, PathBuf};

use super::{
    cache::{CACHE_VERSION, Unsafe},
    retry::Grant,
};

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
    /// [`Unsafe`]), so it is not used; the advice depends on what it is ([`unsafe_fix`]).
    #[error(
        "login cache {path}: {problem}; ichor never makes it so, so it is not used: {}",
        unsafe_fix(path, problem)
    )]
    CacheUnsafe {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong with it.
        problem: Unsafe,
    },
    /// `~/.ichor` or the cache directory belongs to another user: made by `sudo ichor`, or this
    /// run is root's with another user's `HOME` ([`ownership_advice`]).
    #[error("{}", ownership_advice(path, *owner, *you))]
    CacheNotYours {
        /// The directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// This process's effective uid.
        you: u32,
    },
    /// A cache or lock file of this user that cannot be opened: its mode denies this user. It is
    /// kept as it is.
    #[error(
        "login cache {path}: permission denied: its mode is {mode:04o}, and ichor makes it 0600; run \
         `chmod 600 {}` (the login in it is kept)",
        shell_quoted(path)
    )]
    CacheDenied {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// New tokens were written to the cache file, but its directory could not be synced: the file
    /// is kept, and may not survive a crash.
    #[error(
        "login cache {path}: the new login is saved, but the directory could not be synced ({source}), \
         so it may not survive a crash"
    )]
    CacheNotSynced {
        /// The file.
        path: PathBuf,
        /// The operating system's answer.
        source: std::io::Error,
    },
    /// The directory holding the cache directory (`~/.ichor`) is not one only this user can
    /// write into (see [`Unsafe`]), so the cache inside it is not used.
    #[error(
        "login cache: {path}, the directory that holds it, is not used: {problem}; whoever else can \
         write into it could put a directory of theirs in place of the cache and receive your tokens. \
         If it is yours, run `chmod go-w {}`; otherwise move it away and sign in again, and ichor \
         creates it anew (mode 0700)",
        shell_quoted(path)
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
         finish or end it (`lsof {}` names it), then retry",
        shell_quoted(path)
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
    /// The issuer asked to wait before a token request is sent again (`429 slow_down`, or a
    /// `503` with `Retry-After`) for longer than the request still waits: nothing was consumed,
    /// and the message says when to try again.
    #[error(
        "{what} at {url}: {} ({error}{}): it asks to wait {asked} s before trying again, longer than \
         the {left} s this run still waits; {}",
        .grant.refusal(*.unavailable),
        .description.as_deref().map(|d| format!(": {d}")).unwrap_or_default(),
        .grant.advice(*.asked)
    )]
    WaitTooLong {
        /// Which request (token request).
        what: &'static str,
        /// The URL requested.
        url: String,
        /// The grant requested, which says what the issuer limits.
        grant: Grant,
        /// Whether the issuer answered 503 (unavailable) rather than 429 (a limit).
        unavailable: bool,
        /// The OAuth `error` code or the HTTP status, control characters escaped.
        error: String,
        /// The `error_description`, if any, control characters escaped.
        description: Option<String>,
        /// The wait the issuer asked for, seconds.
        asked: u64,
        /// What this run would still have waited, seconds.
        left: u64,
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

/// `path` as a shell word: as it is when it holds only characters no shell treats specially,
/// otherwise in single quotes. Pure.
pub fn shell_quoted(path: &Path) -> String {
    let text = path.display().to_string();
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+,:@%=".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// What to do about a cache directory or file that is not one this ichor makes. Pure.
///
/// A link is removed (its target is left alone); a mount point is not removed (`rmdir` of a mount
/// fails, and removing what is in it would empty the mounted file system): it is unmounted, or the
/// cache is given another home.
pub fn unsafe_fix(path: &Path, problem: &Unsafe) -> String {
    let q = shell_quoted(path);
    match problem {
        Unsafe::Link => format!(
            "check who put it there, then remove the link (`rm {q}`; what it points to is left alone)"
        ),
        Unsafe::MountPoint => format!(
            "something is mounted there: unmount it (`umount {q}`) or set HOME to another directory \
             (removing it would fail, or empty what is mounted)"
        ),
        _ => "check who put it there, then remove it".to_owned(),
    }
}

/// What to say about `path` (`~/.ichor` or the cache directory) belonging to `owner` when this
/// process's effective uid is `you`. Pure.
///
/// Root with another user's `HOME` (`sudo` without `-H`) must not be told to take the directory:
/// that would hand the user's cache to root. A directory of root's seen by a user was most likely
/// made by `sudo ichor`.
pub fn ownership_advice(path: &Path, owner: u32, you: u32) -> String {
    let (p, q) = (path.display(), shell_quoted(path));
    if you == 0 {
        format!(
            "login cache: {p} belongs to uid {owner}: ichor is running as root with another user's \
             HOME; run ichor as that user without sudo, or with `sudo -H` so root uses its own home \
             (do not change the owner of {p})"
        )
    } else if owner == 0 {
        format!(
            "login cache: {p} is owned by root (uid 0), not you (uid {you}): it was probably created \
             by running ichor with sudo; run `sudo chown -R {you} {q}` or remove it"
        )
    } else {
        format!(
            "login cache: {p} belongs to uid {owner}, not you (uid {you}), so it is not used: whoever \
             owns it could put a directory of theirs in place of the cache and receive your tokens. \
             If it is yours, run `sudo chown -R {you} {q}`; otherwise move it away, and ichor creates \
             it anew (mode 0700)"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sudo ichor …` left a `~/.ichor` of root's: the user is told whose it is and how to take it.
    #[test]
    fn a_directory_of_roots_seen_by_a_user_says_sudo_made_it_and_how_to_take_it() {
        let text = ownership_advice(Path::new("/home/ann/.ichor"), 0, 1000);
        assert!(
            text.contains("/home/ann/.ichor is owned by root (uid 0), not you (uid 1000)")
                && text.contains("sudo")
                && text.contains("`sudo chown -R 1000 /home/ann/.ichor`")
                && text.contains("remove it"),
            "{text}"
        );
    }

    /// Root with the user's `HOME` (sudo without -H): never advised to take the user's directory.
    #[test]
    fn root_with_another_users_home_is_told_to_drop_sudo_never_to_chown() {
        let path = Path::new("/home/ann/.ichor");
        let text = ownership_advice(path, 1000, 0);
        assert!(
            text.contains("running as root with another user's HOME")
                && text.contains("without sudo")
                && text.contains("sudo -H")
                && text.contains("/home/ann/.ichor"),
            "{text}"
        );
        assert!(!text.contains("chown"), "{text}");
        let refusal = AuthError::CacheNotYours {
            path: path.into(),
            owner: 1000,
            you: 0,
        }
        .to_string();
        assert_eq!(refusal, text);
    }

    /// A mount point is not removed (an `rmdir` of it fails, an `rm -r` empties the mounted file
    /// system); a link is.
    #[test]
    fn a_mount_point_is_unmounted_and_a_link_removed() {
        let path = Path::new("/home/ann/.ichor/auth");
        let mount = AuthError::CacheUnsafe {
            path: path.into(),
            problem: Unsafe::MountPoint,
        }
        .to_string();
        assert!(
            mount.contains("umount /home/ann/.ichor/auth") && mount.contains("HOME"),
            "{mount}"
        );
        assert!(!mount.contains("remove it") && !mount.contains("rm "), "{mount}");
        let link = AuthError::CacheUnsafe {
            path: path.into(),
            problem: Unsafe::Link,
        }
        .to_string();
        assert!(
            link.contains("remove the link (`rm /home/ann/.ichor/auth`"),
            "{link}"
        );
    }

    #[test]
    fn a_path_is_quoted_for_the_shell_only_when_it_must_be() {
        assert_eq!(shell_quoted(Path::new("/home/a-b/.ichor")), "/home/a-b/.ichor");
        assert_eq!(shell_quoted(Path::new("/home/a b/it's")), r"'/home/a b/it'\''s'");
        assert_eq!(shell_quoted(Path::new("/x/$(reboot)")), "'/x/$(reboot)'");
    }

    /// `fuser` is not on macOS; `lsof` is on both.
    #[test]
    fn the_lock_timeout_names_a_tool_every_platform_has() {
        let text = AuthError::LockTimeout {
            path: "/home/ann/.ichor/auth/x.lock".into(),
            seconds: 360,
        }
        .to_string();
        assert!(text.contains("`lsof /home/ann/.ichor/auth/x.lock`"), "{text}");
        assert!(!text.contains("fuser"), "{text}");
    }
}
