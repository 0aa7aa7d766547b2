//! The local credentials file: every user's credentials entry in one JSON document,
//! `{"generation": n, "entries": {"<user>": <entry>}}`. Each entry has its own version (see
//! [`Entry`]); `generation` only counts the file's rewrites.
//!
//! # Guarantees
//! - A write holds an exclusive lock on a separate lock file (`credentials.json.lock`, `flock`)
//!   for the whole read–compare–write, so two processes sharing the directory never lose each
//!   other's write: a write whose user's entry changed since it was read gets a conflict. Writes
//!   for different users never conflict.
//! - Concurrent writes of one process are committed together (group commit): the first writer
//!   to find no commit running takes the lock and applies every queued edit, in arrival order and
//!   each compared against its own user's entry as the earlier edits left it, then writes and
//!   syncs the file once for all of them. One `fsync` pair per batch instead of per write.
//! - The file is replaced atomically (a temporary file in the same directory, `fsync`, `rename`,
//!   `fsync` of the directory): a reader, which takes no lock, sees the old or the new file,
//!   never a mix, and a crash leaves one of the two. A write returns only after that.
//! - The file is created mode 0600 and its directory 0700; it is at most
//!   [`MAX_CREDENTIALS_FILE_BYTES`].
//! - A missing file is an empty store. A file that cannot be parsed is reported as corrupt
//!   (without its content) and is never overwritten.
//! - Reads, and the compare of a write under the lock, are served from the last document this
//!   process parsed or wrote while the file on disk is still that file: same device and inode
//!   (the cache keeps that file open, so its inode number cannot be reused by a later file),
//!   same size, modification and change times. Every write replaces the file by `rename`, so any
//!   write, by this process or another, gives a new inode and the next read or compare parses
//!   the new file. Each cached entry carries its compact JSON and its version, so neither a read
//!   nor a compare re-serializes or re-hashes an unchanged entry, and its parsed form once read
//!   (an entry this process wrote keeps the form it was written from), so a refresh's read of
//!   its user's entry parses no JSON.
//! - Writers wait for their commit without holding a thread: one blocking thread at a time runs
//!   the commits of this process back to back, while the next batch gathers.
//! - The file is written with one entry per line (`{"generation": n, "entries": {` … `}}`); any
//!   JSON layout of the same document is read, so files of earlier versions read unchanged.
//!
//! The pieces: `document` (the document, its entries and their versions, and the file's
//! layout), `read` (reading the file, through the cache of the last document), `commit`
//! (the queue of writes and their group commit under the lock).

use std::{
    io,
    path::{Path, PathBuf},
    sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError},
};

use crate::store::StoreError;

mod commit;
mod document;
mod read;
#[cfg(test)]
mod tests;

pub(crate) use commit::Edit;
use commit::Queue;
pub(crate) use document::Entry;
use read::Cached;

/// The file name of the credentials file inside the state directory.
pub const CREDENTIALS_FILE_NAME: &str = "credentials.json";
/// The file name of the lock file inside the state directory.
pub const LOCK_FILE_NAME: &str = "credentials.json.lock";
/// The largest credentials file read or written: 16 MiB.
pub const MAX_CREDENTIALS_FILE_BYTES: usize = 16 * 1024 * 1024;
/// The version of a user without an entry.
pub const ABSENT_VERSION: &str = "absent";

/// The paths of the credentials file and its lock, this process's commit queue, and the last
/// document parsed or written.
#[derive(Clone, Debug)]
pub(crate) struct CredentialsFile {
    dir: PathBuf,
    path: PathBuf,
    lock: PathBuf,
    queue: Arc<Mutex<Queue>>,
    /// Signalled when the queue holds a full batch, to end a commit turn's gathering early.
    batch_full: Arc<Condvar>,
    cached: Arc<Mutex<Option<Cached>>>,
}

impl CredentialsFile {
    /// The credentials file inside `dir`.
    pub(crate) fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_owned(),
            path: dir.join(CREDENTIALS_FILE_NAME),
            lock: dir.join(LOCK_FILE_NAME),
            queue: Arc::default(),
            batch_full: Arc::default(),
            cached: Arc::default(),
        }
    }

    /// The path of the credentials file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn cached(&self) -> MutexGuard<'_, Option<Cached>> {
        self.cached.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn unavailable(&self, what: &str, e: &io::Error) -> StoreError {
        StoreError::Unavailable(format!(
            "cannot {what} the credentials file {}: {e}",
            self.path.display()
        ))
    }
}
