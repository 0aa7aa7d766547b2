//! Password verification under the process-wide limit of [`super::HASH_PERMITS`] concurrent
//! argon2id computations, on the pools of [`super::hash_pools`] (a known device's at the
//! process's priority, every other at a lower one), with a bounded queue in front of it; and the
//! edge where a new hash gets its salt and a generated password its random bytes, both read from
//! the operating system's random source (the pure rules in `ichor_renderers::auth` take them as
//! input). The API and `ichor` use the same two functions.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use ichor_renderers::auth::{
    Password,
    hash::{HashError, SALT_LEN, Verification, hash_password, verify_dummy, verify_password_or_dummy},
    policy::{GENERATOR_RANDOM_BYTES, GenerateError, generate_password_from},
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::hash_pools::{self, Pool};
use super::priority::{LanePriority, Turn};

/// How many password checks may wait for a hash permit, by default. With two permits and
/// ~0.2 s per argon2id verification, a waiting check starts within about two seconds.
pub const DEFAULT_MAX_WAITING: usize = 16;

/// The argon2id computations of one process: at most its permits at once (64 MiB each), and at
/// most `max_waiting` checks queued behind them.
///
/// Without the queue bound a flood of sign-ins queues without limit: memory and CPU hold (the
/// permits see to that) but every real sign-in waits behind the whole flood, for tens of seconds.
/// Past the bound a check is refused at once ([`GateError::Busy`]), answered 503 with
/// `Retry-After`, and counted as no attempt at all, so an accepted sign-in never waits longer
/// than the queue takes to drain and a refused one learns at once when to try again.
#[derive(Debug)]
pub struct HashGate {
    permits: Arc<Semaphore>,
    size: usize,
    waiting: AtomicUsize,
    max_waiting: usize,
    yields_to: Option<Arc<LanePriority>>,
}

/// Why a check could not enter the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// The queue is full: try again after the given number of seconds.
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

impl HashGate {
    /// A gate of `permits` concurrent computations and at most `max_waiting` waiting checks.
    pub fn new(permits: usize, max_waiting: usize) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(permits)),
            size: permits.max(1),
            waiting: AtomicUsize::new(0),
            max_waiting,
            yields_to: None,
        }
    }

    /// The same gate, starting no computation while `priority`'s lane has a check pending (for
    /// at most its hold at a time): the shared queue, beside the known devices' lane.
    #[must_use]
    pub fn yielding_to(mut self, priority: Arc<LanePriority>) -> Self {
        self.yields_to = Some(priority);
        self
    }

    /// Roughly how long a full queue takes to drain, in whole seconds (at least 1): each
    /// permit works through its share at ~0.2 s per check.
    fn drain_seconds(&self) -> u64 {
        let per_permit = self.max_waiting.div_ceil(self.size);
        u64::try_from(per_permit.div_ceil(5)).unwrap_or(30).clamp(1, 30)
    }

    /// The permits, to share them with other argon2id work of the process (the UserService's
    /// password changes), so the process never runs more than this many at once.
    pub fn semaphore(&self) -> &Arc<Semaphore> {
        &self.permits
    }

    /// How many checks are waiting for a permit now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// When no permit is free and the queue is full: the `Retry-After` seconds a check entering
    /// now would be refused with. A sign-in asks before it reads the store, so a flood shed here
    /// costs the user store nothing (on the Kubernetes store, a read of the credentials Secret per
    /// attempt); [`HashGate::enter`] still enforces the bound.
    pub fn busy(&self) -> Option<u64> {
        (!self.starts_now() && self.waiting() >= self.max_waiting).then(|| self.drain_seconds())
    }

    /// Whether a check entering now would start at once: a permit is free and no lane it
    /// yields to has a check pending.
    fn starts_now(&self) -> bool {
        self.permits.available_permits() > 0 && self.yields_to.as_ref().is_none_or(|p| p.lane_pending() == 0)
    }

    /// A permit, at once when one is free, after waiting in the queue when it has room, or
    /// [`GateError::Busy`] when it has none. A gate [`yielding_to`](Self::yielding_to) a lane
    /// then asks for the lane's turn, and while it is held gives the permit back and waits in
    /// the queue without one: the lane can borrow every shared permit
    /// ([`enter_or_borrow`](Self::enter_or_borrow)) and use every core.
    pub async fn enter(&self) -> Result<OwnedSemaphorePermit, GateError> {
        let mut place = None;
        loop {
            let permit = match Arc::clone(&self.permits).try_acquire_owned() {
                Ok(permit) => permit,
                Err(_) => {
                    if place.is_none() {
                        place = Some(self.queue_place()?);
                    }
                    Arc::clone(&self.permits)
                        .acquire_owned()
                        .await
                        .map_err(|_| GateError::Closed)?
                }
            };
            let Some(priority) = &self.yields_to else {
                return Ok(permit);
            };
            match priority.take_turn(Instant::now()) {
                Turn::Start => return Ok(permit),
                Turn::Hold { until } => {
                    drop(permit);
                    if place.is_none() {
                        place = Some(self.queue_place()?);
                    }
                    priority.hold(until).await;
                }
            }
        }
    }

    /// A free permit of `shared` at once when it has one, else a permit of this gate (the known
    /// devices' lane) or of `shared`, whichever frees first: a known device never waits behind
    /// another while a shared permit is free, nor behind the shared queue.
    pub async fn enter_or_borrow(&self, shared: &HashGate) -> Result<OwnedSemaphorePermit, GateError> {
        if let Ok(permit) = Arc::clone(&shared.permits).try_acquire_owned() {
            return Ok(permit);
        }
        if let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() {
            return Ok(permit);
        }
        let _place = self.queue_place()?;
        tokio::select! {
            own = Arc::clone(&self.permits).acquire_owned() => own,
            borrowed = Arc::clone(&shared.permits).acquire_owned() => borrowed,
        }
        .map_err(|_| GateError::Closed)
    }

    /// A place in the queue, or [`GateError::Busy`] when it is full.
    fn queue_place(&self) -> Result<Waiting<'_>, GateError> {
        let queued = self.waiting.fetch_add(1, Ordering::AcqRel);
        let place = Waiting(&self.waiting);
        if queued >= self.max_waiting {
            drop(place);
            return Err(GateError::Busy {
                retry_after: self.drain_seconds(),
            });
        }
        Ok(place)
    }
}

/// Hashing a new password failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NewHashError {
    /// The operating system's random source failed while making a salt.
    #[error("could not read {SALT_LEN} random bytes for a salt from the operating system: {0}")]
    Random(String),
    /// The password could not be hashed.
    #[error(transparent)]
    Hash(#[from] HashError),
}

/// The operating system's random source failed while generating a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("could not read random bytes from the operating system to generate a password: {0}")]
pub struct GeneratePasswordError(String);

/// Hashes a password with the current parameters and a fresh salt from the operating system's
/// random source (a new credentials entry, a set password, a rehash after sign-in).
///
/// # Errors
/// [`NewHashError::Random`] when no salt could be read, [`NewHashError::Hash`] when
/// [`hash_password`] refuses the password or argon2id fails.
pub fn hash_password_random(password: &Password) -> Result<String, NewHashError> {
    let mut salt = [0u8; SALT_LEN];
    getrandom::fill(&mut salt).map_err(|e| NewHashError::Random(e.to_string()))?;
    Ok(hash_password(password, &salt)?)
}

/// Generates a password from the operating system's random source with
/// [`generate_password_from`], drawing more bytes in the rare case the first ones are not enough.
/// It always satisfies the policy.
///
/// # Errors
/// The operating system's random source failed.
pub fn generate_password() -> Result<Password, GeneratePasswordError> {
    let mut random = Vec::with_capacity(GENERATOR_RANDOM_BYTES);
    let generated = loop {
        let drawn = random.len();
        random.resize(drawn + GENERATOR_RANDOM_BYTES, 0);
        let fresh = random.get_mut(drawn..).unwrap_or_default();
        if let Err(e) = getrandom::fill(fresh) {
            break Err(GeneratePasswordError(e.to_string()));
        }
        match generate_password_from(&random) {
            Ok(password) => break Ok(password),
            Err(GenerateError::NotEnoughRandomness { .. }) => continue,
        }
    };
    random.iter_mut().for_each(|b| *b = 0);
    std::hint::black_box(&random);
    generated
}

/// What a password check found.
#[derive(Debug)]
pub(crate) enum Checked {
    /// The password is right; `rehash` holds a new PHC string when the stored one used outdated
    /// parameters (and hashing it again succeeded).
    Valid { rehash: Option<String> },
    /// Wrong password, unknown user, or an unusable stored hash (logged; answered like a wrong
    /// password, at the same cost).
    Invalid,
}

/// Why no answer could be computed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CheckError {
    /// Too many checks are waiting already.
    #[error("too many password checks are waiting; try again in {retry_after} s")]
    Busy {
        /// Seconds to wait before trying again.
        retry_after: u64,
    },
    /// The semaphore was closed or the blocking task failed.
    #[error("the password check could not run: {0}")]
    Internal(String),
}

/// Verifies `password` against `phc` (`None`: unknown user or no password set, verified against
/// the dummy hash) once through `gate` ([`CheckError::Busy`] when its queue is full), or on a
/// free permit of `borrow` ([`HashGate::enter_or_borrow`]), holding one hash permit for the whole
/// computation, including a rehash. The permit moves into the blocking task, so it is held until
/// the computation really ends even if the request is dropped. A check that entered through a
/// lane (`borrow` given) computes on [`Pool::Lane`], every other on [`Pool::Shared`].
pub(crate) async fn check(
    gate: &HashGate,
    borrow: Option<&HashGate>,
    user: &str,
    password: Password,
    phc: Option<String>,
) -> Result<Checked, CheckError> {
    let permit = match borrow {
        Some(shared) => gate.enter_or_borrow(shared).await,
        None => gate.enter().await,
    };
    let permit = permit.map_err(|e| match e {
        GateError::Busy { retry_after } => CheckError::Busy { retry_after },
        GateError::Closed => CheckError::Internal(e.to_string()),
    })?;
    let user = user.to_owned();
    let pool = if borrow.is_some() {
        Pool::Lane
    } else {
        Pool::Shared
    };
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        hash_pools::run(pool, || match verify_password_or_dummy(&password, phc.as_deref()) {
            Ok(Verification::Valid { needs_rehash }) => {
                let rehash = if needs_rehash {
                    match hash_password_random(&password) {
                        Ok(h) => Some(h),
                        Err(e) => {
                            tracing::warn!(user = %user, error = %e, "rehash after sign-in failed; keeping the old hash");
                            None
                        }
                    }
                } else {
                    None
                };
                Checked::Valid { rehash }
            }
            Ok(Verification::Invalid) => Checked::Invalid,
            Err(e) => {
                tracing::warn!(user = %user, error = %e, "the stored password hash is unusable; refusing sign-in");
                // Spend the same work as any other refusal.
                let _ = verify_dummy(&password);
                Checked::Invalid
            }
        })
    })
    .await
    .map_err(|e| CheckError::Internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_gate_queues_up_to_its_bound_then_refuses_at_once_and_frees_places_of_cancelled_waiters() {
        let gate = Arc::new(HashGate::new(1, 2));
        let held = gate.enter().await.expect("a free permit");
        let waiter = |g: &Arc<HashGate>| {
            let g = Arc::clone(g);
            tokio::spawn(async move { g.enter().await.map(drop) })
        };
        assert_eq!(gate.busy(), None, "the queue has room");
        let (first, second) = (waiter(&gate), waiter(&gate));
        while gate.waiting() < 2 {
            tokio::task::yield_now().await;
        }
        assert_eq!(gate.busy(), Some(1), "a check entering now would be refused");
        assert_eq!(
            gate.enter().await.map(drop),
            Err(GateError::Busy { retry_after: 1 })
        );
        // A waiter that gives up frees its place.
        second.abort();
        assert!(second.await.is_err());
        assert_eq!(gate.waiting(), 1);
        let third = waiter(&gate);
        while gate.waiting() < 2 {
            tokio::task::yield_now().await;
        }
        drop(held);
        assert_eq!(first.await.expect("join"), Ok(()));
        assert_eq!(third.await.expect("join"), Ok(()));
        assert_eq!(gate.waiting(), 0);
    }

    #[tokio::test]
    async fn a_lane_check_borrows_a_free_shared_permit_and_else_waits_for_whichever_frees_first() {
        let (lane, shared) = (HashGate::new(1, 1), HashGate::new(2, 16));
        let own = lane.enter().await.expect("the lane's permit");
        let borrowed = lane.enter_or_borrow(&shared).await.expect("a shared permit");
        assert_eq!(shared.semaphore().available_permits(), 1);
        let _other = shared.enter().await.expect("the last shared permit");
        // Nothing free: the check waits in the lane's queue, not in the shared one.
        let (gate, shared) = (Arc::new(lane), Arc::new(shared));
        let spawn_waiter = || {
            let (gate, shared) = (Arc::clone(&gate), Arc::clone(&shared));
            tokio::spawn(async move { gate.enter_or_borrow(&shared).await })
        };
        let first = spawn_waiter();
        while gate.waiting() < 1 {
            tokio::task::yield_now().await;
        }
        assert_eq!(shared.waiting(), 0);
        // A shared permit frees first: it serves the lane while the lane's own is still held.
        drop(borrowed);
        let first = first.await.expect("join").expect("the freed shared permit");
        assert_eq!(shared.semaphore().available_permits(), 0);
        // The lane's own frees first: that one serves.
        let second = spawn_waiter();
        while gate.waiting() < 1 {
            tokio::task::yield_now().await;
        }
        drop(own);
        let _second = second.await.expect("join").expect("the lane's own permit");
        assert_eq!(gate.semaphore().available_permits(), 0);
        drop(first);
        assert_eq!(shared.semaphore().available_permits(), 1);
    }

    #[tokio::test]
    async fn a_shared_check_held_for_the_lane_holds_no_permit_so_the_lane_borrows_it() {
        let priority = Arc::new(LanePriority::new(std::time::Duration::from_secs(3600)));
        let shared = Arc::new(HashGate::new(1, 1).yielding_to(Arc::clone(&priority)));
        let lane = HashGate::new(1, 1);
        priority.lane_enter();
        let held = tokio::spawn({
            let shared = Arc::clone(&shared);
            async move { shared.enter().await.map(drop) }
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
        let own = lane.enter().await.expect("the lane's permit");
        let borrowed = lane
            .enter_or_borrow(&shared)
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
    fn a_new_hash_has_a_fresh_salt_and_verifies_its_password() {
        use ichor_renderers::auth::hash::verify_password;
        let password = Password::new("correct horse battery staple");
        let a = hash_password_random(&password).expect("hash");
        let b = hash_password_random(&password).expect("hash");
        assert!(a.starts_with("$argon2id$v=19$m=65536,t=3,p=4$"), "{a}");
        assert_ne!(a, b, "two salts were equal");
        assert_eq!(
            verify_password(&password, &a),
            Ok(Verification::Valid { needs_rehash: false })
        );
    }

    #[test]
    fn generates_24_characters_from_the_os_that_pass_the_policy() {
        use ichor_renderers::auth::policy::{GENERATED_PASSWORD_LEN, GENERATOR_ALPHABET, check_password};
        let a = generate_password().expect("a password");
        let b = generate_password().expect("a password");
        assert_eq!(a.expose().len(), GENERATED_PASSWORD_LEN);
        assert!(a.expose().bytes().all(|c| GENERATOR_ALPHABET.contains(&c)));
        assert_eq!(check_password(&a), Ok(()));
        assert_ne!(a.expose(), b.expose(), "two generated passwords were equal");
    }

    #[test]
    fn the_retry_hint_is_the_time_a_full_queue_takes_to_drain() {
        assert_eq!(HashGate::new(2, 16).drain_seconds(), 2);
        assert_eq!(HashGate::new(2, 0).drain_seconds(), 1);
        assert_eq!(HashGate::new(1, 1000).drain_seconds(), 30);
    }
}
