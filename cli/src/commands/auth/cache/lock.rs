//! A held login lock and everything done under it: the read, the write and the removal of that
//! login's cache file, each through the cache directory's descriptor the lock was taken in, so the
//! lock covers the very directory that is read and written even if `auth` is renamed meanwhile.

use std::{fs::File, path::PathBuf};

use rustix::{fs::AtFlags, io::Errno};

use ichor_server::atomic_file::{WriteInError, sync_opened_dir, write_atomic_in};

use super::{CACHE_VERSION, CacheEntry, CacheKey, Loaded, UnusableCache, files, parse, refusal_for};
use crate::commands::auth::error::AuthError;

/// A held lock on one login, with the checked cache directory it was taken in; released when
/// dropped (the lock file's descriptor closes).
#[derive(Debug)]
pub struct CacheLock {
    pub(super) dir: File,
    pub(super) dir_path: PathBuf,
    pub(super) key: CacheKey,
    pub(super) you: u32,
    pub(super) _file: File,
}

/// What the locked path does with a cache file it cannot use. Decided by [`disposition`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Not a file or directory this ichor makes: refused with an error naming it, kept.
    Refuse,
    /// Damaged or another login's: removed, and the login treated as absent.
    Replace,
    /// Unreadable for now, or written by a newer ichor: kept, and the run fails saying why.
    Keep,
}

/// What to do with a cache file that is unusable for `reason`. Pure.
///
/// Only what can never become usable is removed: a file that does not parse, is too large or
/// holds another login. A read error may pass (`EIO`, `EMFILE`, a soft NFS timeout), and a newer
/// ichor's file is that ichor's login: both are kept. A file whose mode denies this user is
/// refused (kept), saying how to make it readable: retrying would never read it.
pub fn disposition(reason: &UnusableCache) -> Disposition {
    match reason {
        UnusableCache::NotPrivate(_) | UnusableCache::Directory { .. } | UnusableCache::Denied { .. } => {
            Disposition::Refuse
        }
        UnusableCache::Parse { .. }
        | UnusableCache::TooLarge
        | UnusableCache::OtherLogin
        | UnusableCache::Vanished => Disposition::Replace,
        // No ichor ever wrote a version below the first one: damaged, like a parse error.
        UnusableCache::Version(v) if *v < CACHE_VERSION => Disposition::Replace,
        UnusableCache::Version(_) | UnusableCache::Read(_) => Disposition::Keep,
    }
}

impl CacheLock {
    /// The cache file of the locked login.
    pub fn file(&self) -> PathBuf {
        self.dir_path.join(self.name())
    }

    fn name(&self) -> String {
        format!("{}.json", self.key.file_stem())
    }

    /// Reads the locked login's cache file in the locked directory; see [`super::CacheDir::load`].
    pub fn load(&self) -> Loaded {
        match files::read_bounded(&self.dir, &self.name(), self.you) {
            Ok(None) => Loaded::Absent,
            Err(reason) => Loaded::Unusable(reason),
            Ok(Some(bytes)) => match parse(&bytes) {
                Ok(entry) if entry.key() == self.key => Loaded::Usable(Box::new(entry)),
                Ok(_) => Loaded::Unusable(UnusableCache::OtherLogin),
                Err(reason) => Loaded::Unusable(reason),
            },
        }
    }

    /// Acts on an unusable cache file as [`disposition`] decides: removes a damaged one and
    /// returns the notice to print, or fails naming the file.
    ///
    /// # Errors
    /// [`AuthError::CacheUnsafe`] for a file this ichor does not make, [`AuthError::CacheRead`] for
    /// a read error, [`AuthError::CacheVersion`] for a newer ichor's file (each kept);
    /// [`AuthError::CacheIo`] when the removal fails.
    pub fn settle(&self, reason: UnusableCache, login_command: &str) -> Result<String, AuthError> {
        let path = self.file();
        match (disposition(&reason), reason) {
            (Disposition::Replace, reason) => {
                self.remove()?;
                Ok(format!(
                    "warning: {}: unusable login cache, replacing it ({reason})",
                    path.display()
                ))
            }
            (_, UnusableCache::Read(source)) => Err(AuthError::CacheRead { path, source }),
            (_, UnusableCache::Version(found)) => Err(AuthError::CacheVersion {
                path,
                found,
                login_command: login_command.to_owned(),
            }),
            (_, reason) => Err(match refusal_for(&self.dir_path, &path, &reason) {
                Some(refusal) => refusal,
                None => AuthError::CacheIo {
                    path,
                    action: "use",
                    source: std::io::Error::other(reason.to_string()),
                },
            }),
        }
    }

    /// Writes `entry`, which must be of the locked login, atomically into the locked directory.
    ///
    /// # Errors
    /// [`AuthError::CacheIo`] naming the file; [`AuthError::CacheNotSynced`] when it is written but
    /// may not survive a crash.
    pub fn store(&self, entry: &CacheEntry) -> Result<(), AuthError> {
        if entry.key() != self.key {
            return Err(AuthError::CacheIo {
                path: self.file(),
                action: "write another login's entry under this login's lock",
                source: std::io::ErrorKind::InvalidInput.into(),
            });
        }
        store_in(&self.dir, self.file(), &self.name(), entry)
    }

    /// Stores the tokens the issuer just handed out. When that fails (a full disk, a quota), the
    /// issuer has already retired the refresh token the cache file holds (rotation): the next run
    /// would present it, and an issuer that detects reuse revokes the whole family. So the cache file
    /// is removed (best effort) and the returned warning, which carries no token, says the next run
    /// needs a sign-in; the caller still uses the new ID token, which is valid.
    ///
    /// When only the directory's sync failed, the new file is in place: it is kept, and the warning
    /// says it may not survive a crash.
    ///
    /// # Errors
    /// The warning to print.
    pub fn store_fresh(&self, entry: &CacheEntry, login_command: &str) -> Result<(), String> {
        let failure = match self.store(entry) {
            Ok(()) => return Ok(()),
            Err(e @ AuthError::CacheNotSynced { .. }) => return Err(format!("warning: {e}")),
            Err(failure) => failure,
        };
        let head = format!("warning: the new login could not be saved ({failure})");
        Err(match self.remove() {
            Ok(()) => format!(
                "{head}; the cached one is outdated (the issuer may already have replaced its refresh \
                 token), so it was removed: the next run will need `{login_command}`"
            ),
            Err(e) => format!(
                "{head}, nor the outdated cached login removed ({e}); remove {} before the next run, \
                 then run `{login_command}`",
                self.file().display()
            ),
        })
    }

    /// Deletes the locked login's cache file in the locked directory, then syncs the directory;
    /// an absent file is fine.
    ///
    /// # Errors
    /// [`AuthError::CacheIo`] naming the file.
    pub fn remove(&self) -> Result<(), AuthError> {
        let fail = |source| AuthError::CacheIo {
            path: self.file(),
            action: "delete",
            source,
        };
        match rustix::fs::unlinkat(&self.dir, self.name().as_str(), AtFlags::empty()) {
            Ok(()) => sync_opened_dir(&self.dir).map_err(fail),
            Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(fail(e.into())),
        }
    }
}

/// Writes `entry` atomically as `name` (the file `path`) into the checked directory `dir`,
/// through its descriptor only.
///
/// # Errors
/// [`AuthError::CacheNotSynced`] when the file is in place but the directory could not be synced;
/// [`AuthError::CacheIo`] when nothing was written.
pub(super) fn store_in(dir: &File, path: PathBuf, name: &str, entry: &CacheEntry) -> Result<(), AuthError> {
    let bytes = serde_json::to_vec_pretty(entry).map_err(|e| AuthError::CacheIo {
        path: path.clone(),
        action: "serialise the entry",
        source: std::io::Error::other(e),
    })?;
    write_atomic_in(dir, name, &bytes).map_err(|e| match e {
        WriteInError::NotWritten(source) => AuthError::CacheIo {
            path,
            action: "write",
            source,
        },
        WriteInError::NotSynced(source) => AuthError::CacheNotSynced { path, source },
    })
}
