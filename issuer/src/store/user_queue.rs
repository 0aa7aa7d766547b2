//! One user's credentials changes in this process, one at a time and in arrival order.
//!
//! Why: every change of a user's credentials (each rotation of any of the user's refresh
//! families, a new family at sign-in, a revocation, a password change) rewrites that user's one
//! entry, which is versioned as a whole. Concurrent changes of one entry in one process would all
//! read the same version, and all but one would lose the compare and retry; a user with many
//! sessions refreshing together ran out of retries. In line, each change reads the entry its
//! predecessor wrote, so its write is current: within a process a change conflicts only with
//! another process or replica writing the same entry, which the optimistic retries still handle.
//!
//! # Guarantees
//! - Per user, first come first served (tokio's `Mutex` queues its waiters in order). Users are
//!   independent: one user's line never delays another user's change, and a busy user has at most
//!   one write in a commit batch, beside every other user's.
//! - Bounded: a line holds the change in progress and at most `max_waiting` more (default
//!   [`MAX_WAITING_PER_USER`]); one more is refused at once with [`StoreError::Busy`], before
//!   anything is read or written. At most [`MAX_QUEUED_USERS`] users have a line at once; the
//!   changes of further users go unqueued, with the optimistic retries alone (as correct, only not
//!   ordered). A user's line is removed when its last change leaves it, also when a waiting
//!   caller gives up (its request was dropped), so an idle user costs nothing.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use tokio::sync::OwnedMutexGuard;

use super::StoreError;

/// The most changes of one user that wait behind the one in progress (one process): far more
/// than one person's sessions refresh at once, few enough that the last waits well under a
/// second behind the others on either store while no other process writes the same user (with
/// another replica winning every compare, each turn may last its conflict retries' pauses, about
/// half a second, and only this user's line waits).
pub const MAX_WAITING_PER_USER: usize = 256;

/// The most users with a line at once (one process): the map stays bounded whatever the load.
pub const MAX_QUEUED_USERS: usize = 4096;

/// The lines of the users whose credentials are being changed in this process.
#[derive(Debug)]
pub struct UserQueue {
    lines: Mutex<HashMap<String, Line>>,
    max_waiting: usize,
}

/// One user's line: the turn, and how many changes hold or wait for it.
#[derive(Debug, Default)]
struct Line {
    turn: Arc<tokio::sync::Mutex<()>>,
    present: usize,
}

/// A place in a user's line: leaving it (dropped) removes the line once nobody is in it.
#[derive(Debug)]
struct Place<'a> {
    queue: &'a UserQueue,
    name: String,
}

/// The turn to change one user's credentials; the next change of that user starts when this
/// is dropped.
#[derive(Debug)]
#[must_use = "the turn ends when it is dropped"]
pub struct Turn<'a> {
    // Declared first so it is dropped first: the turn passes on before the place is left.
    _turn: OwnedMutexGuard<()>,
    _place: Place<'a>,
}

impl Default for UserQueue {
    fn default() -> Self {
        Self::new(MAX_WAITING_PER_USER)
    }
}

impl UserQueue {
    /// Lines of at most `max_waiting` changes behind the one in progress (zero: a change that
    /// finds another in progress is refused).
    pub fn new(max_waiting: usize) -> Self {
        Self {
            lines: Mutex::new(HashMap::new()),
            max_waiting,
        }
    }

    /// Waits for the turn to change `name`'s credentials, in arrival order. `None` when
    /// [`MAX_QUEUED_USERS`] other users have a line: the change goes unqueued.
    ///
    /// # Errors
    /// [`StoreError::Busy`] when the user's line is full; nothing was read or written.
    pub async fn enter(&self, name: &str) -> Result<Option<Turn<'_>>, StoreError> {
        let turn = {
            let mut lines = self.lines();
            if !lines.contains_key(name) && lines.len() >= MAX_QUEUED_USERS {
                return Ok(None);
            }
            let line = lines.entry(name.to_owned()).or_default();
            if line.present > self.max_waiting {
                return Err(StoreError::Busy(name.to_owned()));
            }
            line.present += 1;
            Arc::clone(&line.turn)
        };
        // Made before the wait, so a caller dropped while waiting leaves the line too.
        let place = Place {
            queue: self,
            name: name.to_owned(),
        };
        let turn = turn.lock_owned().await;
        Ok(Some(Turn {
            _turn: turn,
            _place: place,
        }))
    }

    /// How many users have a line now.
    pub fn users(&self) -> usize {
        self.lines().len()
    }

    fn lines(&self) -> MutexGuard<'_, HashMap<String, Line>> {
        self.lines.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let mut lines = self.queue.lines();
        if let Some(line) = lines.get_mut(&self.name) {
            line.present = line.present.saturating_sub(1);
            if line.present == 0 {
                lines.remove(&self.name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Lets the spawned tasks run until each waits.
    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn one_users_changes_take_their_turns_in_arrival_order() {
        let queue = Arc::new(UserQueue::default());
        let order = Arc::new(Mutex::new(Vec::new()));
        let first = queue.enter("alice").await.unwrap().unwrap();
        let mut tasks = Vec::new();
        for i in 0..10 {
            let (queue, order) = (Arc::clone(&queue), Arc::clone(&order));
            tasks.push(tokio::spawn(async move {
                let _turn = queue.enter("alice").await.unwrap().unwrap();
                order.lock().unwrap().push(i);
                tokio::task::yield_now().await;
            }));
            // Each waiter is in line before the next arrives.
            settle().await;
        }
        assert!(
            order.lock().unwrap().is_empty(),
            "nobody passes the change in progress"
        );
        drop(first);
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), (0..10).collect::<Vec<_>>());
        assert_eq!(queue.users(), 0, "the line is gone once empty");
    }

    #[tokio::test]
    async fn another_users_change_does_not_wait_behind_a_busy_user() {
        let queue = UserQueue::default();
        let _alice = queue.enter("alice").await.unwrap().unwrap();
        let bob = tokio::time::timeout(Duration::from_secs(5), queue.enter("bob")).await;
        assert!(matches!(bob, Ok(Ok(Some(_)))), "bob has his own line");
        assert_eq!(queue.users(), 2);
    }

    #[tokio::test]
    async fn a_full_line_refuses_at_once_and_frees_a_place_when_a_change_leaves() {
        let queue = Arc::new(UserQueue::new(1));
        let first = queue.enter("alice").await.unwrap().unwrap();
        let waiting = {
            let queue = Arc::clone(&queue);
            tokio::spawn(async move { queue.enter("alice").await.map(|t| t.is_some()) })
        };
        settle().await;
        let refused = queue.enter("alice").await;
        assert!(
            matches!(refused, Err(StoreError::Busy(ref u)) if u == "alice"),
            "{refused:?}"
        );
        drop(first);
        assert!(waiting.await.unwrap().unwrap(), "the waiting change had its turn");
        assert!(queue.enter("alice").await.unwrap().is_some(), "room again");
        assert_eq!(queue.users(), 0);
    }

    #[tokio::test]
    async fn a_caller_that_stops_waiting_leaves_the_line() {
        let queue = Arc::new(UserQueue::default());
        let first = queue.enter("alice").await.unwrap().unwrap();
        let waiter = {
            let queue = Arc::clone(&queue);
            tokio::spawn(async move { queue.enter("alice").await.map(|t| t.is_some()) })
        };
        settle().await;
        waiter.abort();
        assert!(waiter.await.is_err(), "aborted while waiting");
        drop(first);
        assert_eq!(queue.users(), 0, "the aborted waiter left the line");
    }

    #[tokio::test]
    async fn past_the_bound_on_users_a_change_goes_unqueued() {
        let queue = UserQueue::default();
        let mut turns = Vec::new();
        for i in 0..MAX_QUEUED_USERS {
            turns.push(queue.enter(&format!("u{i}")).await.unwrap().unwrap());
        }
        assert!(queue.enter("one-more").await.unwrap().is_none());
        let waited = tokio::time::timeout(Duration::from_millis(20), queue.enter("u1")).await;
        assert!(waited.is_err(), "a user with a line still waits in it");
        assert_eq!(queue.users(), MAX_QUEUED_USERS);
        turns.clear();
        assert_eq!(queue.users(), 0);
    }
}
