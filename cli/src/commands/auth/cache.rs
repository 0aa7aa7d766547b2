//! The login cache: `~/.ichor/auth/<sha256(issuer, client, audience)>.json`, one file per
//! login, and a lock file beside it that serialises the processes refreshing that login.
//!
//! # Guarantees
//! - The directory is created 0700 (and narrowed to 0700 if it exists wider); files are 0600.
//! - A write is atomic: a new file in the same directory is written, fsynced and renamed over
//!   the old one, then the directory is fsynced. A reader sees the old or the new file, never a
//!   mix, so the fast path reads without the lock. Every write, rename, removal and sync goes
//!   through the directory's descriptor, opened and checked once ([`CacheDir::ensure`]), never
//!   by path: a name swapped for a link or a FIFO after the check redirects or stalls nothing.
//!   The lock keeps that descriptor ([`CacheLock`]): the read, write and removal under a lock go
//!   to the directory the lock was taken in, even if `auth` is renamed meanwhile.
//! - `~/.ichor`, which holds the directory, is opened once (following a link: dotfiles are often
//!   links) and must be this user's; a wider one is narrowed (group and other write dropped), and
//!   `auth` is opened relative to it and must be on its file system (not a mount point): see
//!   [`dirs`]. Whoever could write into `~/.ichor` could otherwise put a directory of theirs in
//!   place of `auth` and receive the refreshed tokens. A narrowing is said once on stderr (stdout
//!   is the `ExecCredential`). Either directory of another user, found by its owner or by a
//!   denied open, is refused saying whose it is and what to do ([`AuthError::CacheNotYours`]):
//!   a user is told how to take back a directory `sudo ichor` made; root with another user's
//!   `HOME` is told to drop `sudo` (or use `sudo -H`), never to take the user's directory.
//! - A read is bounded ([`MAX_CACHE_BYTES`]) and strict (unknown fields and other versions are
//!   refused); a file that does not parse is reported as [`Loaded::Unusable`], never a panic,
//!   and the report names only the line and column, never a fragment of the file (a token).
//! - The fast path answers kubectl without the lock, so a read creates and changes nothing and
//!   uses only what this ichor makes ([`files`]): the directory must be a directory of this user
//!   that neither group nor others can write into (not a link), and the file a regular file of this
//!   user with mode 0600 and one link, opened in that directory without following a link or
//!   waiting on a FIFO and checked on the opened descriptor. Anything else is
//!   [`Loaded::Unusable`]; the locked path then refuses it with [`AuthError::CacheUnsafe`],
//!   which names the file and says to remove it.
//! - The lock file passes the same check after it is opened, and the lock is waited for at most
//!   [`LOCK_WAIT`] (longer than a browser sign-in, which holds it): a waiting run says once on
//!   stderr which lock it waits for, and gives up with [`AuthError::LockTimeout`].
//! - Under the lock, an unusable file is removed only when it can never become usable (it does
//!   not parse, is too large, holds another login); a read error or a newer ichor's file is kept
//!   and the run fails saying why ([`lock::disposition`]). A file whose open is denied is told
//!   apart from a read error by what it is (`fstatat`): a socket or another user's file is
//!   refused, a file of this user whose mode denies it names the `chmod`; both are kept.
//! - New tokens renamed into place whose directory sync then fails are kept, with a warning that
//!   they may not survive a crash ([`CacheLock::store_fresh`]).
//! - A cached ID token is used only while its `exp` is between [`FRESH_MARGIN_SECONDS`] and
//!   [`MAX_EXP_AHEAD_SECONDS`] ahead of now: Ichor issues no token for longer than
//!   [`MAX_TOKEN_TTL_SECONDS`], so an `exp` further ahead (a clock far off, or an edited
//!   file) is treated as expired and the login refreshed, never kept until logout.
//!
//! Everything here is plain synchronous std code: `ichor auth token`'s fast path uses it
//! without an async runtime.

mod dirs;
mod files;
pub mod listing;
pub mod lock;

use std::{
    fs::File,
    path::{Path, PathBuf},
    time::Duration,
};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{error::AuthError, flow::DEFAULT_LOGIN_TIMEOUT, secret::Secret};
use dirs::{Access, DirError};
pub use files::Unsafe;
pub use listing::{Listed, Listing};
pub use lock::CacheLock;

/// The format version of a cache file.
pub const CACHE_VERSION: u32 = 1;
/// The largest cache file read (a real one is about 3 KiB).
pub const MAX_CACHE_BYTES: u64 = 64 * 1024;
/// A cached ID token is used only while it has at least this long left.
pub const FRESH_MARGIN_SECONDS: i64 = 30;
/// The longest ID-token lifetime Ichor issues (`spec.users.tokenTTL` and the issuer's
/// `--token-ttl` are at most 15 minutes).
pub const MAX_TOKEN_TTL_SECONDS: i64 = ichor_renderers::crd::UsersSettings::MAX_TOKEN_TTL.as_secs();
/// How far ahead of this machine's clock a cached `exp` may be: the longest lifetime plus five
/// minutes for a clock behind the issuer's. Further ahead, the entry is treated as expired.
pub const MAX_EXP_AHEAD_SECONDS: i64 = MAX_TOKEN_TTL_SECONDS + 5 * 60;
/// The longest wait for a login's lock: a browser sign-in holds it up to
/// [`DEFAULT_LOGIN_TIMEOUT`], then one token request; a run waiting behind it gets its result,
/// and a lock never released ends in an error instead of a kubectl that hangs.
pub const LOCK_WAIT: Duration = Duration::from_secs(DEFAULT_LOGIN_TIMEOUT.as_secs() + 60);

/// Which login a cache file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheKey {
    /// The issuer URL.
    pub issuer: String,
    /// The OAuth client id.
    pub client_id: String,
    /// The audience of the ID token.
    pub audience: String,
}

impl CacheKey {
    /// The file name stem: hex SHA-256 over the three values, each length-prefixed so no two
    /// keys share a stem.
    pub fn file_stem(&self) -> String {
        let mut h = Sha256::new();
        for part in [&self.issuer, &self.client_id, &self.audience] {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part.as_bytes());
        }
        hex::encode(h.finalize())
    }
}

/// The issuer's endpoints, kept so a refresh needs no discovery round trip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Endpoints {
    /// `authorization_endpoint`.
    pub authorization: String,
    /// `token_endpoint`.
    pub token: String,
    /// `revocation_endpoint` (RFC 7009), when the issuer has one.
    pub revocation: Option<String>,
}

/// One cached login.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CacheEntry {
    /// Format version, [`CACHE_VERSION`].
    pub v: u32,
    /// The issuer URL.
    pub issuer: String,
    /// The OAuth client id.
    pub client_id: String,
    /// The audience asked for.
    pub audience: String,
    /// The issuer's endpoints from discovery.
    pub endpoints: Option<Endpoints>,
    /// The user (`sub` of the ID token).
    pub subject: String,
    /// The user's groups (`groups` of the ID token).
    pub groups: Vec<String>,
    /// The ID token.
    pub id_token: Secret,
    /// The ID token's `exp`, seconds since the epoch.
    pub id_token_exp: i64,
    /// The refresh token, when the issuer gave one.
    pub refresh_token: Option<Secret>,
}

impl CacheEntry {
    /// Which login this is.
    pub fn key(&self) -> CacheKey {
        CacheKey {
            issuer: self.issuer.clone(),
            client_id: self.client_id.clone(),
            audience: self.audience.clone(),
        }
    }

    /// Whether the ID token has at least [`FRESH_MARGIN_SECONDS`] left at `now`, and at most
    /// [`MAX_EXP_AHEAD_SECONDS`] (a longer one is not one Ichor issued at `now`).
    pub fn is_fresh(&self, now: Timestamp) -> bool {
        let left = self.id_token_exp.saturating_sub(now.as_second());
        (FRESH_MARGIN_SECONDS..=MAX_EXP_AHEAD_SECONDS).contains(&left)
    }

    /// Whether the ID token's `exp` is further ahead of `now` than any Ichor issues, which
    /// [`Self::is_fresh`] never accepts: this machine's clock is behind the issuer's.
    pub fn exp_too_far_ahead(&self, now: Timestamp) -> bool {
        self.id_token_exp.saturating_sub(now.as_second()) > MAX_EXP_AHEAD_SECONDS
    }
}

/// Why a cache file cannot be used. Under the lock it is then refused, removed or kept as
/// [`lock::disposition`] decides; `ichor auth logout` removes it.
#[derive(Debug, thiserror::Error)]
pub enum UnusableCache {
    /// The file (or its directory) could not be read.
    #[error("it cannot be read: {0}")]
    Read(#[source] std::io::Error),
    /// The file is larger than any this ichor writes.
    #[error("it is larger than {MAX_CACHE_BYTES} bytes")]
    TooLarge,
    /// The file is this user's, but its mode denies this user (`EACCES`): it is kept, and the
    /// error says how to make it readable again.
    #[error("it cannot be opened: permission denied (mode {mode:04o}; ichor makes it 0600)")]
    Denied {
        /// Its permission bits.
        mode: u32,
    },
    /// The file was removed between listing and reading it.
    #[error("it vanished while being read")]
    Vanished,
    /// The file is not a cache entry. Only the place is kept: a parser's message can quote the
    /// input, and the input holds tokens.
    #[error("it does not parse as a login cache entry ({what} at line {line}, column {column})")]
    Parse {
        /// What kind of mistake, in words that quote nothing.
        what: &'static str,
        /// The line of the mistake (1-based).
        line: usize,
        /// The column of the mistake (1-based).
        column: usize,
    },
    /// The entry is of another format version.
    #[error("v is {0}, this ichor reads only {CACHE_VERSION}")]
    Version(u32),
    /// The entry is of another login than the one asked for.
    #[error("it holds another login (issuer, client or audience differ)")]
    OtherLogin,
    /// Not a file this ichor writes (see [`Unsafe`]): a link, a FIFO, another user's file, a
    /// file others may read or write, a hard-linked one.
    #[error("{0}")]
    NotPrivate(Unsafe),
    /// The cache directory, or `~/.ichor` holding it, is not one this ichor makes or accepts
    /// (see [`Unsafe`]).
    #[error("the directory {}: {problem}", path.display())]
    Directory {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        problem: Unsafe,
    },
}

impl UnusableCache {
    /// What is wrong when the file or the directory is not one this ichor makes: then it is not
    /// replaced in silence but refused ([`CacheDir::refusal`]).
    pub fn problem(&self) -> Option<&Unsafe> {
        match self {
            Self::NotPrivate(p) | Self::Directory { problem: p, .. } => Some(p),
            _ => None,
        }
    }
}

/// Parses a cache file strictly.
///
/// # Errors
/// Why the file is unusable: it does not parse, or is of another version.
pub fn parse(bytes: &[u8]) -> Result<CacheEntry, UnusableCache> {
    let entry: CacheEntry = serde_json::from_slice(bytes).map_err(|e| UnusableCache::Parse {
        what: match e.classify() {
            serde_json::error::Category::Syntax => "not JSON",
            serde_json::error::Category::Eof => "the file ends early",
            serde_json::error::Category::Data => "a field is unknown, missing or of the wrong type",
            serde_json::error::Category::Io => "a read error",
        },
        line: e.line(),
        column: e.column(),
    })?;
    if entry.v != CACHE_VERSION {
        return Err(UnusableCache::Version(entry.v));
    }
    Ok(entry)
}

/// The outcome of reading one cache file.
#[derive(Debug)]
pub enum Loaded {
    /// No file.
    Absent,
    /// A valid entry for the key asked for.
    Usable(Box<CacheEntry>),
    /// A file that cannot be used (corrupt, too large, another version, another login, not one
    /// this ichor makes); what the locked path does with it is [`lock::disposition`].
    Unusable(UnusableCache),
}

/// The error that refuses an unusable `file` in the cache directory `dir` that is not one this
/// ichor makes ([`UnusableCache::problem`]), naming the file or the directory; `None` otherwise.
fn refusal_for(dir: &Path, file: &Path, reason: &UnusableCache) -> Option<AuthError> {
    match reason {
        UnusableCache::Directory { path, problem } => {
            Some(directory_refusal(dir, path.clone(), problem.clone()))
        }
        UnusableCache::NotPrivate(problem) => Some(AuthError::CacheUnsafe {
            path: file.to_owned(),
            problem: problem.clone(),
        }),
        UnusableCache::Denied { mode } => Some(AuthError::CacheDenied {
            path: file.to_owned(),
            mode: *mode,
        }),
        _ => None,
    }
}

/// The error that refuses `path`, the cache directory `dir` or `~/.ichor` holding it, for
/// `problem`: another user's directory says whose it is and what to do
/// ([`AuthError::CacheNotYours`]).
fn directory_refusal(dir: &Path, path: PathBuf, problem: Unsafe) -> AuthError {
    match problem {
        Unsafe::OtherOwner { owner, you } => AuthError::CacheNotYours { path, owner, you },
        problem if path != dir => AuthError::CacheParentUnsafe { path, problem },
        problem => AuthError::CacheUnsafe { path, problem },
    }
}

/// The opened cache directory, once a narrowed `~/.ichor` is said on stderr (stdout carries the
/// `ExecCredential` kubectl parses).
fn announce(opened: dirs::Opened) -> File {
    if let Some(narrowed) = &opened.narrowed {
        eprintln!("{}", narrowed.notice());
    }
    opened.dir
}

/// The directory of cache files.
#[derive(Debug, Clone)]
pub struct CacheDir {
    path: PathBuf,
    /// The user whose directory and files these must be: this process's effective uid.
    you: u32,
}

impl CacheDir {
    /// The cache directory at `path` (`~/.ichor/auth`); the directory holding it is checked too
    /// (see [`dirs`]).
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            you: rustix::process::geteuid().as_raw(),
        }
    }

    /// The same directory, checked as belonging to the user `you` instead of this process's: a
    /// test's way to see directories of another user.
    #[cfg(test)]
    fn seen_by(self, you: u32) -> Self {
        Self { you, ..self }
    }

    /// `$HOME/.ichor/auth`.
    ///
    /// # Errors
    /// [`AuthError::HomeUnset`] when `HOME` is unset or empty.
    pub fn from_env() -> Result<Self, AuthError> {
        match std::env::var_os("HOME") {
            Some(home) if !home.is_empty() => Ok(Self::new(PathBuf::from(home).join(".ichor").join("auth"))),
            _ => Err(AuthError::HomeUnset),
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The cache file of a login.
    pub fn file_for(&self, key: &CacheKey) -> PathBuf {
        self.path.join(format!("{}.json", key.file_stem()))
    }

    fn lock_file_for(&self, key: &CacheKey) -> PathBuf {
        self.path.join(format!("{}.lock", key.file_stem()))
    }

    /// The error for a directory that cannot be opened as asked.
    fn dir_error(&self, e: DirError) -> AuthError {
        match e {
            DirError::Absent => AuthError::CacheIo {
                path: self.path.clone(),
                action: "open the directory",
                source: std::io::ErrorKind::NotFound.into(),
            },
            DirError::Unsafe { path, problem } => directory_refusal(&self.path, path, problem),
            DirError::Io { path, action, source } => AuthError::CacheIo { path, action, source },
        }
    }

    /// Reads the cache file of `key` without the lock, creating and changing nothing (see the
    /// module's guarantees). Never fails: any problem is [`Loaded::Unusable`].
    pub fn load(&self, key: &CacheKey) -> Loaded {
        let dir = match dirs::open(&self.path, Access::Read, self.you) {
            Ok(opened) => opened.dir,
            Err(DirError::Absent) => return Loaded::Absent,
            Err(DirError::Unsafe { path, problem }) => {
                return Loaded::Unusable(UnusableCache::Directory { path, problem });
            }
            Err(DirError::Io { source, .. }) => return Loaded::Unusable(UnusableCache::Read(source)),
        };
        match files::read_bounded(&dir, &format!("{}.json", key.file_stem()), self.you) {
            Ok(None) => Loaded::Absent,
            Err(reason) => Loaded::Unusable(reason),
            Ok(Some(bytes)) => match parse(&bytes) {
                Ok(entry) if entry.key() == *key => Loaded::Usable(Box::new(entry)),
                Ok(_) => Loaded::Unusable(UnusableCache::OtherLogin),
                Err(reason) => Loaded::Unusable(reason),
            },
        }
    }

    /// The error that refuses an unusable cache of `key` that is not one this ichor makes
    /// ([`UnusableCache::problem`]), naming the file or the directory; `None` for a file that
    /// is only corrupt, too large or of another version.
    pub fn refusal(&self, key: &CacheKey, reason: &UnusableCache) -> Option<AuthError> {
        refusal_for(&self.path, &self.file_for(key), reason)
    }

    /// Creates `~/.ichor` and the directory 0700 where missing, narrows a wider one of this user
    /// (see [`dirs`]), and returns the directory opened and checked. Every write of the cache
    /// goes through this descriptor, never by path: what was checked is where the tokens go,
    /// even if the name is swapped for a link or a FIFO afterwards.
    ///
    /// # Errors
    /// [`AuthError::CacheUnsafe`] when it is a link, a mount point, not a directory or another
    /// user's; [`AuthError::CacheParentUnsafe`] when `~/.ichor` is another user's;
    /// [`AuthError::CacheIo`] naming the directory.
    pub fn ensure(&self) -> Result<File, AuthError> {
        dirs::open(&self.path, Access::Create, self.you)
            .map(announce)
            .map_err(|e| self.dir_error(e))
    }

    /// Takes the exclusive lock of `key`, waiting at most [`LOCK_WAIT`] for another process
    /// that holds it and saying so once on stderr. Creates the directory first.
    ///
    /// # Errors
    /// See [`Self::lock_within`].
    pub fn lock(&self, key: &CacheKey) -> Result<CacheLock, AuthError> {
        self.lock_within(key, LOCK_WAIT, &mut |path| {
            eprintln!(
                "Waiting for another `ichor auth` run that holds the login lock {} (a browser sign-in \
                 can take {} s); giving up after {} s.",
                path.display(),
                DEFAULT_LOGIN_TIMEOUT.as_secs(),
                LOCK_WAIT.as_secs()
            );
        })
    }

    /// Takes the exclusive lock of `key`, waiting at most `wait`; `on_wait` is called once, with
    /// the lock file, when another process holds it. Creates the directory first; the lock keeps
    /// its checked descriptor for everything done under it.
    ///
    /// # Errors
    /// [`AuthError::CacheUnsafe`] when the directory or the lock file is not one this ichor
    /// makes; [`AuthError::LockTimeout`] when the lock is still held at the deadline;
    /// [`AuthError::CacheIo`] naming the lock file.
    pub fn lock_within(
        &self,
        key: &CacheKey,
        wait: Duration,
        on_wait: &mut dyn FnMut(&Path),
    ) -> Result<CacheLock, AuthError> {
        let dir = self.ensure()?;
        let path = self.lock_file_for(key);
        let name = format!("{}.lock", key.file_stem());
        let file = files::open_lock(&dir, &self.path, &name, self.you)?;
        files::lock_within(&file, &path, wait, on_wait)?;
        Ok(CacheLock {
            dir,
            dir_path: self.path.clone(),
            key: key.clone(),
            you: self.you,
            _file: file,
        })
    }

    /// Writes an entry atomically without taking its login's lock (see the module's
    /// guarantees): for a caller that no other process races, such as a test seeding a login.
    /// Creates the directory first. A refresh or sign-in stores through [`CacheLock::store`].
    ///
    /// # Errors
    /// [`AuthError::CacheIo`] naming the file.
    pub fn store(&self, entry: &CacheEntry) -> Result<(), AuthError> {
        let dir = self.ensure()?;
        self.store_in(&dir, entry)
    }

    /// Writes an entry atomically into `dir`, this directory as [`Self::ensure`] opened and
    /// checked it, through its descriptor only.
    ///
    /// # Errors
    /// [`AuthError::CacheIo`] naming the file.
    pub fn store_in(&self, dir: &File, entry: &CacheEntry) -> Result<(), AuthError> {
        let name = format!("{}.json", entry.key().file_stem());
        lock::store_in(dir, self.path.join(&name), &name, entry)
    }

    /// Every cache file and leftover temporary file in the directory, read through its checked
    /// descriptor, which [`Listing::remove`] uses too. Creates nothing (an absent directory is
    /// empty) but narrows a wider `~/.ichor` or directory of this user, as [`Self::ensure`] does.
    ///
    /// # Errors
    /// [`AuthError::CacheUnsafe`] or [`AuthError::CacheParentUnsafe`] when the directory or
    /// `~/.ichor` is not one this ichor accepts; [`AuthError::CacheIo`] when it cannot be listed.
    pub fn listing(&self) -> Result<Listing, AuthError> {
        let dir = match dirs::open(&self.path, Access::Repair, self.you) {
            Ok(opened) => Some(announce(opened)),
            Err(DirError::Absent) => None,
            Err(e) => return Err(self.dir_error(e)),
        };
        Listing::read(dir, self.path.clone(), self.you)
    }

    /// Every cache file in the directory, sorted by file name; see [`Self::listing`].
    ///
    /// # Errors
    /// See [`Self::listing`].
    pub fn list(&self) -> Result<Vec<Listed>, AuthError> {
        Ok(self.listing()?.files)
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_access;
#[cfg(test)]
mod tests_home;
