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
//! - A read is bounded ([`MAX_CACHE_BYTES`]) and strict (unknown fields and other versions are
//!   refused); a file that does not parse is reported as [`Loaded::Unusable`], never a panic,
//!   and the report names only the line and column, never a fragment of the file (a token).
//! - The fast path answers kubectl without the lock, so a read creates nothing and uses only
//!   what this ichor makes ([`files`]): the directory must be a directory of this user that
//!   neither group nor others can write into (not a link), and the file a regular file of this
//!   user with mode 0600 and one link, opened in that directory without following a link or
//!   waiting on a FIFO and checked on the opened descriptor. Anything else is
//!   [`Loaded::Unusable`]; the locked path then refuses it with [`AuthError::CacheUnsafe`],
//!   which names the file and says to remove it.
//! - The lock file passes the same check after it is opened, and the lock is waited for at most
//!   [`LOCK_WAIT`] (longer than a browser sign-in, which holds it): a waiting run says once on
//!   stderr which lock it waits for, and gives up with [`AuthError::LockTimeout`].
//! - A cached ID token is used only while its `exp` is between [`FRESH_MARGIN_SECONDS`] and
//!   [`MAX_EXP_AHEAD_SECONDS`] ahead of now: Ichor issues no token for longer than
//!   [`MAX_TOKEN_TTL_SECONDS`], so an `exp` further ahead (a clock far off, or an edited
//!   file) is treated as expired and the login refreshed, never kept until logout.
//!
//! Everything here is plain synchronous std code: `ichor auth token`'s fast path uses it
//! without an async runtime.

mod files;

use std::{
    fs::{self, File},
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    time::Duration,
};

use jiff::Timestamp;
use rustix::{
    fs::{AtFlags, Mode, OFlags},
    io::Errno,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use ichor_server::atomic_file::write_atomic_in;

use super::{error::AuthError, flow::DEFAULT_LOGIN_TIMEOUT, secret::Secret};
use files::DirError;
pub use files::Unsafe;

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

/// Why a cache file cannot be used: it is then treated as absent and replaced by the next
/// write (`ichor auth logout` removes it).
#[derive(Debug, thiserror::Error)]
pub enum UnusableCache {
    /// The file could not be read.
    #[error("it cannot be read: {0}")]
    Read(#[source] std::io::Error),
    /// The file is larger than any this ichor writes.
    #[error("it is larger than {MAX_CACHE_BYTES} bytes")]
    TooLarge,
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
    /// The directory is not one this ichor makes (see [`Unsafe`]).
    #[error("the directory: {0}")]
    Directory(Unsafe),
}

impl UnusableCache {
    /// What is wrong when the file or the directory is not one this ichor makes: then it is not
    /// replaced in silence but refused ([`CacheDir::refusal`]).
    pub fn problem(&self) -> Option<&Unsafe> {
        match self {
            Self::NotPrivate(p) | Self::Directory(p) => Some(p),
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
    /// A file that cannot be used (corrupt, too large, another version, another login); it
    /// is treated as absent and replaced by the next write.
    Unusable(UnusableCache),
}

/// The directory of cache files.
#[derive(Debug, Clone)]
pub struct CacheDir {
    path: PathBuf,
}

/// A held lock on one login; released when dropped (the descriptor closes).
#[derive(Debug)]
pub struct CacheLock {
    _file: File,
}

/// One file found by [`CacheDir::list`].
#[derive(Debug)]
pub struct Listed {
    /// The file.
    pub path: PathBuf,
    /// Its entry, or why it is unusable.
    pub entry: Result<CacheEntry, UnusableCache>,
}

impl CacheDir {
    /// The cache directory at `path`.
    pub fn new(path: PathBuf) -> Self {
        Self { path }
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

    /// Reads the cache file of `key`, creating nothing (see the module's guarantees). Never
    /// fails: any problem is [`Loaded::Unusable`].
    pub fn load(&self, key: &CacheKey) -> Loaded {
        let dir = match files::open_dir(&self.path) {
            Ok(dir) => dir,
            Err(DirError::Absent) => return Loaded::Absent,
            Err(DirError::Unsafe(p)) => return Loaded::Unusable(UnusableCache::Directory(p)),
            Err(DirError::Io(e)) => return Loaded::Unusable(UnusableCache::Read(e)),
        };
        match files::read_bounded(&dir, &format!("{}.json", key.file_stem())) {
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
    /// is only corrupt, too large or of another version, which the next write replaces.
    pub fn refusal(&self, key: &CacheKey, reason: &UnusableCache) -> Option<AuthError> {
        let path = match reason {
            UnusableCache::Directory(_) => self.path.clone(),
            _ => self.file_for(key),
        };
        reason.problem().map(|problem| AuthError::CacheUnsafe {
            path,
            problem: problem.clone(),
        })
    }

    /// Creates the directory 0700, or narrows an existing one of this user to 0700, and returns
    /// it opened and checked ([`files::private_dir`]). Every write of the cache goes through
    /// this descriptor, never by path: what was checked is where the tokens go, even if the
    /// name is swapped for a link or a FIFO afterwards.
    ///
    /// # Errors
    /// [`AuthError::CacheUnsafe`] when it is a link, not a directory or another user's;
    /// [`AuthError::CacheIo`] naming the directory.
    pub fn ensure(&self) -> Result<File, AuthError> {
        let io = |action, source| AuthError::CacheIo {
            path: self.path.clone(),
            action,
            source,
        };
        if let Some(parent) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            use std::os::unix::fs::DirBuilderExt as _;
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(|e| io("create the directory", e))?;
        }
        match rustix::fs::mkdir(&self.path, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(io("create the directory", e.into())),
        }
        let refuse = |problem| AuthError::CacheUnsafe {
            path: self.path.clone(),
            problem,
        };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let dir = match rustix::fs::open(&self.path, flags, Mode::empty()) {
            Ok(fd) => File::from(fd),
            Err(Errno::LOOP | Errno::NOTDIR) => return Err(refuse(Unsafe::NotDirectory)),
            Err(e) => return Err(io("open the directory", e.into())),
        };
        let meta = dir.metadata().map_err(|e| io("read the directory", e))?;
        let you = rustix::process::geteuid().as_raw();
        if meta.uid() != you {
            return Err(refuse(Unsafe::OtherOwner {
                owner: meta.uid(),
                you,
            }));
        }
        if meta.mode() & 0o777 != 0o700 {
            rustix::fs::fchmod(&dir, Mode::from_raw_mode(0o700))
                .map_err(|e| io("set the directory to mode 0700", e.into()))?;
        }
        let meta = dir.metadata().map_err(|e| io("read the directory", e))?;
        files::private_dir(&meta, you).map_err(refuse)?;
        Ok(dir)
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
    /// the lock file, when another process holds it. Creates the directory first.
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
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let file = files::open_lock(&dir, &self.path, name)?;
        files::lock_within(&file, &path, wait, on_wait)?;
        Ok(CacheLock { _file: file })
    }

    /// The directory, opened and checked; an absent one is an error naming it.
    fn open_checked_dir(&self) -> Result<File, AuthError> {
        files::open_dir(&self.path).map_err(|e| match e {
            DirError::Unsafe(problem) => AuthError::CacheUnsafe {
                path: self.path.clone(),
                problem,
            },
            DirError::Absent => AuthError::CacheIo {
                path: self.path.clone(),
                action: "open the directory",
                source: std::io::ErrorKind::NotFound.into(),
            },
            DirError::Io(source) => AuthError::CacheIo {
                path: self.path.clone(),
                action: "open the directory",
                source,
            },
        })
    }

    /// Writes an entry atomically (see the module's guarantees). Creates the directory first.
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
        let path = self.file_for(&entry.key());
        let bytes = serde_json::to_vec_pretty(entry).map_err(|e| AuthError::CacheIo {
            path: path.clone(),
            action: "serialise the entry",
            source: std::io::Error::other(e),
        })?;
        let name = format!("{}.json", entry.key().file_stem());
        write_atomic_in(dir, &name, &bytes).map_err(|source| AuthError::CacheIo {
            path,
            action: "write",
            source,
        })
    }

    /// Deletes the cache file of `key`; an absent file (or directory) is fine.
    ///
    /// # Errors
    /// See [`Self::remove_file`].
    pub fn remove(&self, key: &CacheKey) -> Result<(), AuthError> {
        self.remove_file(&self.file_for(key))
    }

    /// Deletes `path`, a cache file of this directory (as [`Self::list`] names them), through
    /// the checked directory's descriptor; an absent file (or directory) is fine.
    ///
    /// # Errors
    /// [`AuthError::CacheUnsafe`] when the directory is not one this ichor makes;
    /// [`AuthError::CacheIo`] naming the file, also for a path that is not a cache file here.
    pub fn remove_file(&self, path: &Path) -> Result<(), AuthError> {
        let fail = |source| AuthError::CacheIo {
            path: path.to_owned(),
            action: "delete",
            source,
        };
        let name = match path.file_name().and_then(|n| n.to_str()) {
            Some(name) if path.parent() == Some(self.path.as_path()) && is_cache_file_name(path) => name,
            _ => return Err(fail(std::io::ErrorKind::InvalidInput.into())),
        };
        let dir = match self.open_checked_dir() {
            Ok(dir) => dir,
            Err(AuthError::CacheIo { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        match rustix::fs::unlinkat(&dir, name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(fail(e.into())),
        }
    }

    /// Every cache file in the directory, sorted by file name; an absent directory is empty.
    ///
    /// # Errors
    /// [`AuthError::CacheUnsafe`] when the directory is not one this ichor makes;
    /// [`AuthError::CacheIo`] when it cannot be listed.
    pub fn list(&self) -> Result<Vec<Listed>, AuthError> {
        let dir = match self.open_checked_dir() {
            Ok(dir) => dir,
            Err(AuthError::CacheIo { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Ok(vec![]);
            }
            Err(e) => return Err(e),
        };
        // Listed through the checked descriptor, like every other use of the directory.
        let entries = match rustix::fs::Dir::read_from(&dir) {
            Ok(e) => e,
            Err(e) => {
                return Err(AuthError::CacheIo {
                    path: self.path.clone(),
                    action: "list",
                    source: e.into(),
                });
            }
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str().ok().map(|n| self.path.join(n)))
            .filter(|p| is_cache_file_name(p))
            .collect();
        paths.sort();
        Ok(paths
            .into_iter()
            .map(|path| {
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                let entry = files::read_bounded(&dir, name).and_then(|bytes| match bytes {
                    Some(b) => parse(&b),
                    None => Err(UnusableCache::Vanished),
                });
                Listed { path, entry }
            })
            .collect())
    }
}

/// `<64 hex>.json`: the only files this module writes and reads back.
fn is_cache_file_name(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "json")
        && path
            .file_stem()
            .and_then(|s| s.to_str())
            .is_some_and(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests;
