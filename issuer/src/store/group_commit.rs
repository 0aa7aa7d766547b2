//! Group commit of the Kubernetes store's entry writes: the writes of existing entries that
//! arrive while one is in flight wait for it and then go out together as ONE JSON Patch (each
//! user's `test` of the value as read, then its `replace` or `remove`).
//!
//! Why: every user's entry is a key of one Secret, and the API server serialises the writes of one
//! object — each concurrent patch that loses etcd's compare-and-swap is re-read and re-applied
//! inside the API server, so N concurrent patches cost about N²/2 applications. One patch in flight
//! per issuer replica keeps the cost linear in the writes. A batch that fails its tests (another
//! replica changed one of its users since the read) is sent again one write at a time, so each
//! write gets its own answer and only the stale one is a conflict.
//!
//! A commit runs as its own task: a caller that goes away does not cancel the other callers'
//! writes.

use std::collections::{BTreeSet, VecDeque};
use std::future::Future;
use std::sync::{Mutex, PoisonError};

use tokio::sync::oneshot;

use super::kube::layout::Phase;
use super::{StoreError, Version};

/// The most writes in one patch.
pub(crate) const MAX_BATCH: usize = 64;

/// A write of a user's existing entry: only if it still holds `read` (base64, as read), and the
/// Secret is still in `phase` (when given), set it to `value` (base64) or remove it (`None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EntryWrite {
    /// The user (the Secret's key).
    pub name: String,
    /// The migration phase the Secret must still be in; writes of different phases never share
    /// a patch.
    pub phase: Option<Phase>,
    /// The value as read.
    pub read: String,
    /// The new value; `None` removes the key.
    pub value: Option<String>,
}

/// Where a write's outcome goes.
pub(crate) type Reply = oneshot::Sender<Result<Version, StoreError>>;

/// Queued writes, each with where its outcome goes.
pub(crate) type Batch = Vec<(EntryWrite, Reply)>;

/// The writes waiting for the next commit, and the turn to commit.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    pending: Mutex<VecDeque<(EntryWrite, Reply)>>,
    turn: tokio::sync::Mutex<()>,
}

impl Queue {
    /// Queues `write` and waits for its outcome; whoever holds the turn sends the queued writes
    /// (at most [`MAX_BATCH`]) through `commit`, which must answer every reply it is given.
    pub(crate) async fn submit<C, F>(&self, write: EntryWrite, commit: C) -> Result<Version, StoreError>
    where
        C: Fn(Batch) -> F,
        F: Future<Output = ()> + Send + 'static,
    {
        let (reply, mut outcome) = oneshot::channel();
        self.pending().push_back((write, reply));
        loop {
            if let Some(done) = settled(&mut outcome) {
                return done;
            }
            let _turn = self.turn.lock().await;
            if let Some(done) = settled(&mut outcome) {
                return done;
            }
            let batch: Vec<_> = {
                let mut pending = self.pending();
                let n = pending.len().min(MAX_BATCH);
                pending.drain(..n).collect()
            };
            if !batch.is_empty() {
                let _ = tokio::spawn(commit(batch)).await;
            }
        }
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, VecDeque<(EntryWrite, Reply)>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The outcome, once answered.
fn settled(
    outcome: &mut oneshot::Receiver<Result<Version, StoreError>>,
) -> Option<Result<Version, StoreError>> {
    match outcome.try_recv() {
        Ok(done) => Some(done),
        Err(oneshot::error::TryRecvError::Empty) => None,
        Err(oneshot::error::TryRecvError::Closed) => Some(Err(StoreError::Unavailable(
            "the credentials write was interrupted before the Kubernetes API answered".to_owned(),
        ))),
    }
}

/// Splits a batch into the first write of each user and the later ones, which read the value the
/// first replaces and so cannot be current once it is written.
pub(crate) fn split_repeats(batch: Batch) -> (Batch, Batch) {
    let mut seen = BTreeSet::new();
    batch
        .into_iter()
        .partition(|(write, _)| seen.insert(write.name.clone()))
}

/// The JSON Patch (RFC 6902) of `writes`: `first` (the test of the migration phase) once, then
/// for each write a `test` of `/data/<name>` against the value as read and its `replace` or
/// `remove`. The API server applies all or none.
pub(crate) fn patch_of<'a>(
    first: Option<serde_json::Value>,
    writes: impl IntoIterator<Item = &'a EntryWrite>,
) -> serde_json::Value {
    let mut ops: Vec<serde_json::Value> = first.into_iter().collect();
    for write in writes {
        // RFC 6901 escaping; a DNS label needs none, but the pointer must never be ambiguous.
        let path = super::kube::layout::data_pointer(&write.name);
        ops.push(serde_json::json!({"op": "test", "path": path, "value": write.read}));
        ops.push(match &write.value {
            Some(value) => serde_json::json!({"op": "replace", "path": path, "value": value}),
            None => serde_json::json!({"op": "remove", "path": path}),
        });
    }
    serde_json::Value::Array(ops)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn write(name: &str, read: &str, value: Option<&str>) -> EntryWrite {
        EntryWrite {
            name: name.into(),
            phase: None,
            read: read.into(),
            value: value.map(Into::into),
        }
    }

    #[test]
    fn the_patch_tests_each_value_as_read_before_changing_it() {
        let writes = [write("alice", "QQ==", Some("Qg==")), write("bob", "Qw==", None)];
        let phase = serde_json::json!({"op": "test", "path": "/metadata/annotations/x", "value": "legacy"});
        let patch = patch_of(Some(phase.clone()), &writes);
        assert_eq!(patch[0], phase, "the phase is tested first");
        assert_eq!(
            patch
                .as_array()
                .unwrap()
                .iter()
                .filter(|op| **op == phase)
                .count(),
            1,
            "and once per patch"
        );
        assert_eq!(
            patch_of(None, &writes),
            serde_json::json!([
                {"op": "test", "path": "/data/alice", "value": "QQ=="},
                {"op": "replace", "path": "/data/alice", "value": "Qg=="},
                {"op": "test", "path": "/data/bob", "value": "Qw=="},
                {"op": "remove", "path": "/data/bob"},
            ])
        );
    }

    #[test]
    fn a_users_second_write_in_a_batch_is_set_apart() {
        let batch: Vec<_> = [("alice", "1"), ("bob", "1"), ("alice", "2")]
            .into_iter()
            .map(|(n, r)| (write(n, r, None), oneshot::channel().0))
            .collect();
        let (first, repeats) = split_repeats(batch);
        let names = |b: &[(EntryWrite, Reply)]| {
            b.iter()
                .map(|(w, _)| w.read.clone() + &w.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&first), ["1alice", "1bob"]);
        assert_eq!(names(&repeats), ["2alice"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_arriving_during_a_commit_go_out_together_and_each_gets_its_answer() {
        let queue = Arc::new(Queue::default());
        let commits = Arc::new(AtomicUsize::new(0));
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let commit = {
            let (commits, sizes) = (Arc::clone(&commits), Arc::clone(&sizes));
            move |batch: Vec<(EntryWrite, Reply)>| {
                let (commits, sizes) = (Arc::clone(&commits), Arc::clone(&sizes));
                async move {
                    commits.fetch_add(1, Ordering::SeqCst);
                    sizes.lock().unwrap().push(batch.len());
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    for (write, reply) in batch {
                        let _ = reply.send(Ok(Version(format!("entry:{}", write.value.unwrap()))));
                    }
                }
            }
        };
        let mut tasks = Vec::new();
        for i in 0..40 {
            let (queue, commit) = (Arc::clone(&queue), commit.clone());
            tasks.push(tokio::spawn(async move {
                let name = format!("user-{i}");
                queue.submit(write(&name, "old", Some(&name)), commit).await
            }));
        }
        for (i, task) in tasks.into_iter().enumerate() {
            assert_eq!(task.await.unwrap().unwrap(), Version(format!("entry:user-{i}")));
        }
        let sizes = sizes.lock().unwrap();
        assert_eq!(sizes.iter().sum::<usize>(), 40, "every write committed once");
        assert!(
            commits.load(Ordering::SeqCst) < 40,
            "concurrent writes were grouped: {sizes:?}"
        );
    }
}
