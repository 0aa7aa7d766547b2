//! The `IchorUser` objects of the controller's namespace as a watch holds them: a kube-runtime
//! reflector store ([`UserCache`], read by the last-enabled-admin rule) and the end that writes
//! it ([`UserCacheFeed`], fed by a watch of `IchorUser`s — in `ichor-controller run` the watch
//! the identity graph already has, so the webhooks add no second one).
//!
//! The cache is trusted only while it is fresh ([`freshness`]): not before its first complete
//! list, and not once its watch has been failing for longer than [`STALE_AFTER`]. A cache that is
//! fresh can still be behind by the watch's latency; the rule therefore reads the admin it relies
//! on again before allowing (see `users`).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ichor_renderers::crd::IchorUser;
use kube::api::DynamicObject;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::Event;

use super::AdmissionError;

/// How long the watch may fail before the cache is no longer trusted: past this, the
/// last-enabled-admin rule refuses instead of answering from an old view.
pub const STALE_AFTER: Duration = Duration::from_secs(30);

/// Whether the watch completed a list and since when it has been failing.
#[derive(Debug, Default)]
struct Health {
    synced: bool,
    failing_since: Option<Instant>,
}

/// Whether a cache may be answered from at `now`: `synced` once its watch completed a first
/// list, `failing_since` the first watch error not followed by a delivered event.
///
/// # Errors
/// [`AdmissionError::UsersNotSynced`] before the first list, [`AdmissionError::UsersWatchLost`]
/// when the watch has failed for longer than `stale_after`.
pub fn freshness(
    synced: bool,
    failing_since: Option<Instant>,
    now: Instant,
    stale_after: Duration,
) -> Result<(), AdmissionError> {
    if !synced {
        return Err(AdmissionError::UsersNotSynced);
    }
    match failing_since {
        Some(since) if now.saturating_duration_since(since) > stale_after => Err(
            AdmissionError::UsersWatchLost(now.saturating_duration_since(since)),
        ),
        _ => Ok(()),
    }
}

/// The read end: the cached `IchorUser`s of one namespace.
#[derive(Clone)]
pub struct UserCache {
    namespace: String,
    store: Store<IchorUser>,
    health: Arc<Mutex<Health>>,
}

impl std::fmt::Debug for UserCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserCache")
            .field("namespace", &self.namespace)
            .field("users", &self.store.len())
            .finish_non_exhaustive()
    }
}

/// The write end: applies the watch's events and errors to the cache.
pub struct UserCacheFeed {
    writer: reflector::store::Writer<IchorUser>,
    health: Arc<Mutex<Health>>,
}

impl std::fmt::Debug for UserCacheFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserCacheFeed").finish_non_exhaustive()
    }
}

fn locked(health: &Mutex<Health>) -> std::sync::MutexGuard<'_, Health> {
    health.lock().unwrap_or_else(PoisonError::into_inner)
}

impl UserCache {
    /// An empty, unsynced cache of the `IchorUser`s of `namespace`, and its feed.
    pub fn new(namespace: impl Into<String>) -> (Self, UserCacheFeed) {
        let writer = reflector::store::Writer::default();
        let health = Arc::new(Mutex::new(Health::default()));
        let cache = Self {
            namespace: namespace.into(),
            store: writer.as_reader(),
            health: health.clone(),
        };
        (cache, UserCacheFeed { writer, health })
    }

    /// The namespace whose users it holds.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Every cached user of `namespace`, if the cache is fresh at `now`.
    ///
    /// # Errors
    /// [`AdmissionError::UsersNotWatched`] for another namespace; see [`freshness`].
    pub fn users(&self, namespace: &str, now: Instant) -> Result<Vec<Arc<IchorUser>>, AdmissionError> {
        if namespace != self.namespace {
            return Err(AdmissionError::UsersNotWatched(namespace.to_owned()));
        }
        let (synced, failing_since) = {
            let health = locked(&self.health);
            (health.synced, health.failing_since)
        };
        freshness(synced, failing_since, now, STALE_AFTER)?;
        Ok(self.store.state())
    }
}

impl UserCacheFeed {
    /// Applies one watch event: the first complete list makes the cache synced, and a list or
    /// a change delivered after an error ends the failure.
    pub fn apply(&mut self, event: &Event<IchorUser>) {
        self.writer.apply_watcher_event(event);
        let mut health = locked(&self.health);
        match event {
            Event::InitDone => {
                health.synced = true;
                health.failing_since = None;
            }
            Event::Apply(_) | Event::Delete(_) => health.failing_since = None,
            Event::Init | Event::InitApply(_) => {}
        }
    }

    /// [`UserCacheFeed::apply`] for the event of a watch of dynamic objects (the controller's
    /// watchers). An object that does not decode as an `IchorUser` is removed from the cache:
    /// a user the rule cannot read never counts as an admin.
    pub fn apply_dynamic(&mut self, event: &Event<DynamicObject>) {
        let typed = |object: &DynamicObject| -> (IchorUser, bool) {
            match object.clone().try_parse::<IchorUser>() {
                Ok(mut user) => {
                    user.metadata.managed_fields = None;
                    (user, true)
                }
                Err(_) => {
                    let mut key = IchorUser::new(
                        object.metadata.name.as_deref().unwrap_or_default(),
                        Default::default(),
                    );
                    key.metadata.namespace = object.metadata.namespace.clone();
                    (key, false)
                }
            }
        };
        let event = match event {
            Event::Init => Event::Init,
            Event::InitDone => Event::InitDone,
            Event::InitApply(object) => match typed(object) {
                (user, true) => Event::InitApply(user),
                // Left out of the list being built.
                (_, false) => return,
            },
            Event::Apply(object) => match typed(object) {
                (user, true) => Event::Apply(user),
                (key, false) => Event::Delete(key),
            },
            Event::Delete(object) => Event::Delete(typed(object).0),
        };
        self.apply(&event);
    }

    /// Records a watch error at `now` (the start of a failure, if none is running).
    pub fn failed(&self, now: Instant) {
        locked(&self.health).failing_since.get_or_insert(now);
    }
}
