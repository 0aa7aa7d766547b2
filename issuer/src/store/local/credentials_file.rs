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
//!   nor a compare re-serializes or re-hashes an unchanged entry.
//! - Writers wait for their commit without holding a thread: one blocking thread at a time runs
//!   the commits of this process back to back, while the next batch gathers.
//! - The file is written with one entry per line (`{"generation": n, "entries": {` … `}}`); any
//!   JSON layout of the same document is read, so files of earlier versions read unchanged.

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    fs::{File, Metadata},
    io::{self, Read},
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use tokio::sync::oneshot;

use super::fsutil::{atomic_replace_kept, ensure_private_dir, lock_exclusive};
use crate::store::{StoreError, redact::redact_quoted};

/// The file name of the credentials file inside the state directory.
pub const CREDENTIALS_FILE_NAME: &str = "credentials.json";
/// The file name of the lock file inside the state directory.
pub const LOCK_FILE_NAME: &str = "credentials.json.lock";
/// The largest credentials file read or written: 16 MiB.
pub const MAX_CREDENTIALS_FILE_BYTES: usize = 16 * 1024 * 1024;
/// How long a batch gathers when writes are concurrent (see [`CommitTurn::run`]): short next to
/// a refresh's latency under load, long next to the arrival gap of concurrent writers.
const LINGER: std::time::Duration = std::time::Duration::from_millis(3);
/// A batch this large is committed without lingering.
const LINGER_BATCH: usize = 16;
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

/// One user's entry as held in memory: its compact JSON (what the file holds for it) and its
/// version.
///
/// The version is `sha256:<hex>` of the compact JSON ([`ABSENT_VERSION`] for a user without an
/// entry). It depends on that entry alone, so another user's write never moves it; two equal
/// entries have the same version, which is sound because a change computed from an entry depends
/// only on its content.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The entry's compact JSON object.
    pub json: String,
    /// The entry's version.
    pub version: String,
}

impl Entry {
    /// The entry of a JSON object.
    pub(crate) fn of(value: &serde_json::Value) -> Self {
        let json = value.to_string();
        let version = format!("sha256:{}", hex::encode(Sha256::digest(json.as_bytes())));
        Self { json, version }
    }
}

/// The document as this process holds it: every entry with its version.
#[derive(Clone, Debug, Default)]
pub(crate) struct Snapshot {
    /// The file's rewrite count (see [`Document::generation`]).
    pub generation: u64,
    /// Each user's entry.
    pub entries: BTreeMap<String, Arc<Entry>>,
}

impl Snapshot {
    fn of(doc: &Document) -> Self {
        Self {
            generation: doc.generation,
            entries: doc
                .entries
                .iter()
                .map(|(user, value)| (user.clone(), Arc::new(Entry::of(value))))
                .collect(),
        }
    }

    /// The version of `user`'s entry (see [`Entry`]).
    pub(crate) fn version(&self, user: &str) -> &str {
        self.entries
            .get(user)
            .map_or(ABSENT_VERSION, |e| e.version.as_str())
    }

    /// The file's bytes: the document with one compact entry per line.
    fn render(&self) -> Result<Vec<u8>, StoreError> {
        let size: usize = self
            .entries
            .iter()
            .map(|(u, e)| u.len() + e.json.len() + 12)
            .sum();
        let mut out = String::with_capacity(size + 64);
        let fmt =
            |e: std::fmt::Error| StoreError::Unavailable(format!("cannot render the credentials file: {e}"));
        write!(
            out,
            "{{\n  \"generation\": {},\n  \"entries\": {{",
            self.generation
        )
        .map_err(fmt)?;
        for (i, (user, entry)) in self.entries.iter().enumerate() {
            let key = serde_json::to_string(user)
                .map_err(|e| StoreError::Unavailable(format!("cannot render the credentials file: {e}")))?;
            let sep = if i == 0 { "" } else { "," };
            write!(out, "{sep}\n    {key}: {}", entry.json).map_err(fmt)?;
        }
        out.push_str(if self.entries.is_empty() {
            "}\n}\n"
        } else {
            "\n  }\n}\n"
        });
        Ok(out.into_bytes())
    }
}

/// The paths of the credentials file and its lock, this process's commit queue, and the last
/// document parsed or written.
#[derive(Clone, Debug)]
pub(crate) struct CredentialsFile {
    dir: PathBuf,
    path: PathBuf,
    lock: PathBuf,
    queue: Arc<Mutex<Queue>>,
    cached: Arc<Mutex<Option<Cached>>>,
}

/// The last document parsed or written, the file it is the content of (kept open, so its inode
/// number stays taken), and that file's stamp.
#[derive(Debug)]
struct Cached {
    stamp: FileStamp,
    _file: File,
    snapshot: Arc<Snapshot>,
}

/// What identifies one version of the file on disk. The file is only ever replaced by `rename`
/// of a new file, so a new version is a new inode (the cache holds the old one open, so it is
/// not reused); size and times also catch an edit in place.
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
    /// Set the user's entry (see [`Entry::of`]).
    Put(Arc<Entry>),
    /// Remove the user's entry.
    Remove,
}

/// The writes waiting for a commit, and whether a commit turn is running.
#[derive(Debug, Default)]
struct Queue {
    pending: Vec<Request>,
    committing: bool,
}

/// One queued write and where its outcome goes.
#[derive(Debug)]
struct Request {
    user: String,
    expected: String,
    edit: Edit,
    reply: oneshot::Sender<Result<String, StoreError>>,
}

/// The duty to commit this process's queued writes, held by one thread at a time. Dropped
/// without finishing (a panic, or a blocking task that never ran), it gives up the turn and fails
/// the writes still queued, so no writer waits forever.
#[derive(Debug)]
pub(crate) struct CommitTurn {
    file: CredentialsFile,
    finished: bool,
}

impl CommitTurn {
    /// Commits batch after batch until the queue is empty. When writes arrived while the last
    /// batch was being committed (writers are concurrent), the next batch gathers for up to
    /// [`LINGER`] more before it is taken, so several writes share one synced replacement; a
    /// lone writer never waits.
    pub(crate) fn run(mut self) {
        let mut first = true;
        loop {
            let waiting = self.file.queue().pending.len();
            if !first && (1..LINGER_BATCH).contains(&waiting) {
                std::thread::sleep(LINGER);
            }
            first = false;
            let batch = {
                let mut queue = self.file.queue();
                if queue.pending.is_empty() {
                    queue.committing = false;
                    self.finished = true;
                    return;
                }
                std::mem::take(&mut queue.pending)
            };
            self.file.commit(batch);
        }
    }
}

impl Drop for CommitTurn {
    fn drop(&mut self) {
        if !self.finished {
            let mut queue = self.file.queue();
            queue.committing = false;
            // Dropping the senders fails the waiting writers with "interrupted".
            queue.pending.clear();
        }
    }
}

/// A pending write's receiver, and the commit turn when this write must start one.
type Submitted = (oneshot::Receiver<Result<String, StoreError>>, Option<CommitTurn>);

impl CredentialsFile {
    /// The credentials file inside `dir`.
    pub(crate) fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_owned(),
            path: dir.join(CREDENTIALS_FILE_NAME),
            lock: dir.join(LOCK_FILE_NAME),
            queue: Arc::default(),
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

    /// The cached document when the file on disk is still the cached file: an `open` and an
    /// `fstat`, cheap enough for an async thread. `None` when [`CredentialsFile::read`] must parse.
    pub(crate) fn read_cached(&self) -> Option<Arc<Snapshot>> {
        let file = File::open(&self.path).ok()?;
        let stamp = FileStamp::of(&file.metadata().ok()?);
        self.cached()
            .as_ref()
            .filter(|cached| cached.stamp == stamp)
            .map(|cached| Arc::clone(&cached.snapshot))
    }

    /// Reads the document without locking (the file is only ever replaced by `rename`), from the
    /// cache while the file is unchanged. `user` names the caller's user in a corruption error.
    pub(crate) fn read(&self, user: &str) -> Result<Arc<Snapshot>, StoreError> {
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Arc::default()),
            Err(e) => return Err(self.unavailable("read", &e)),
        };
        // The stamp of the open handle describes exactly the bytes read below.
        let stamp = FileStamp::of(&file.metadata().map_err(|e| self.unavailable("read", &e))?);
        if let Some(cached) = self.cached().as_ref()
            && cached.stamp == stamp
        {
            return Ok(Arc::clone(&cached.snapshot));
        }
        let snapshot = Arc::new(self.parse(&mut file, user)?);
        let mut cached = self.cached();
        // A reader that opened the file just before a commit replaced it parses the older file:
        // it must not evict the newer document (generations only grow under the lock).
        if cached
            .as_ref()
            .is_none_or(|c| c.snapshot.generation <= snapshot.generation)
        {
            *cached = Some(Cached {
                stamp,
                _file: file,
                snapshot: Arc::clone(&snapshot),
            });
        }
        Ok(snapshot)
    }

    fn parse(&self, file: &mut File, user: &str) -> Result<Snapshot, StoreError> {
        let bytes = match read_bounded(file).map_err(|e| self.unavailable("read", &e))? {
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
        Ok(Snapshot::of(&doc))
    }

    /// Queues a write; the caller must run the returned turn, if any, then wait on the receiver.
    fn submit(&self, user: &str, expected: &str, edit: Edit) -> Submitted {
        let (reply, receiver) = oneshot::channel();
        let mut queue = self.queue();
        queue.pending.push(Request {
            user: user.to_owned(),
            expected: expected.to_owned(),
            edit,
            reply,
        });
        let turn = (!queue.committing).then(|| {
            queue.committing = true;
            CommitTurn {
                file: self.clone(),
                finished: false,
            }
        });
        (receiver, turn)
    }

    fn interrupted(&self) -> StoreError {
        StoreError::Unavailable(format!(
            "the write of the credentials file {} was interrupted",
            self.path.display()
        ))
    }

    /// [`CredentialsFile::write_async`] for synchronous callers (tests): blocks the thread.
    #[cfg(test)]
    pub(crate) fn write(&self, user: &str, expected: &str, edit: Edit) -> Result<String, StoreError> {
        let (receiver, turn) = self.submit(user, expected, edit);
        if let Some(turn) = turn {
            turn.run();
        }
        receiver
            .blocking_recv()
            .unwrap_or_else(|_| Err(self.interrupted()))
    }

    /// Applies `edit` to `user`'s entry if that entry is still at version `expected` (see
    /// [`Entry`]), under the exclusive lock; returns the entry's new version. Resolves once the
    /// write is durable; it may be committed together with other writes of this process, by a
    /// commit turn on a blocking thread (started here when none runs). Waits without holding a
    /// thread.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the user's entry changed; [`StoreError::Corrupt`] when the
    /// file cannot be parsed (it is left as it is); [`StoreError::Unavailable`] on I/O failure, on
    /// a lock held for longer than [`LOCK_WAIT`](super::fsutil::LOCK_WAIT), or when the file
    /// would grow past its bound.
    pub(crate) async fn write_async(
        &self,
        user: &str,
        expected: &str,
        edit: Edit,
    ) -> Result<String, StoreError> {
        let (receiver, turn) = self.submit(user, expected, edit);
        if let Some(turn) = turn {
            // If the task never runs (runtime shutting down), dropping the turn fails the queue.
            drop(tokio::task::spawn_blocking(move || turn.run()));
        }
        receiver.await.unwrap_or_else(|_| Err(self.interrupted()))
    }

    /// The document under the lock: the cached one while the file is still the cached file,
    /// else parsed afresh (and cached).
    fn read_locked(&self) -> Result<Snapshot, StoreError> {
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Snapshot::default()),
            Err(e) => return Err(self.unavailable("read", &e)),
        };
        let stamp = FileStamp::of(&file.metadata().map_err(|e| self.unavailable("read", &e))?);
        if let Some(cached) = self.cached().as_ref()
            && cached.stamp == stamp
        {
            return Ok(Snapshot::clone(&cached.snapshot));
        }
        let snapshot = self.parse(&mut file, "")?;
        *self.cached() = Some(Cached {
            stamp,
            _file: file,
            snapshot: Arc::new(snapshot.clone()),
        });
        Ok(snapshot)
    }

    /// Applies a batch of writes under the lock with one file replacement, and answers each.
    fn commit(&self, batch: Vec<Request>) {
        let prepared = ensure_private_dir(&self.dir)
            .map_err(|e| self.unavailable("create the directory of", &e))
            .and_then(|()| lock_exclusive(&self.lock).map_err(|e| self.unavailable("lock", &e)))
            .and_then(|lock| Ok((lock, self.read_locked()?)));
        let (_lock, mut doc) = match prepared {
            Ok(prepared) => prepared,
            Err(e) => {
                for request in batch {
                    let _ = request.reply.send(Err(for_user(&e, &request.user)));
                }
                return;
            }
        };
        let mut outcomes = Vec::with_capacity(batch.len());
        let mut changed = false;
        for request in batch {
            let Request {
                user,
                expected,
                edit,
                reply,
            } = request;
            if doc.version(&user) != expected {
                outcomes.push((reply, Err(StoreError::Conflict(user))));
                continue;
            }
            let version = match edit {
                Edit::Put(entry) => {
                    let version = entry.version.clone();
                    doc.entries.insert(user, entry);
                    changed = true;
                    version
                }
                Edit::Remove => {
                    changed |= doc.entries.remove(&user).is_some();
                    ABSENT_VERSION.to_owned()
                }
            };
            outcomes.push((reply, Ok(version)));
        }
        if changed && let Err(e) = self.replace(doc) {
            for (_, outcome) in &mut outcomes {
                if outcome.is_ok() {
                    *outcome = Err(for_user(&e, ""));
                }
            }
        }
        for (reply, outcome) in outcomes {
            // A writer that stopped waiting has nothing to be told.
            let _ = reply.send(outcome);
        }
    }

    /// Writes `doc` (with the next generation) over the file, durably, and caches it as the
    /// file's content. Called under the lock.
    fn replace(&self, mut doc: Snapshot) -> Result<(), StoreError> {
        doc.generation = doc.generation.checked_add(1).ok_or_else(|| {
            StoreError::Unavailable(format!(
                "the credentials file {} has reached the largest generation",
                self.path.display()
            ))
        })?;
        let bytes = doc.render()?;
        // The cached document stays: it is keyed by the stamp of the file on disk, which stays
        // that file until the rename below, so readers keep being served from it meanwhile (and
        // a failed write leaves it correct).
        if bytes.len() > MAX_CREDENTIALS_FILE_BYTES {
            return Err(StoreError::Unavailable(format!(
                "the credentials file {} would be {} bytes, more than {MAX_CREDENTIALS_FILE_BYTES}; \
                 remove unused users",
                self.path.display(),
                bytes.len()
            )));
        }
        let file =
            atomic_replace_kept(&self.dir, &self.path, &bytes).map_err(|e| self.unavailable("write", &e))?;
        // Stamped after the rename (which changes the change time), through our own handle: under
        // the lock nobody else replaces the file, so this is the stamp readers will see.
        if let Ok(meta) = file.metadata() {
            *self.cached() = Some(Cached {
                stamp: FileStamp::of(&meta),
                _file: file,
                snapshot: Arc::new(doc),
            });
        }
        Ok(())
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

    fn entry(n: u64) -> Arc<Entry> {
        Arc::new(Entry::of(&serde_json::json!({"n": n})))
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

    #[test]
    fn a_file_in_the_earlier_pretty_layout_is_read_at_the_same_versions() {
        let dir = tempfile::tempdir().unwrap();
        let mut entries = BTreeMap::new();
        entries.insert("alice".to_owned(), serde_json::json!({"n": 1, "s": "é\"x"}));
        entries.insert("bob".to_owned(), serde_json::json!({"n": 2}));
        let old = Document {
            generation: 7,
            entries,
        };
        let mut bytes = serde_json::to_vec_pretty(&old).unwrap();
        bytes.push(b'\n');
        std::fs::write(dir.path().join(CREDENTIALS_FILE_NAME), bytes).unwrap();
        let file = CredentialsFile::new(dir.path());
        let doc = file.read("alice").unwrap();
        assert_eq!(doc.generation, 7);
        for (user, value) in &old.entries {
            assert_eq!(doc.entries.get(user).map(|e| e.as_ref()), Some(&Entry::of(value)));
        }
        let v = doc.version("bob").to_owned();
        file.write("bob", &v, Edit::Put(entry(3))).unwrap();
    }

    #[test]
    fn a_file_we_write_parses_as_the_same_document_with_every_entry_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let file = CredentialsFile::new(dir.path());
        let tricky = Arc::new(Entry::of(
            &serde_json::json!({"k": "quote \" newline \n é", "n": [1, 2]}),
        ));
        file.write("alice", ABSENT_VERSION, Edit::Put(Arc::clone(&tricky)))
            .unwrap();
        file.write("bob", ABSENT_VERSION, Edit::Put(entry(2))).unwrap();
        let bytes = std::fs::read(file.path()).unwrap();
        // What the earlier code parses: the serde document.
        let doc: Document = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(doc.generation, 2);
        assert_eq!(doc.entries.len(), 2);
        assert_eq!(Entry::of(&doc.entries["alice"]), *tricky);
        assert_eq!(Entry::of(&doc.entries["bob"]), *entry(2));
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(text.lines().count(), 7, "one line per entry: {text}");
    }

    #[test]
    fn an_emptied_file_is_a_valid_document() {
        let dir = tempfile::tempdir().unwrap();
        let file = CredentialsFile::new(dir.path());
        let v = file.write("alice", ABSENT_VERSION, Edit::Put(entry(1))).unwrap();
        file.write("alice", &v, Edit::Remove).unwrap();
        let doc: Document = serde_json::from_slice(&std::fs::read(file.path()).unwrap()).unwrap();
        assert!(doc.entries.is_empty());
        assert_eq!(doc.generation, 2);
    }

    #[test]
    fn a_write_by_another_process_between_our_own_writes_is_a_conflict_at_the_compare() {
        let dir = tempfile::tempdir().unwrap();
        let ours = CredentialsFile::new(dir.path());
        let theirs = CredentialsFile::new(dir.path());
        // Our commit caches the document it wrote; the other process then rewrites the same
        // entry with one of the same length, so only the inode tells the files apart.
        let v1 = ours.write("alice", ABSENT_VERSION, Edit::Put(entry(1))).unwrap();
        let v2 = theirs.write("alice", &v1, Edit::Put(entry(2))).unwrap();
        let err = ours.write("alice", &v1, Edit::Put(entry(3))).unwrap_err();
        assert!(
            matches!(err, StoreError::Conflict(ref u) if u == "alice"),
            "{err:?}"
        );
        // And the compare now works from their file.
        ours.write("alice", &v2, Edit::Put(entry(4))).unwrap();
        assert_eq!(
            theirs.read("alice").unwrap().entries.get("alice"),
            Some(&entry(4))
        );
    }

    #[test]
    fn a_corrupt_file_is_never_overwritten_even_with_a_cached_document() {
        let dir = tempfile::tempdir().unwrap();
        let file = CredentialsFile::new(dir.path());
        let v1 = file.write("alice", ABSENT_VERSION, Edit::Put(entry(1))).unwrap();
        std::fs::write(file.path(), b"{not json").unwrap();
        let err = file.write("alice", &v1, Edit::Put(entry(2))).unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
        assert_eq!(std::fs::read(file.path()).unwrap(), b"{not json");
    }

    #[test]
    fn a_commit_turn_dropped_before_running_fails_its_writers_and_frees_the_queue() {
        let dir = tempfile::tempdir().unwrap();
        let file = CredentialsFile::new(dir.path());
        let (receiver, turn) = file.submit("alice", ABSENT_VERSION, Edit::Put(entry(1)));
        let (second, no_turn) = file.submit("bob", ABSENT_VERSION, Edit::Put(entry(2)));
        assert!(
            turn.is_some() && no_turn.is_none(),
            "only the first writer commits"
        );
        drop(turn);
        assert!(
            receiver.blocking_recv().is_err(),
            "the writer is told, not left waiting"
        );
        assert!(second.blocking_recv().is_err());
        // The next writer takes a new turn and commits.
        file.write("alice", ABSENT_VERSION, Edit::Put(entry(1))).unwrap();
        assert_eq!(file.read("alice").unwrap().entries.get("alice"), Some(&entry(1)));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_async_writers_are_committed_in_batches_and_all_land() {
        let dir = tempfile::tempdir().unwrap();
        let file = CredentialsFile::new(dir.path());
        let mut tasks = Vec::new();
        for n in 0..48u64 {
            let file = file.clone();
            tasks.push(tokio::spawn(async move {
                file.write_async(&format!("user-{n}"), ABSENT_VERSION, Edit::Put(entry(n)))
                    .await
            }));
        }
        for (n, task) in tasks.into_iter().enumerate() {
            let version = task.await.unwrap().unwrap();
            assert_eq!(version, entry(n as u64).version);
        }
        let doc: Document = serde_json::from_slice(&std::fs::read(file.path()).unwrap()).unwrap();
        assert_eq!(doc.entries.len(), 48);
        assert!(doc.generation <= 48, "generation {}", doc.generation);
        assert!(!file.queue().committing, "the turn ended with the queue");
    }

    #[test]
    fn a_file_replaced_by_hand_with_a_lower_generation_is_still_what_reads_return() {
        let dir = tempfile::tempdir().unwrap();
        let file = CredentialsFile::new(dir.path());
        let v1 = file.write("alice", ABSENT_VERSION, Edit::Put(entry(1))).unwrap();
        file.write("alice", &v1, Edit::Put(entry(2))).unwrap();
        let by_hand = dir.path().join("by-hand.json");
        std::fs::write(&by_hand, br#"{"generation": 0, "entries": {"alice": {"n": 5}}}"#).unwrap();
        std::fs::rename(&by_hand, file.path()).unwrap();
        assert_eq!(file.read("alice").unwrap().entries.get("alice"), Some(&entry(5)));
        assert_eq!(file.read("alice").unwrap().entries.get("alice"), Some(&entry(5)));
        // The compare under the lock works from that file too.
        file.write("alice", &entry(5).version, Edit::Put(entry(6)))
            .unwrap();
        assert_eq!(file.read("alice").unwrap().generation, 1);
    }
}
