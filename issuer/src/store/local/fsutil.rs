//! File-system helpers shared by the local store: an exclusive lock with a bounded wait, and the
//! atomic, durable replacement of a file.

use std::{
    fs::{self, DirBuilder, File, OpenOptions},
    io::{self, Write},
    os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt},
    path::Path,
    sync::atomic::{AtomicBool, AtomicU64, Ordering},
    thread,
    time::{Duration, Instant},
};

use fs4::{FileExt, TryLockError};

/// How long a writer waits for another process to release a lock before giving up.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);

/// Takes an exclusive `flock` on `path` (created mode 0600), waiting at most [`LOCK_WAIT`].
/// The lock is held until the returned file is dropped. Each call opens its own file
/// description, so two stores in one process exclude each other as two processes do.
///
/// # Errors
/// The open or lock failure; [`io::ErrorKind::TimedOut`] when the lock stayed held.
pub(crate) fn lock_exclusive(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    let deadline = Instant::now() + LOCK_WAIT;
    let mut pause = Duration::from_micros(200);
    loop {
        match FileExt::try_lock(&file) {
            Ok(()) => return Ok(file),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(TryLockError::WouldBlock) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("held by another process for more than {} s", LOCK_WAIT.as_secs()),
                ));
            }
            Err(TryLockError::Error(e)) => return Err(e),
        }
    }
}

/// A fresh temporary file path next to `path` (hidden, so manifest scans skip it).
fn temp_path(dir: &Path, path: &Path) -> std::path::PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    dir.join(format!(
        ".{file_name}.tmp-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Writes `bytes` to a new file `temp` (mode 0600) and syncs it; returns the open file.
fn write_synced(temp: &Path, bytes: &[u8]) -> io::Result<File> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(temp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    Ok(file)
}

/// Replaces `path` (in directory `dir`) by `bytes` atomically and durably: a new file (mode
/// 0600) in the same directory, written and synced, renamed over `path`, then `dir` synced.
pub(crate) fn atomic_replace(dir: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_before_dir_sync(dir, path, bytes)?;
    sync_dir(dir)
}

/// The first half of [`atomic_replace`]: `bytes` written to a new file (mode 0600), synced and
/// renamed over `path`, which readers now see; returns the new file still open (write-only), so
/// the caller can stamp it and keep its inode from being reused while it holds it. The rename
/// is durable only once [`sync_dir`] of `dir` returns, which the caller must call before it
/// reports the write done.
pub(crate) fn replace_before_dir_sync(dir: &Path, path: &Path, bytes: &[u8]) -> io::Result<File> {
    let temp = temp_path(dir, path);
    let result = write_synced(&temp, bytes).and_then(|file| {
        fs::rename(&temp, path)?;
        Ok(file)
    });
    if result.is_err() {
        // Best effort: the temporary file may already be gone (renamed).
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Syncs the directory `dir`, making the renames, links and removals in it durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Creates `path` (in directory `dir`) with `bytes` atomically, failing with
/// [`io::ErrorKind::AlreadyExists`] when it exists: the content is written and synced under a
/// temporary name, then hard-linked to `path` (which never replaces), then `dir` synced.
pub(crate) fn atomic_create(dir: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    let temp = temp_path(dir, path);
    let result = write_synced(&temp, bytes).and_then(|_| fs::hard_link(&temp, path));
    let _ = fs::remove_file(&temp);
    result?;
    sync_dir(dir)
}

/// Removes `path` (in directory `dir`) durably.
pub(crate) fn remove_durably(dir: &Path, path: &Path) -> io::Result<()> {
    fs::remove_file(path)?;
    sync_dir(dir)
}

/// Creates `dir` (and its parents) mode 0700 when it does not exist; warns when an existing one
/// is accessible to other users (once per process), since it holds password hashes.
pub(crate) fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    match fs::metadata(dir) {
        Ok(meta) => {
            static WARNED: AtomicBool = AtomicBool::new(false);
            if meta.permissions().mode() & 0o077 != 0 && !WARNED.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    dir = %dir.display(),
                    "the local store's state directory is accessible to other users; make it mode 0700"
                );
            }
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            DirBuilder::new().recursive(true).mode(0o700).create(dir)
        }
        Err(e) => Err(e),
    }
}
