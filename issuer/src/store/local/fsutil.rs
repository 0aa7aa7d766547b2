//! The local store's file-system locks and directories: an exclusive lock with a bounded wait,
//! a durable removal and the private state directory. Files are written with
//! [`ichor_server::atomic_file`].

use std::{
    fs::{self, DirBuilder, File, OpenOptions},
    io,
    os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt},
    path::Path,
    sync::atomic::{AtomicBool, Ordering},
    thread,
    time::{Duration, Instant},
};

use fs4::{FileExt, TryLockError};
use ichor_server::atomic_file::sync_dir;

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
