//! The file-system checks of the login cache: what the directory, a cache file and a lock file
//! must be before they are used, and the bounded wait for a lock.
//!
//! Every file is opened relative to the already-checked directory (`openat`), without following
//! a link and without waiting on a FIFO, and checked on the opened descriptor (`fstat`), so what
//! is checked is what is read: no name can be swapped between the check and the use.
//!
//! Every release of ichor has created the directory 0700 and each file 0600 (`O_CREAT` with that
//! mode: a umask only narrows it), so a wider file, another owner or a second hard link is never
//! one this ichor wrote; it is refused, never repaired.

use std::{
    fs::{File, Metadata},
    io::Read as _,
    os::unix::fs::MetadataExt as _,
    path::Path,
    time::{Duration, Instant},
};

use rustix::{
    fs::{AtFlags, FileType, Mode, OFlags, Stat},
    io::Errno,
};

use super::{MAX_CACHE_BYTES, UnusableCache};
use crate::commands::auth::error::AuthError;

/// How often a held lock is tried again.
const LOCK_POLL: Duration = Duration::from_millis(200);

/// Why a file or the directory of the login cache is not used. None of these is anything this
/// ichor makes, so each means someone else (or something else) put it there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsafe {
    /// A symbolic link where a file of its own belongs.
    #[error("it is a symbolic link")]
    Link,
    /// A FIFO, socket, device or directory where a regular file belongs.
    #[error("it is not a regular file (a FIFO, socket, device or directory)")]
    NotRegular,
    /// A file, FIFO or device where the directory belongs.
    #[error("it is not a directory")]
    NotDirectory,
    /// Another user's.
    #[error("it belongs to uid {owner}, not to you (uid {you})")]
    OtherOwner {
        /// The owner.
        owner: u32,
        /// This process's effective uid.
        you: u32,
    },
    /// A file its group or others may read or write.
    #[error("its mode is {mode:04o}; a login cache file is 0600 (no group or other access)")]
    SharedFile {
        /// The permission bits.
        mode: u32,
    },
    /// A directory its group or others may write into.
    #[error("its mode is {mode:04o}; group and others must not write to the login cache directory")]
    WritableDirectory {
        /// The permission bits.
        mode: u32,
    },
    /// A file with another name in some directory, which its owner can rewrite there.
    #[error("it has {0} hard links (another name shares its content)")]
    HardLinked(u64),
    /// A directory on another file system than the directory holding it: something is mounted
    /// there (a FUSE mount can claim any owner and mode).
    #[error("it is a mount point (another file system than the directory holding it)")]
    MountPoint,
}

/// Checks a cache or lock file: regular, owned by `you`, no group or other bit, one link. Pure.
///
/// # Errors
/// The first thing wrong with it.
pub fn private_file(meta: &Metadata, you: u32) -> Result<(), Unsafe> {
    if !meta.file_type().is_file() {
        return Err(Unsafe::NotRegular);
    }
    if meta.uid() != you {
        return Err(Unsafe::OtherOwner {
            owner: meta.uid(),
            you,
        });
    }
    if meta.mode() & 0o077 != 0 {
        return Err(Unsafe::SharedFile {
            mode: meta.mode() & 0o7777,
        });
    }
    if meta.nlink() != 1 {
        return Err(Unsafe::HardLinked(meta.nlink()));
    }
    Ok(())
}

/// Checks the cache directory: a directory owned by `you` that neither group nor others can
/// write into. Pure.
///
/// # Errors
/// The first thing wrong with it.
pub fn private_dir(meta: &Metadata, you: u32) -> Result<(), Unsafe> {
    if !meta.file_type().is_dir() {
        return Err(Unsafe::NotDirectory);
    }
    if meta.uid() != you {
        return Err(Unsafe::OtherOwner {
            owner: meta.uid(),
            you,
        });
    }
    if meta.mode() & 0o022 != 0 {
        return Err(Unsafe::WritableDirectory {
            mode: meta.mode() & 0o7777,
        });
    }
    Ok(())
}

/// Checks that the cache directory (`meta`) is on the file system of the directory holding it
/// (`parent_dev`): ichor makes it with `mkdir`, so another device means something is mounted there,
/// and a mount (FUSE with `allow_other`) reports whatever owner and mode it likes. Pure.
///
/// # Errors
/// [`Unsafe::MountPoint`].
pub fn same_device(meta: &Metadata, parent_dev: u64) -> Result<(), Unsafe> {
    if meta.dev() == parent_dev {
        Ok(())
    } else {
        Err(Unsafe::MountPoint)
    }
}

/// What `name` in `dir` is, not following a link; `None` when that cannot be told.
fn stat_in(dir: &File, name: &str) -> Option<Stat> {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()
}

/// Why the cache or lock file `stat` (as `fstatat` without following a link saw it, when it
/// could) could not be opened with `errno`. Pure.
///
/// Whatever is not a regular file of `you` is refused for what it is (a link answers `ELOOP`, a
/// socket `ENXIO`), a file of `you` whose mode denies `you` is [`UnusableCache::Denied`], and only
/// the rest is a read error that may pass (`EIO`, `EMFILE`).
pub fn open_failure(errno: Errno, stat: Option<&Stat>, you: u32) -> UnusableCache {
    let Some(stat) = stat else {
        return match errno {
            Errno::LOOP => UnusableCache::NotPrivate(Unsafe::Link),
            e => UnusableCache::Read(e.into()),
        };
    };
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::Symlink => return UnusableCache::NotPrivate(Unsafe::Link),
        FileType::RegularFile => {}
        _ => return UnusableCache::NotPrivate(Unsafe::NotRegular),
    }
    if stat.st_uid != you {
        return UnusableCache::NotPrivate(Unsafe::OtherOwner {
            owner: stat.st_uid,
            you,
        });
    }
    // `st_mode` is a u16 on macOS.
    #[allow(clippy::useless_conversion)]
    let mode = u32::from(stat.st_mode) & 0o7777;
    match errno {
        Errno::ACCESS | Errno::PERM => UnusableCache::Denied { mode },
        Errno::LOOP => UnusableCache::NotPrivate(Unsafe::Link),
        e => UnusableCache::Read(e.into()),
    }
}

/// Reads the file `name` of the checked directory `dir`: at most [`MAX_CACHE_BYTES`], and only a
/// [`private_file`] of `you`; `None` when there is no such file.
///
/// # Errors
/// Why the file is unusable.
pub fn read_bounded(dir: &File, name: &str, you: u32) -> Result<Option<Vec<u8>>, UnusableCache> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(Errno::NOENT) => return Ok(None),
        Err(e) => return Err(open_failure(e, stat_in(dir, name).as_ref(), you)),
    };
    let meta = file.metadata().map_err(UnusableCache::Read)?;
    private_file(&meta, you).map_err(UnusableCache::NotPrivate)?;
    let mut bytes = Vec::new();
    file.take(MAX_CACHE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(UnusableCache::Read)?;
    if bytes.len() as u64 > MAX_CACHE_BYTES {
        return Err(UnusableCache::TooLarge);
    }
    Ok(Some(bytes))
}

/// Opens (creating it 0600) the lock file `name` of the checked directory `dir`, never through a
/// link and never waiting on a FIFO, and checks it ([`private_file`] of `you`) on the opened
/// descriptor.
///
/// # Errors
/// [`AuthError::CacheUnsafe`] naming the file and what is wrong; [`AuthError::CacheIo`].
pub fn open_lock(dir: &File, dir_path: &Path, name: &str, you: u32) -> Result<File, AuthError> {
    let path = dir_path.join(name);
    let flags = OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = match rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(0o600)) {
        Ok(fd) => File::from(fd),
        Err(e) => {
            return Err(match open_failure(e, stat_in(dir, name).as_ref(), you) {
                UnusableCache::NotPrivate(problem) => AuthError::CacheUnsafe { path, problem },
                UnusableCache::Denied { mode } => AuthError::CacheDenied { path, mode },
                _ => AuthError::CacheIo {
                    path,
                    action: "open the lock file",
                    source: e.into(),
                },
            });
        }
    };
    let meta = file.metadata().map_err(|source| AuthError::CacheIo {
        path: path.clone(),
        action: "read the lock file",
        source,
    })?;
    private_file(&meta, you).map_err(|problem| AuthError::CacheUnsafe { path, problem })?;
    Ok(file)
}

/// Takes the exclusive lock of `file` (the lock file `path`), trying again until `wait` has
/// passed. `on_wait` is called once, when the lock is first found held.
///
/// # Errors
/// [`AuthError::LockTimeout`] naming the file when the lock is still held at the deadline;
/// [`AuthError::CacheIo`] when locking fails otherwise.
pub fn lock_within(
    file: &File,
    path: &Path,
    wait: Duration,
    on_wait: &mut dyn FnMut(&Path),
) -> Result<(), AuthError> {
    let deadline = Instant::now() + wait;
    let mut told = false;
    loop {
        match fs4::FileExt::try_lock(file) {
            Ok(()) => return Ok(()),
            Err(fs4::TryLockError::WouldBlock) => {}
            Err(fs4::TryLockError::Error(source)) => {
                return Err(AuthError::CacheIo {
                    path: path.to_owned(),
                    action: "lock",
                    source,
                });
            }
        }
        if !told {
            on_wait(path);
            told = true;
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(AuthError::LockTimeout {
                path: path.to_owned(),
                seconds: wait.as_secs(),
            });
        }
        std::thread::sleep(LOCK_POLL.min(deadline - now));
    }
}
