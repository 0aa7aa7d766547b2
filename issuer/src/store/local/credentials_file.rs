//! The local credentials file: every user's credentials entry in one JSON document,
//! `{"generation": n, "entries": {"<user>": <entry>}}`. Each entry has its own version (see
//! [`entry_version`]); `generation` only counts the file's rewrites.
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
//! - Reads are served from the last parsed document while the file on disk is the same file
//!   (device, inode, size, modification and change times of the open handle): every write
//!   replaces the file by `rename`, so any write, by this process or another, gives a new stamp
//!   and the next read parses the new file. A write of this process also drops the cached
//!   document, and the compare of a write always parses the file afresh under the lock.

use std::{
    collections::{BTreeMap, HashMap},
    fs::{File, Metadata},
    io::{self, Read},
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError},
};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::fsutil::{atomic_replace, ensure_private_dir, lock_exclusive};
use crate::store::{StoreError, redact::redact_quoted};

/// The file name of the credentials file inside the state directory.
pub const CREDENTIALS_FILE_NAME: &str = "credentials.json";
/// The file name of the lock file inside the state directory.
pub const LOCK_FILE_NAME: &str = "credentials.json.lock";
/// The largest credentials file read or written: 16 MiB.
pub const MAX_CREDENTIALS_FILE_BYTES: usize = 16 * 1024 * 1024;
/// The version of a user without an entry.
pub const ABSENT_VERSION: &str = "absent";

/// The document on disk.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Document {
    /// Incremented by every rewrite of the file; 0 when the file does not exist. Informational:
    /// it is not a version (entries are versioned one by one).
    pub generation: u64,
    /// Each user's entry, as the entry's JSON object.
    #[serde(default)]
    pub entries: BTreeMap<String, serde_json::Value>,
}

/// The version of one user's entry: `sha256:<hex>` of the entry's compact JSON, or
/// [`ABSENT_VERSION`]. It depends on that entry alone, so another user's write never moves it;
/// two equal entries have the same version, which is sound because a change computed from an
/// entry depends only on its content.
pub(crate) fn entry_version(entry: Option<&serde_json::Value>) -> String {
    match entry {
        Some(value) => format!(
            "sha256:{}",
            hex::encode(Sha256::digest(value.to_string().as_bytes()))
        ),
        None => ABSENT_VERSION.to_owned(),
    }
}

/// The paths of the credentials file and its lock, this process's commit queue, and the last
/// parsed document.
#[derive(Clone, Debug)]
pub(crate) struct CredentialsFile {
    dir: PathBuf,
    path: PathBuf,
    lock: PathBuf,
    commits: Arc<Commits>,
    parsed: Arc<Mutex<Option<Parsed>>>,
}

/// The last parsed document and the stamp of the file it was parsed from.
type Parsed = (FileStamp, Arc<Document>);

/// What identifies one version of the file on disk. The file is only ever replaced by `rename`
/// of a new file, so a new version is a new inode; size and times guard against the reuse of a
/// freed inode number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileStamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileStamp {
    fn of(meta: &Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// What a caller asked to change, already serialized and validated.
#[derive(Debug)]
pub(crate) enum Edit {
    /// Set the user's entry to this JSON object.
    Put(serde_json::Value),
    /// Remove the user's entry.
    Remove,
}

/// The writes waiting for a commit, and the results of finished ones.
#[derive(Debug, Default)]
struct Commits {
    queue: Mutex<Queue>,
    finished: Condvar,
}

#[derive(Debug, Default)]
struct Queue {
    next_ticket: u64,
    pending: Vec<Request>,
    results: HashMap<u64, Result<String, StoreError>>,
    committing: bool,
}

/// One queued write.
#[derive(Debug)]
struct Request {
    ticket: u64,
    user: String,
    expected: String,
    edit: Edit,
}

type Outcome = (u64, Result<String, StoreError>);

impl Commits {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The running commit: hands its results to the waiting writers when dropped, even when the
/// commit unwound, so no writer waits forever.
struct Committer<'a> {
    commits: &'a Commits,
    outcomes: Vec<Outcome>,
}

impl Drop for Committer<'_> {
    fn drop(&mut self) {
        let mut queue = self.commits.queue();
        queue.committing = false;
        queue.results.extend(self.outcomes.drain(..));
        drop(queue);
        self.commits.finished.notify_all();
    }
}

impl CredentialsFile {
    /// The credentials file inside `dir`.
    pub(crate) fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_owned(),
            path: dir.join(CREDENTIALS_FILE_NAME),
            lock: dir.join(LOCK_FILE_NAME),
            commits: Arc::default(),
            parsed: Arc::default(),
        }
    }

    /// The path of the credentials file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the document without locking (the file is only ever replaced by `rename`), from the
    /// cache while the file is unchanged. `user` names the caller's user in a corruption error.
    pub(crate) fn read(&self, user: &str) -> Result<Arc<Document>, StoreError> {
        self.load(user, true)
    }

    /// Parses the file afresh (the compare of a write).
    fn read_fresh(&self, user: &str) -> Result<Document, StoreError> {
        let doc = self.load(user, false)?;
        Ok(Arc::try_unwrap(doc).unwrap_or_else(|shared| Document {
            generation: shared.generation,
            entries: shared.entries.clone(),
        }))
    }

    fn cached(&self) -> MutexGuard<'_, Option<Parsed>> {
        self.parsed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn load(&self, user: &str, use_cache: bool) -> Result<Arc<Document>, StoreError> {
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Arc::default()),
            Err(e) => return Err(self.unavailable("read", &e)),
        };
        // The stamp of the open handle describes exactly the bytes read below.
        let stamp = FileStamp::of(&file.metadata().map_err(|e| self.unavailable("read", &e))?);
        if use_cache
            && let Some((cached, doc)) = self.cached().as_ref()
            && *cached == stamp
        {
            return Ok(Arc::clone(doc));
        }
        let bytes = match read_bounded(&mut file).map_err(|e| self.unavailable("read", &e))? {
            Some(bytes) => bytes,
            None => {
                return Err(StoreError::Corrupt {
                    user: user.to_owned(),
                    reason: format!(
                        "the credentials file {} is larger than {MAX_CREDENTIALS_FILE_BYTES} bytes",
                        self.path.display()
                    ),
                });
            }
        };
        let doc: Document = serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
            user: user.to_owned(),
            reason: format!(
                "the credentials file {} is not a valid credentials document: {}",
                self.path.display(),
                redact_quoted(&e.to_string())
            ),
        })?;
        let doc = Arc::new(doc);
        if use_cache {
            *self.cached() = Some((stamp, Arc::clone(&doc)));
        }
        Ok(doc)
    }

    /// Applies `edit` to `user`'s entry if that entry is still at version `expected` (see
    /// [`entry_version`]), under the exclusive lock; returns the entry's new version. Blocks
    /// until the write is durable (it may be committed by another thread of this process, together
    /// with other writes).
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the user's entry changed; [`StoreError::Corrupt`] when the
    /// file cannot be parsed (it is left as it is); [`StoreError::Unavailable`] on I/O failure, on
    /// a lock held for longer than [`LOCK_WAIT`](super::fsutil::LOCK_WAIT), or when the file
    /// would grow past its bound.
    pub(crate) fn write(&self, user: &str, expected: &str, edit: Edit) -> Result<String, StoreError> {
        let mut queue = self.commits.queue();
        let ticket = queue.next_ticket;
        queue.next_ticket = ticket.wrapping_add(1);
        queue.pending.push(Request {
            ticket,
            user: user.to_owned(),
            expected: expected.to_owned(),
            edit,
        });
        loop {
            if let Some(result) = queue.results.remove(&ticket) {
                return result;
            }
            if queue.committing {
                queue = self
                    .commits
                    .finished
                    .wait(queue)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            queue.committing = true;
            let batch = std::mem::take(&mut queue.pending);
            drop(queue);
            let mut committer = Committer {
                commits: &self.commits,
                outcomes: batch
                    .iter()
                    .map(|r| {
                        let interrupted = StoreError::Unavailable(format!(
                            "the write of the credentials file {} was interrupted",
                            self.path.display()
                        ));
                        (r.ticket, Err(interrupted))
                    })
                    .collect(),
            };
            committer.outcomes = self.commit(batch);
            drop(committer);
            queue = self.commits.queue();
        }
    }

    /// Applies a batch of writes under the lock with one file replacement.
    fn commit(&self, batch: Vec<Request>) -> Vec<Outcome> {
        let prepared = ensure_private_dir(&self.dir)
            .map_err(|e| self.unavailable("create the directory of", &e))
            .and_then(|()| lock_exclusive(&self.lock).map_err(|e| self.unavailable("lock", &e)))
            .and_then(|lock| Ok((lock, self.read_fresh("")?)));
        let (_lock, mut doc) = match prepared {
            Ok(prepared) => prepared,
            Err(e) => {
                return batch
                    .iter()
                    .map(|r| (r.ticket, Err(for_user(&e, &r.user))))
                    .collect();
            }
        };
        let mut outcomes = Vec::with_capacity(batch.len());
        let mut changed = false;
        for request in batch {
            let Request {
                ticket,
                user,
                expected,
                edit,
            } = request;
            if entry_version(doc.entries.get(&user)) != expected {
                outcomes.push((ticket, Err(StoreError::Conflict(user))));
                continue;
            }
            let version = match edit {
                Edit::Put(value) => {
                    let version = entry_version(Some(&value));
                    doc.entries.insert(user, value);
                    changed = true;
                    version
                }
                Edit::Remove => {
                    changed |= doc.entries.remove(&user).is_some();
                    ABSENT_VERSION.to_owned()
                }
            };
            outcomes.push((ticket, Ok(version)));
        }
        if changed && let Err(e) = self.replace(&mut doc) {
            for (_, outcome) in &mut outcomes {
                if outcome.is_ok() {
                    *outcome = Err(for_user(&e, ""));
                }
            }
        }
        outcomes
    }

    /// Writes `doc` (with the next generation) over the file, durably.
    fn replace(&self, doc: &mut Document) -> Result<(), StoreError> {
        doc.generation = doc.generation.checked_add(1).ok_or_else(|| {
            StoreError::Unavailable(format!(
                "the credentials file {} has reached the largest generation",
                self.path.display()
            ))
        })?;
        let mut bytes = serde_json::to_vec_pretty(&doc)
            .map_err(|e| StoreError::Unavailable(format!("cannot serialize the credentials file: {e}")))?;
        bytes.push(b'\n');
        // Whatever happens next, the cached document may no longer be the file's.
        *self.cached() = None;
        if bytes.len() > MAX_CREDENTIALS_FILE_BYTES {
            return Err(StoreError::Unavailable(format!(
                "the credentials file {} would be {} bytes, more than {MAX_CREDENTIALS_FILE_BYTES}; \
                 remove unused users",
                self.path.display(),
                bytes.len()
            )));
        }
        atomic_replace(&self.dir, &self.path, &bytes).map_err(|e| self.unavailable("write", &e))
    }

    fn unavailable(&self, what: &str, e: &io::Error) -> StoreError {
        StoreError::Unavailable(format!(
            "cannot {what} the credentials file {}: {e}",
            self.path.display()
        ))
    }
}

/// A copy of an error shared by a whole batch, naming `user` where the error names one.
fn for_user(error: &StoreError, user: &str) -> StoreError {
    match error {
        StoreError::Unavailable(m) => StoreError::Unavailable(m.clone()),
        StoreError::Conflict(_) => StoreError::Conflict(user.to_owned()),
        StoreError::Corrupt { reason, .. } => StoreError::Corrupt {
            user: user.to_owned(),
            reason: reason.clone(),
        },
        StoreError::Missing(m) => StoreError::Missing(m.clone()),
    }
}

/// The file's bytes, or `None` when it is larger than [`MAX_CREDENTIALS_FILE_BYTES`].
fn read_bounded(file: &mut File) -> io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    file.by_ref()
        .take(MAX_CREDENTIALS_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    Ok((bytes.len() <= MAX_CREDENTIALS_FILE_BYTES).then_some(bytes))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn entry(n: u64) -> serde_json::Value {
        serde_json::json!({"n": n})
    }

    #[test]
    fn an_unchanged_file_is_parsed_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = CredentialsFile::new(dir.path());
        file.write("alice", ABSENT_VERSION, Edit::Put(entry(1))).unwrap();
        let first = file.read("alice").unwrap();
        let second = file.read("alice").unwrap();
        assert!(
            Arc::ptr_eq(&first, &second),
            "the second read should come from the cache"
        );
        assert_eq!(second.entries.get("alice"), Some(&entry(1)));
    }

    #[test]
    fn a_write_by_another_process_is_seen_by_the_next_read() {
        let dir = tempfile::tempdir().unwrap();
        let ours = CredentialsFile::new(dir.path());
        // A second handle has its own queue and cache, as another process would.
        let theirs = CredentialsFile::new(dir.path());
        let v1 = ours.write("alice", ABSENT_VERSION, Edit::Put(entry(1))).unwrap();
        assert_eq!(ours.read("alice").unwrap().entries.get("alice"), Some(&entry(1)));
        theirs.write("alice", &v1, Edit::Put(entry(2))).unwrap();
        assert_eq!(ours.read("alice").unwrap().entries.get("alice"), Some(&entry(2)));
        theirs.write("bob", ABSENT_VERSION, Edit::Put(entry(3))).unwrap();
        let doc = ours.read("alice").unwrap();
        assert_eq!(doc.entries.get("bob"), Some(&entry(3)));
        assert_eq!(doc.generation, 3);
    }

    #[test]
    fn our_own_write_is_seen_by_the_next_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = CredentialsFile::new(dir.path());
        let v1 = file.write("alice", ABSENT_VERSION, Edit::Put(entry(1))).unwrap();
        assert_eq!(file.read("alice").unwrap().entries.get("alice"), Some(&entry(1)));
        file.write("alice", &v1, Edit::Remove).unwrap();
        assert!(!file.read("alice").unwrap().entries.contains_key("alice"));
    }

    #[test]
    fn a_stale_cache_never_hides_a_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let ours = CredentialsFile::new(dir.path());
        let theirs = CredentialsFile::new(dir.path());
        let v1 = ours.write("alice", ABSENT_VERSION, Edit::Put(entry(1))).unwrap();
        let _cached = ours.read("alice").unwrap();
        theirs.write("alice", &v1, Edit::Put(entry(2))).unwrap();
        // The version we computed from the old entry no longer matches the file.
        let err = ours.write("alice", &v1, Edit::Put(entry(9))).unwrap_err();
        assert!(
            matches!(err, StoreError::Conflict(ref u) if u == "alice"),
            "{err:?}"
        );
    }
}
