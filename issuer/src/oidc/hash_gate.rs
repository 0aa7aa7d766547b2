//! [`HashGate`]: the one gate every argon2id computation of the process goes through — the
//! sign-in form's checks, the known devices' lane, and the `UserService`'s password checks and
//! new hashes. It bounds the computations running at once (its permits, 64 MiB each), the checks
//! waiting for one (a bounded queue, refused at once past it) and the places one user name holds
//! (waiting or running), and each check's place is owned by its computation: it is given back
//! when the argon2id work really ends, not when the request that asked for it goes away.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ichor_renderers::auth::UserName;
use sha2::{Digest, Sha256};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::lock;
use super::priority::{LanePriority, Turn};

/// How many password checks may wait for a hash permit, by default. With two permits and
/// ~0.2 s per argon2id verification, a waiting check starts within about two seconds.
pub const DEFAULT_MAX_WAITING: usize = 16;

/// How many places of a gate (waiting or running) one user name may hold at once, by default:
/// as many as the per-user back-off lets one name have in flight
/// ([`super::limits::BACKOFF_THRESHOLD`]), so the sign-in form is held by the back-off first,
/// while the paths the back-off does not hold (a request cancelled while its computation runs,
/// the `UserService`'s new hashes) cannot take more. One account never holds more than five of
/// the shared gate's eighteen places; the rest are there for everyone else.
pub const DEFAULT_PER_USER: usize = 5;

/// The longest user name field that is a name (longer ones share one place key).
const MAX_NAME_FIELD: usize = 253;

/// The argon2id computations of one process: at most its permits at once (64 MiB each), at most
/// `max_waiting` checks queued behind them, and at most `per_user` of both for one user name.
/// Cheap to clone: the clones are the same gate.
///
/// Without the queue bound a flood of sign-ins queues without limit: memory and CPU hold (the
/// permits see to that) but every real sign-in waits behind the whole flood, for tens of seconds.
/// Past the bound a check is refused at once ([`GateError::Busy`]), answered 503 with
/// `Retry-After` (`unavailable` on the gRPC API), and counted as no attempt at all, so an
/// accepted sign-in never waits longer than the queue takes to drain and a refused one learns at
/// once when to try again.
#[derive(Debug, Clone)]
pub struct HashGate {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    permits: Arc<Semaphore>,
    size: usize,
    waiting: AtomicUsize,
    max_waiting: usize,
    per_user: usize,
    /// The places taken per user name; an entry exists only while its name holds a place, so
    /// the table never holds more names than the gate has places.
    users: Mutex<HashMap<String, usize>>,
    yields_to: Option<Arc<LanePriority>>,
}

/// Why a check could not enter the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// The queue is full, or the user name holds its share of the gate already: try again
    /// after the given number of seconds.
    #[error("the password checks are busy; try again in {retry_after} s")]
    Busy {
        /// Seconds to wait before trying again.
        retry_after: u64,
    },
    /// The semaphore was closed (the process is shutting down).
    #[error("the password hasher is shut down")]
    Closed,
}

/// A queue place, given back when the check gets its permit or gives up.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A user name's place in a gate, given back when dropped.
#[derive(Debug)]
struct UserPlace {
    gate: Arc<Inner>,
    key: String,
}

impl Drop for UserPlace {
    fn drop(&mut self) {
        let mut users = lock(&self.gate.users);
        if let Some(n) = users.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                users.remove(&self.key);
            }
        }
    }
}

/// A check let through a gate: one argon2id permit and its user name's place. Move it into the
/// computation (the blocking task) and drop it when the computation ends: both are given back
/// then, whatever happened to the request meanwhile.
#[derive(Debug)]
pub struct Admitted {
    _permit: OwnedSemaphorePermit,
    _place: UserPlace,
}

/// The key of `user` in the places table: the name when it is one, else one key for every
/// field that is not a name (a flood of long garbage fields shares one share of the gate).
fn place_key(user: &str) -> String {
    (user.len() <= MAX_NAME_FIELD)
        .then(|| UserName::parse(user).ok())
        .flatten()
        .map_or_else(|| "\u{0}invalid".to_owned(), |n| n.as_str().to_owned())
}

/// An authenticated API caller asking the gate for a computation, as the API authenticated it:
/// an Ichor user by its name, or a person signed in at the external provider by its Kubernetes
/// user name. Which one decides the caller's place key ([`caller_key`]), never the name's
/// shape: an external prefix need not contain a colon (`corp-`), so an external name can also
/// be a valid Ichor user name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiCaller<'a> {
    /// An Ichor user: the same share as that user's sign-ins.
    User(&'a str),
    /// An external caller: a share of its own.
    External(&'a str),
}

/// The key of an authenticated API caller in the places table: an Ichor user's name (the same
/// share as that user's sign-ins), else a digest of the caller's full name, so each external
/// caller has a share of its own, apart from every other, from every Ichor user (whatever its
/// name looks like) and from the sign-in fields that are not names. No sign-in field maps to
/// such a key ([`place_key`] gives a name or `"\0invalid"`), and the fixed size keeps each
/// entry small; entries exist only while they hold places, so the table stays bounded by the
/// gate's places.
fn caller_key(caller: ApiCaller<'_>) -> String {
    let (kind, name) = match caller {
        ApiCaller::User(name) => match UserName::parse(name) {
            Ok(name) => return name.as_str().to_owned(),
            Err(_) => ("user", name),
        },
        ApiCaller::External(name) => ("external", name),
    };
    let digest = Sha256::digest(name.as_bytes());
    format!("\u{0}{kind}:{}", hex::encode(digest))
}

impl HashGate {
    /// A gate of `permits` concurrent computations, at most `max_waiting` waiting checks and
    /// [`DEFAULT_PER_USER`] places per user name.
    pub fn new(permits: usize, max_waiting: usize) -> Self {
        Self::build(permits, max_waiting, DEFAULT_PER_USER, None)
    }

    fn build(
        permits: usize,
        max_waiting: usize,
        per_user: usize,
        yields_to: Option<Arc<LanePriority>>,
    ) -> Self {
        HashGate {
            inner: Arc::new(Inner {
                permits: Arc::new(Semaphore::new(permits)),
                size: permits.max(1),
                waiting: AtomicUsize::new(0),
                max_waiting,
                per_user: per_user.max(1),
                users: Mutex::new(HashMap::new()),
                yields_to,
            }),
        }
    }

    /// A new gate like this one, starting no computation while `priority`'s lane has a check
    /// pending (for at most its hold at a time): the shared queue, beside the known devices'
    /// lane. Call it before the gate is shared (it makes a new one).
    #[must_use]
    pub fn yielding_to(self, priority: Arc<LanePriority>) -> Self {
        let i = &self.inner;
        Self::build(i.size, i.max_waiting, i.per_user, Some(priority))
    }

    /// A new gate like this one with at most `per_user` places per user name. Call it before the
    /// gate is shared (it makes a new one).
    #[must_use]
    pub fn with_per_user(self, per_user: usize) -> Self {
        let i = &self.inner;
        Self::build(i.size, i.max_waiting, per_user, i.yields_to.clone())
    }

    /// Roughly how long a full queue takes to drain, in whole seconds (at least 1): each
    /// permit works through its share at ~0.2 s per check.
    fn drain_seconds(&self) -> u64 {
        let per_permit = self.inner.max_waiting.div_ceil(self.inner.size);
        u64::try_from(per_permit.div_ceil(5)).unwrap_or(30).clamp(1, 30)
    }

    /// The permits (tests hold them to fill the gate; nothing else takes them directly).
    pub fn semaphore(&self) -> &Arc<Semaphore> {
        &self.inner.permits
    }

    /// How many checks are waiting for a permit now.
    pub fn waiting(&self) -> usize {
        self.inner.waiting.load(Ordering::Acquire)
    }

    /// How many places (waiting or running) `user` holds now.
    pub fn places_of(&self, user: &str) -> usize {
        lock(&self.inner.users)
            .get(&place_key(user))
            .copied()
            .unwrap_or(0)
    }

    /// When no permit is free and the queue is full: the `Retry-After` seconds a check entering
    /// now would be refused with. A sign-in asks before it reads the store, so a flood shed here
    /// costs the user store nothing (on the Kubernetes store, a read of the credentials Secret per
    /// attempt); [`HashGate::enter`] still enforces the bound.
    pub fn busy(&self) -> Option<u64> {
        (!self.starts_now() && self.waiting() >= self.inner.max_waiting).then(|| self.drain_seconds())
    }

    /// Whether a check entering now would start at once: a permit is free and no lane it
    /// yields to has a check pending.
    fn starts_now(&self) -> bool {
        self.inner.permits.available_permits() > 0
            && self
                .inner
                .yields_to
                .as_ref()
                .is_none_or(|p| p.lane_pending() == 0)
    }

    /// How many places (waiting or running) the authenticated API caller `caller` holds now.
    pub fn places_of_caller(&self, caller: ApiCaller<'_>) -> usize {
        lock(&self.inner.users)
            .get(&caller_key(caller))
            .copied()
            .unwrap_or(0)
    }

    /// A place for `user`, or [`GateError::Busy`] when the name holds its share already.
    fn user_place(&self, user: &str) -> Result<UserPlace, GateError> {
        self.place(place_key(user))
    }

    /// A place under `key`, or [`GateError::Busy`] when the key holds its share already.
    fn place(&self, key: String) -> Result<UserPlace, GateError> {
        let mut users = lock(&self.inner.users);
        let held = users.entry(key.clone()).or_insert(0);
        if *held >= self.inner.per_user {
            return Err(GateError::Busy { retry_after: 1 });
        }
        *held += 1;
        Ok(UserPlace {
            gate: Arc::clone(&self.inner),
            key,
        })
    }

    /// A permit for a check of `user`: at once when one is free, after waiting in the queue when
    /// it has room, or [`GateError::Busy`] when it has none or `user` holds its share of the gate
    /// already. A gate [`yielding_to`](Self::yielding_to) a lane then asks for the lane's turn,
    /// and while it is held gives the permit back and waits in the queue without one: the lane
    /// can borrow every shared permit ([`enter_or_borrow`](Self::enter_or_borrow)) and use every
    /// core.
    pub async fn enter(&self, user: &str) -> Result<Admitted, GateError> {
        self.enter_with(self.user_place(user)?).await
    }

    /// As [`enter`](Self::enter), for a computation an authenticated API caller asked for (a new
    /// hash): its place is the caller's own ([`caller_key`]) — an external caller's is neither
    /// another external caller's, nor an Ichor user's of the same name, nor that of the sign-in
    /// fields that are not names.
    pub async fn enter_caller(&self, caller: ApiCaller<'_>) -> Result<Admitted, GateError> {
        self.enter_with(self.place(caller_key(caller))?).await
    }

    /// A permit for a check whose place is `place` (see [`enter`](Self::enter)).
    async fn enter_with(&self, place: UserPlace) -> Result<Admitted, GateError> {
        let mut waiting = None;
        loop {
            let permit = match Arc::clone(&self.inner.permits).try_acquire_owned() {
                Ok(permit) => permit,
                Err(_) => {
                    if waiting.is_none() {
                        waiting = Some(self.queue_place()?);
                    }
                    Arc::clone(&self.inner.permits)
                        .acquire_owned()
                        .await
                        .map_err(|_| GateError::Closed)?
                }
            };
            let Some(priority) = &self.inner.yields_to else {
                return Ok(Admitted {
                    _permit: permit,
                    _place: place,
                });
            };
            match priority.take_turn(Instant::now()) {
                Turn::Start => {
                    return Ok(Admitted {
                        _permit: permit,
                        _place: place,
                    });
                }
                Turn::Hold { until } => {
                    drop(permit);
                    if waiting.is_none() {
                        waiting = Some(self.queue_place()?);
                    }
                    priority.hold(until).await;
                }
            }
        }
    }

    /// For a check of `user` in this gate (the known devices' lane): a free permit of `shared`
    /// at once when it has one, else a permit of this gate or of `shared`, whichever frees
    /// first: a known device never waits behind another while a shared permit is free, nor
    /// behind the shared queue. The user's place is taken in this gate.
    pub async fn enter_or_borrow(&self, shared: &HashGate, user: &str) -> Result<Admitted, GateError> {
        let place = self.user_place(user)?;
        let admitted = |permit| Admitted {
            _permit: permit,
            _place: place,
        };
        if let Ok(permit) = Arc::clone(&shared.inner.permits).try_acquire_owned() {
            return Ok(admitted(permit));
        }
        if let Ok(permit) = Arc::clone(&self.inner.permits).try_acquire_owned() {
            return Ok(admitted(permit));
        }
        let _waiting = self.queue_place()?;
        let permit = tokio::select! {
            own = Arc::clone(&self.inner.permits).acquire_owned() => own,
            borrowed = Arc::clone(&shared.inner.permits).acquire_owned() => borrowed,
        }
        .map_err(|_| GateError::Closed)?;
        Ok(admitted(permit))
    }

    /// A place in the queue, or [`GateError::Busy`] when it is full.
    fn queue_place(&self) -> Result<Waiting<'_>, GateError> {
        let queued = self.inner.waiting.fetch_add(1, Ordering::AcqRel);
        let place = Waiting(&self.inner.waiting);
        if queued >= self.inner.max_waiting {
            drop(place);
            return Err(GateError::Busy {
                retry_after: self.drain_seconds(),
            });
        }
        Ok(place)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_external_caller_has_a_place_key_of_its_own_apart_from_garbage_fields() {
        use ApiCaller::{External, User};
        assert_eq!(
            caller_key(User("alice")),
            place_key("alice"),
            "a user's own share"
        );
        let (a, b) = (
            caller_key(External("oidc:a@example.com")),
            caller_key(External("oidc:b@example.com")),
        );
        assert_ne!(a, b);
        assert_ne!(a, place_key("oidc:a@example.com"));
        assert_ne!(place_key(&a), a, "no sign-in field maps to a caller's key");
        assert!(
            caller_key(External(&"x".repeat(100_000))).len() < 80,
            "a bounded key"
        );
        assert!(caller_key(User(&"x".repeat(100_000))).len() < 80, "a bounded key");
    }

    #[test]
    fn an_external_caller_named_like_a_user_does_not_share_that_users_places() {
        let external = caller_key(ApiCaller::External("corp-bob"));
        assert_ne!(
            external,
            place_key("corp-bob"),
            "not the sign-ins' share of corp-bob"
        );
        assert_ne!(
            external,
            caller_key(ApiCaller::User("corp-bob")),
            "not the user's API share"
        );
    }

    #[tokio::test]
    async fn the_gate_queues_up_to_its_bound_then_refuses_at_once_and_frees_places_of_cancelled_waiters() {
        let gate = HashGate::new(1, 2);
        let held = gate.enter("holder").await.expect("a free permit");
        let waiter = |g: &HashGate, user: &'static str| {
            let g = g.clone();
            tokio::spawn(async move { g.enter(user).await.map(drop) })
        };
        assert_eq!(gate.busy(), None, "the queue has room");
        let (first, second) = (waiter(&gate, "first"), waiter(&gate, "second"));
        while gate.waiting() < 2 {
            tokio::task::yield_now().await;
        }
        assert_eq!(gate.busy(), Some(1), "a check entering now would be refused");
        assert_eq!(
            gate.enter("third").await.map(drop),
            Err(GateError::Busy { retry_after: 1 })
        );
        // A waiter that gives up frees its place.
        second.abort();
        assert!(second.await.is_err());
        assert_eq!(gate.waiting(), 1);
        assert_eq!(gate.places_of("second"), 0);
        let third = waiter(&gate, "third");
        while gate.waiting() < 2 {
            tokio::task::yield_now().await;
        }
        drop(held);
        assert_eq!(first.await.expect("join"), Ok(()));
        assert_eq!(third.await.expect("join"), Ok(()));
        assert_eq!(gate.waiting(), 0);
    }

    #[tokio::test]
    async fn one_user_name_holds_at_most_its_share_of_the_gate_and_is_refused_at_once_past_it() {
        let gate = HashGate::new(1, 16).with_per_user(2);
        let running = gate.enter("alice").await.expect("a free permit");
        let queued = tokio::spawn({
            let g = gate.clone();
            async move { g.enter("alice").await.map(drop) }
        });
        while gate.waiting() < 1 {
            tokio::task::yield_now().await;
        }
        assert_eq!(gate.places_of("alice"), 2);
        // Her third check is refused at once, with room in the queue; carol's waits.
        assert_eq!(
            gate.enter("alice").await.map(drop),
            Err(GateError::Busy { retry_after: 1 })
        );
        let carol = tokio::spawn({
            let g = gate.clone();
            async move { g.enter("carol").await.map(drop) }
        });
        while gate.waiting() < 2 {
            tokio::task::yield_now().await;
        }
        // Fields that are no name share one share, whatever they hold.
        let garbage: Vec<_> = ["not a name!", "nor this one?"]
            .into_iter()
            .map(|field| {
                let g = gate.clone();
                tokio::spawn(async move { g.enter(field).await.map(drop) })
            })
            .collect();
        while gate.waiting() < 4 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            gate.enter(&"x".repeat(300)).await.map(drop),
            Err(GateError::Busy { retry_after: 1 })
        );
        // A place is the computation's: it is given back only when what holds it is dropped.
        drop(running);
        assert_eq!(queued.await.expect("join"), Ok(()));
        assert_eq!(carol.await.expect("join"), Ok(()));
        for task in garbage {
            assert_eq!(task.await.expect("join"), Ok(()));
        }
        assert_eq!(gate.places_of("alice"), 0);
        assert_eq!(gate.places_of("carol"), 0);
        assert_eq!(gate.places_of("not a name!"), 0);
        let _again = gate.enter("alice").await.expect("her share is free again");
    }

    #[tokio::test]
    async fn a_lane_check_borrows_a_free_shared_permit_and_else_waits_for_whichever_frees_first() {
        let (lane, shared) = (HashGate::new(1, 1), HashGate::new(2, 16));
        let own = lane.enter("a").await.expect("the lane's permit");
        let borrowed = lane.enter_or_borrow(&shared, "b").await.expect("a shared permit");
        assert_eq!(shared.semaphore().available_permits(), 1);
        let _other = shared.enter("c").await.expect("the last shared permit");
        // Nothing free: the check waits in the lane's queue, not in the shared one.
        let spawn_waiter = |user: &'static str| {
            let (gate, shared) = (lane.clone(), shared.clone());
            tokio::spawn(async move { gate.enter_or_borrow(&shared, user).await })
        };
        let first = spawn_waiter("d");
        while lane.waiting() < 1 {
            tokio::task::yield_now().await;
        }
        assert_eq!(shared.waiting(), 0);
        // A shared permit frees first: it serves the lane while the lane's own is still held.
        drop(borrowed);
        let first = first.await.expect("join").expect("the freed shared permit");
        assert_eq!(shared.semaphore().available_permits(), 0);
        // The lane's own frees first: that one serves.
        let second = spawn_waiter("e");
        while lane.waiting() < 1 {
            tokio::task::yield_now().await;
        }
        drop(own);
        let _second = second.await.expect("join").expect("the lane's own permit");
        assert_eq!(lane.semaphore().available_permits(), 0);
        drop(first);
        assert_eq!(shared.semaphore().available_permits(), 1);
    }

    #[tokio::test]
    async fn a_shared_check_held_for_the_lane_holds_no_permit_so_the_lane_borrows_it() {
        let priority = Arc::new(LanePriority::new(std::time::Duration::from_secs(3600)));
        let shared = HashGate::new(1, 1).yielding_to(Arc::clone(&priority));
        let lane = HashGate::new(1, 1);
        priority.lane_enter();
        let held = tokio::spawn({
            let shared = shared.clone();
            async move { shared.enter("a").await.map(drop) }
        });
        while shared.waiting() < 1 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            shared.semaphore().available_permits(),
            1,
            "the held check took no permit"
        );
        assert_eq!(
            shared.busy(),
            Some(1),
            "the queue is full and a check entering now would be held too"
        );
        let own = lane.enter("b").await.expect("the lane's permit");
        let borrowed = lane
            .enter_or_borrow(&shared, "c")
            .await
            .expect("the free shared permit");
        assert_eq!(shared.semaphore().available_permits(), 0);
        priority.lane_leave();
        assert!(
            !held.is_finished(),
            "the held check waits for the borrowed permit"
        );
        drop((own, borrowed));
        let joined = tokio::time::timeout(std::time::Duration::from_secs(10), held)
            .await
            .expect("the held check starts once the lane is empty and the permit is back");
        assert_eq!(joined.expect("join"), Ok(()));
        assert_eq!(shared.waiting(), 0);
        assert_eq!(shared.busy(), None);
    }

    #[test]
    fn the_retry_hint_is_the_time_a_full_queue_takes_to_drain() {
        assert_eq!(HashGate::new(2, 16).drain_seconds(), 2);
        assert_eq!(HashGate::new(2, 0).drain_seconds(), 1);
        assert_eq!(HashGate::new(1, 1000).drain_seconds(), 30);
    }
}
