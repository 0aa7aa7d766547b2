//! Writing the credentials file: the queue of this process's writes, and their group commit, one
//! batch at a time under the exclusive lock, with one durable replacement of the file per batch.

use std::sync::{Arc, PoisonError};

use ichor_server::atomic_file::{replace_before_dir_sync, sync_dir};
use tokio::sync::oneshot;

use super::{
    ABSENT_VERSION, CredentialsFile, MAX_CREDENTIALS_FILE_BYTES,
    document::{Entry, Snapshot},
    read::{Cached, FileStamp},
};
use crate::store::{
    StoreError,
    local::fsutil::{ensure_private_dir, lock_exclusive},
};

/// How long a batch gathers at most when writes are concurrent (see [`CommitTurn::run`]):
/// short next to a refresh's latency under load (tens of milliseconds once the signatures queue),
/// long next to the arrival gap of concurrent writers. Every batch costs a new file written and
/// two `fsync`s whatever its size, so under a steady stream of writes the batch size sets the
/// commit's share of the CPU: 10 ms gathered about 20 refreshes per batch on two cores, 3 ms
/// about 10, and the commit thread's share of the issuer's CPU fell from about 6 % to 3.5 %.
const LINGER: std::time::Duration = std::time::Duration::from_millis(10);
/// A batch this large is committed without gathering further: a full queue ends the linger at
/// once (see [`CredentialsFile::submit`]).
const LINGER_BATCH: usize = 64;
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
pub(super) struct Queue {
    pending: Vec<Request>,
    pub(super) committing: bool,
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
    /// [`LINGER`] more, or until [`LINGER_BATCH`] writes wait, before it is taken, so several
    /// writes share one synced replacement; a lone writer never waits.
    pub(crate) fn run(mut self) {
        let mut first = true;
        loop {
            let batch = {
                let mut queue = self.file.queue();
                if !first && (1..LINGER_BATCH).contains(&queue.pending.len()) {
                    queue = self
                        .file
                        .batch_full
                        .wait_timeout_while(queue, LINGER, |q| q.pending.len() < LINGER_BATCH)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
                first = false;
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
    /// Queues a write; the caller must run the returned turn, if any, then wait on the receiver.
    pub(super) fn submit(&self, user: &str, expected: &str, edit: Edit) -> Submitted {
        let (reply, receiver) = oneshot::channel();
        let mut queue = self.queue();
        queue.pending.push(Request {
            user: user.to_owned(),
            expected: expected.to_owned(),
            edit,
            reply,
        });
        // A full batch ends the running turn's gathering (see [`CommitTurn::run`]).
        if queue.committing && queue.pending.len() == LINGER_BATCH {
            self.batch_full.notify_one();
        }
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
    /// file cannot be parsed (it is left as it is); [`StoreError::Unavailable`] on I/O failure or
    /// on a lock held for longer than [`LOCK_WAIT`](crate::store::local::fsutil::LOCK_WAIT);
    /// [`StoreError::Full`] when the file would grow past [`MAX_CREDENTIALS_FILE_BYTES`] (the
    /// whole batch is refused and the file left as it was).
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
            return Err(StoreError::Full(format!(
                "the credentials file {} would be {} bytes, more than {MAX_CREDENTIALS_FILE_BYTES}, so the \
                 write was refused and nothing was written; {}",
                self.path.display(),
                bytes.len(),
                crate::store::FULL_REMEDY
            )));
        }
        let file = replace_before_dir_sync(&self.path, &bytes).map_err(|e| self.unavailable("write", &e))?;
        // Cached as soon as the new file is in place, before the directory sync: readers already
        // see it on disk, and served from the cache they need not parse it meanwhile. Stamped
        // after the rename (which changes the change time), through our own handle: under the
        // lock nobody else replaces the file, so this is the stamp readers will see.
        if let Ok(meta) = file.metadata() {
            *self.cached() = Some(Cached {
                stamp: FileStamp::of(&meta),
                _file: file,
                snapshot: Arc::new(doc),
            });
        }
        sync_dir(&self.dir).map_err(|e| self.unavailable("write", &e))
    }
}

/// A copy of an error shared by a whole batch, naming `user` where the error names one.
fn for_user(error: &StoreError, user: &str) -> StoreError {
    match error {
        StoreError::Unavailable(m) => StoreError::Unavailable(m.clone()),
        StoreError::Conflict(_) => StoreError::Conflict(user.to_owned()),
        StoreError::Busy(_) => StoreError::Busy(user.to_owned()),
        StoreError::Corrupt { reason, .. } => StoreError::Corrupt {
            user: user.to_owned(),
            reason: reason.clone(),
        },
        StoreError::Missing(m) => StoreError::Missing(m.clone()),
        StoreError::Full(m) => StoreError::Full(m.clone()),
    }
}
