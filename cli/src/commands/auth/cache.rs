//! The login cache: `~/.ichor/auth/<sha256(issuer, client, audience)>.json`, one file per
//! login, and a lock file beside it that serialises the processes refreshing that login.
//!
//! # Guarantees
//! - The directory is created 0700 (and narrowed to 0700 if it exists wider); files are 0600.
//! - A write is atomic: a new file in the same directory is written, fsynced and renamed over
//!   the old one, then the directory is fsynced. A reader sees the old or the new file, never a
//!   mix, so the fast path reads without the lock.
//! - A read is bounded ([`MAX_CACHE_BYTES`]) and strict (unknown fields and other versions are
//!   refused); a file that does not parse is reported as [`Loaded::Unusable`], never a panic.
//! - Only a regular file owned by this user and writable by no one else is read: the fast path
//!   answers kubectl from it without the lock, so a link, a FIFO or a file another user planted
//!   in the directory is [`Loaded::Unusable`], never followed, read or waited on. The directory
//!   and the lock file are never reached through a symbolic link either.
//!
//! Everything here is plain synchronous std code: `ichor auth token`'s fast path uses it
//! without an async runtime.

use std::{
    fs::{self, File, OpenOptions},
    io::Read,
    os::unix::fs::{MetadataExt as _, OpenOptionsExt as _},
    path::{Path, PathBuf},
};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use ichor_server::atomic_file::write_atomic;

use super::{error::AuthError, secret::Secret};

/// The format version of a cache file.
pub const CACHE_VERSION: u32 = 1;
/// The largest cache file read (a real one is about 3 KiB).
pub const MAX_CACHE_BYTES: u64 = 64 * 1024;
/// A cached ID token is used only while it has at least this long left.
pub const FRESH_MARGIN_SECONDS: i64 = 30;

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

    /// Whether the ID token has at least [`FRESH_MARGIN_SECONDS`] left at `now`.
    pub fn is_fresh(&self, now: Timestamp) -> bool {
        self.id_token_exp.saturating_sub(now.as_second()) >= FRESH_MARGIN_SECONDS
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
    /// The file is not a cache entry.
    #[error("it does not parse: {0}")]
    Parse(#[source] serde_json::Error),
    /// The entry is of another format version.
    #[error("v is {0}, this ichor reads only {CACHE_VERSION}")]
    Version(u32),
    /// The entry is of another login than the one asked for.
    #[error("it holds another login (issuer, client or audience differ)")]
    OtherLogin,
    /// A link, a FIFO or another non-regular file, or a file of another user or writable by
    /// others, where this ichor writes a 0600 file of its own.
    #[error(
        "it is not a regular file of yours writable only by you (a link, a FIFO, or planted by someone else)"
    )]
    NotPrivate,
}

/// The flags every open in the cache directory adds: never through a symbolic link, and never
/// waiting on a FIFO.
fn no_follow_no_wait() -> i32 {
    i32::try_from((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits()).unwrap_or(0)
}

/// Parses a cache file strictly.
///
/// # Errors
/// Why the file is unusable: it does not parse, or is of another version.
pub fn parse(bytes: &[u8]) -> Result<CacheEntry, UnusableCache> {
    let entry: CacheEntry = serde_json::from_slice(bytes).map_err(UnusableCache::Parse)?;
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

    /// Reads the cache file of `key`. Never fails: any problem is [`Loaded::Unusable`].
    pub fn load(&self, key: &CacheKey) -> Loaded {
        match read_bounded(&self.file_for(key)) {
            Ok(None) => Loaded::Absent,
            Err(reason) => Loaded::Unusable(reason),
            Ok(Some(bytes)) => match parse(&bytes) {
                Ok(entry) if entry.key() == *key => Loaded::Usable(Box::new(entry)),
                Ok(_) => Loaded::Unusable(UnusableCache::OtherLogin),
                Err(reason) => Loaded::Unusable(reason),
            },
        }
    }

    /// Creates the directory 0700, or narrows an existing one to 0700.
    ///
    /// # Errors
    /// [`AuthError::CacheIo`] naming the directory.
    pub fn ensure(&self) -> Result<(), AuthError> {
        let io = |action, source| AuthError::CacheIo {
            path: self.path.clone(),
            action,
            source,
        };
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        builder
            .create(&self.path)
            .map_err(|e| io("create the directory", e))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let meta = fs::symlink_metadata(&self.path).map_err(|e| io("read the directory", e))?;
            if !meta.is_dir() {
                return Err(io(
                    "use the directory",
                    std::io::Error::other("it is a symbolic link or not a directory; remove it"),
                ));
            }
            if meta.permissions().mode() & 0o777 != 0o700 {
                fs::set_permissions(&self.path, fs::Permissions::from_mode(0o700))
                    .map_err(|e| io("set the directory to mode 0700", e))?;
            }
        }
        Ok(())
    }

    /// Takes the exclusive lock of `key`, waiting for another process that holds it. Creates the
    /// directory first.
    ///
    /// # Errors
    /// [`AuthError::CacheIo`] naming the lock file.
    pub fn lock(&self, key: &CacheKey) -> Result<CacheLock, AuthError> {
        self.ensure()?;
        let path = self.lock_file_for(key);
        let io = |action, source| AuthError::CacheIo {
            path: path.clone(),
            action,
            source,
        };
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            options.mode(0o600).custom_flags(no_follow_no_wait());
        }
        let file = options.open(&path).map_err(|e| io("open the lock file", e))?;
        fs4::FileExt::lock(&file).map_err(|e| io("lock", e))?;
        Ok(CacheLock { _file: file })
    }

    /// Writes an entry atomically (see the module's guarantees). Creates the directory first.
    ///
    /// # Errors
    /// [`AuthError::CacheIo`] naming the file.
    pub fn store(&self, entry: &CacheEntry) -> Result<(), AuthError> {
        self.ensure()?;
        let path = self.file_for(&entry.key());
        let bytes = serde_json::to_vec_pretty(entry).map_err(|e| AuthError::CacheIo {
            path: path.clone(),
            action: "serialise the entry",
            source: std::io::Error::other(e),
        })?;
        write_atomic(&path, &bytes).map_err(|source| AuthError::CacheIo {
            path,
            action: "write",
            source,
        })
    }

    /// Deletes the cache file of `key`; an absent file is fine.
    ///
    /// # Errors
    /// [`AuthError::CacheIo`] naming the file.
    pub fn remove(&self, key: &CacheKey) -> Result<(), AuthError> {
        remove_file(&self.file_for(key))
    }

    /// Every cache file in the directory, sorted by file name; an absent directory is empty.
    ///
    /// # Errors
    /// [`AuthError::CacheIo`] when the directory cannot be listed.
    pub fn list(&self) -> Result<Vec<Listed>, AuthError> {
        let entries = match fs::read_dir(&self.path) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
            Err(source) => {
                return Err(AuthError::CacheIo {
                    path: self.path.clone(),
                    action: "list",
                    source,
                });
            }
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| is_cache_file_name(p))
            .collect();
        paths.sort();
        Ok(paths
            .into_iter()
            .map(|path| {
                let entry = read_bounded(&path).and_then(|bytes| match bytes {
                    Some(b) => parse(&b),
                    None => Err(UnusableCache::Vanished),
                });
                Listed { path, entry }
            })
            .collect())
    }
}

/// Deletes a file; an absent one is fine.
///
/// # Errors
/// [`AuthError::CacheIo`] naming the file.
pub fn remove_file(path: &Path) -> Result<(), AuthError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(AuthError::CacheIo {
            path: path.to_owned(),
            action: "delete",
            source,
        }),
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

/// Reads at most [`MAX_CACHE_BYTES`]; `None` when the file does not exist. Only a regular file
/// of this user that no one else can write (see the module's guarantees).
fn read_bounded(path: &Path) -> Result<Option<Vec<u8>>, UnusableCache> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(no_follow_no_wait())
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            return Err(UnusableCache::NotPrivate);
        }
        Err(e) => return Err(UnusableCache::Read(e)),
    };
    let meta = file.metadata().map_err(UnusableCache::Read)?;
    if !private_file(&meta, rustix::process::geteuid().as_raw()) {
        return Err(UnusableCache::NotPrivate);
    }
    let mut bytes = Vec::new();
    file.take(MAX_CACHE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(UnusableCache::Read)?;
    if bytes.len() as u64 > MAX_CACHE_BYTES {
        return Err(UnusableCache::TooLarge);
    }
    Ok(Some(bytes))
}

/// A regular file owned by `uid` that neither its group nor others can write.
fn private_file(meta: &fs::Metadata, uid: u32) -> bool {
    meta.file_type().is_file() && meta.uid() == uid && meta.mode() & 0o022 == 0
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn key() -> CacheKey {
        CacheKey {
            issuer: "https://i.example".into(),
            client_id: "ichor-cli".into(),
            audience: "ichor-kube".into(),
        }
    }

    fn entry(exp: i64) -> CacheEntry {
        CacheEntry {
            v: CACHE_VERSION,
            issuer: "https://i.example".into(),
            client_id: "ichor-cli".into(),
            audience: "ichor-kube".into(),
            endpoints: None,
            subject: "alice".into(),
            groups: vec!["admin".into()],
            id_token: Secret::new("id.token.x".into()),
            id_token_exp: exp,
            refresh_token: Some(Secret::new("refresh-1".into())),
        }
    }

    #[test]
    fn the_file_stem_is_a_sha256_that_separates_every_part() {
        let a = key();
        let mut b = key();
        b.issuer = "https://i.exampleichor-cli".into();
        b.client_id = String::new();
        assert_eq!(a.file_stem().len(), 64);
        assert_ne!(a.file_stem(), b.file_stem());
        let mut c = key();
        c.audience = "ichor-ui".into();
        assert_ne!(a.file_stem(), c.file_stem());
    }

    #[test]
    fn a_token_is_fresh_only_with_thirty_seconds_left() {
        let now = Timestamp::from_second(1000).unwrap();
        assert!(entry(1030).is_fresh(now));
        assert!(!entry(1029).is_fresh(now));
        assert!(!entry(i64::MIN).is_fresh(now));
    }

    #[cfg(unix)]
    #[test]
    fn a_stored_entry_is_0600_in_a_0700_directory_and_reads_back() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let dir = CacheDir::new(home.path().join(".ichor/auth"));
        dir.store(&entry(2000)).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(dir.path()), 0o700);
        assert_eq!(mode(&home.path().join(".ichor")), 0o700);
        assert_eq!(mode(&dir.file_for(&key())), 0o600);
        match dir.load(&key()) {
            Loaded::Usable(e) => assert_eq!(*e, entry(2000)),
            other => panic!("{other:?}"),
        }
    }

    /// Files someone else planted where this login's cache file goes: a link to a fresh entry
    /// elsewhere, a FIFO (which a plain open would wait on forever), a group-writable file.
    #[cfg(unix)]
    #[test]
    fn a_planted_link_fifo_or_shared_file_is_unusable_not_followed_or_waited_on() {
        use std::os::unix::fs::{PermissionsExt, symlink};
        let home = tempfile::tempdir().unwrap();
        let dir = CacheDir::new(home.path().join("auth"));
        dir.ensure().unwrap();
        let elsewhere = home.path().join("planted.json");
        fs::write(&elsewhere, serde_json::to_vec(&entry(i64::MAX)).unwrap()).unwrap();
        fs::set_permissions(&elsewhere, fs::Permissions::from_mode(0o600)).unwrap();
        let file = dir.file_for(&key());

        symlink(&elsewhere, &file).unwrap();
        assert!(matches!(
            dir.load(&key()),
            Loaded::Unusable(UnusableCache::NotPrivate)
        ));
        fs::remove_file(&file).unwrap();

        let made = std::process::Command::new("mkfifo").arg(&file).status().unwrap();
        assert!(made.success());
        assert!(matches!(
            dir.load(&key()),
            Loaded::Unusable(UnusableCache::NotPrivate)
        ));
        fs::remove_file(&file).unwrap();

        fs::copy(&elsewhere, &file).unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o620)).unwrap();
        assert!(matches!(
            dir.load(&key()),
            Loaded::Unusable(UnusableCache::NotPrivate)
        ));
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        assert!(
            matches!(dir.load(&key()), Loaded::Usable(_)),
            "the same file, private, is read"
        );

        let meta = fs::metadata(&file).unwrap();
        assert!(private_file(&meta, meta.uid()));
        assert!(
            !private_file(&meta, meta.uid() + 1),
            "another user's file is refused"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_linked_cache_directory_and_a_linked_lock_file_are_refused() {
        use std::os::unix::fs::{PermissionsExt, symlink};
        let home = tempfile::tempdir().unwrap();
        let target = home.path().join("public");
        fs::create_dir(&target).unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o755)).unwrap();
        let linked = home.path().join("auth");
        symlink(&target, &linked).unwrap();
        assert!(CacheDir::new(linked).ensure().is_err());
        assert_eq!(
            fs::metadata(&target).unwrap().permissions().mode() & 0o777,
            0o755,
            "the link's target is not narrowed"
        );

        let dir = CacheDir::new(home.path().join("real"));
        dir.ensure().unwrap();
        let victim = home.path().join("victim");
        symlink(&victim, dir.lock_file_for(&key())).unwrap();
        assert!(dir.lock(&key()).is_err());
        assert!(!victim.exists(), "nothing is created through the link");
    }

    #[cfg(unix)]
    #[test]
    fn an_existing_wide_directory_is_narrowed_to_0700() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("auth");
        fs::create_dir(&path).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        CacheDir::new(path.clone()).ensure().unwrap();
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o700);
    }

    #[test]
    fn a_write_replaces_the_file_by_rename_and_leaves_no_temporary_file() {
        let home = tempfile::tempdir().unwrap();
        let dir = CacheDir::new(home.path().join("auth"));
        dir.store(&entry(1)).unwrap();
        let file = dir.file_for(&key());
        // A hard link keeps the old inode: an in-place rewrite would change what it shows.
        let old = home.path().join("old-link");
        fs::hard_link(&file, &old).unwrap();
        dir.store(&entry(2)).unwrap();
        assert_eq!(parse(&fs::read(&old).unwrap()).unwrap().id_token_exp, 1);
        assert_eq!(parse(&fs::read(&file).unwrap()).unwrap().id_token_exp, 2);
        let names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, [format!("{}.json", key().file_stem())]);
    }

    #[test]
    fn corrupt_oversized_foreign_and_other_version_files_are_unusable_not_panics() {
        let home = tempfile::tempdir().unwrap();
        let dir = CacheDir::new(home.path().join("auth"));
        dir.ensure().unwrap();
        let file = dir.file_for(&key());
        let mut other_version = serde_json::to_value(entry(1)).unwrap();
        other_version["v"] = 2.into();
        let mut unknown = serde_json::to_value(entry(1)).unwrap();
        unknown["extra"] = 1.into();
        let mut foreign = entry(1);
        foreign.audience = "ichor-ui".into();
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"{not json".to_vec(), "does not parse"),
            (vec![b' '; MAX_CACHE_BYTES as usize + 1], "larger than"),
            (serde_json::to_vec(&other_version).unwrap(), "v is 2"),
            (serde_json::to_vec(&unknown).unwrap(), "unknown field"),
            (serde_json::to_vec(&foreign).unwrap(), "another login"),
            (Vec::new(), "does not parse"),
        ];
        for (bytes, needle) in cases {
            fs::write(&file, &bytes).unwrap();
            match dir.load(&key()) {
                Loaded::Unusable(reason) => {
                    assert!(reason.to_string().contains(needle), "{needle}: {reason}")
                }
                other => panic!("{needle}: {other:?}"),
            }
        }
        fs::remove_file(&file).unwrap();
        assert!(matches!(dir.load(&key()), Loaded::Absent));
    }

    #[test]
    fn list_returns_only_cache_files_and_reports_unusable_ones() {
        let home = tempfile::tempdir().unwrap();
        let dir = CacheDir::new(home.path().join("auth"));
        assert!(dir.list().unwrap().is_empty());
        dir.store(&entry(1)).unwrap();
        let _lock = dir.lock(&key()).unwrap();
        fs::write(dir.path().join(format!("{}.json", "a".repeat(64))), b"junk").unwrap();
        fs::write(dir.path().join("notes.json"), b"{}").unwrap();
        let listed = dir.list().unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!(listed.iter().filter(|l| l.entry.is_ok()).count(), 1);
    }

    #[test]
    fn the_secret_values_never_show_in_debug_output() {
        let text = format!("{:?}", entry(1));
        assert!(
            !text.contains("id.token.x") && !text.contains("refresh-1"),
            "{text}"
        );
    }
}
