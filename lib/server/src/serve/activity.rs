//! What one connection is doing, for its watchdog: when it opened, whether it has had a request,
//! the start of each request in flight (until its response body is done), when each answer was
//! produced (until the connection took its body) and since when it has been idle. From these [`State::deadline`] says when the connection has overstayed, and why.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// The bounds a connection's activity is held to (from the serve options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bounds {
    /// From the connection being ready for HTTP to its first request.
    pub first_request: Duration,
    /// With no request in flight, after the first.
    pub idle: Duration,
    /// From a request's headers to the end of its response.
    pub request: Duration,
    /// From the handler's answer to the connection taking its body.
    pub answer: Duration,
}

/// Why a connection overstayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Overstay {
    /// No request arrived in time after the connection was ready.
    NoFirstRequest,
    /// No request in flight for the idle bound.
    Idle,
    /// A request has been in flight longer than the request bound.
    SlowRequest,
    /// An answer has waited longer than the answer bound for the connection to take it.
    UnreadAnswer,
}

/// The activity of one connection at one moment.
#[derive(Debug)]
pub(crate) struct State {
    opened: Instant,
    served_any: bool,
    idle_since: Instant,
    in_flight: BTreeSet<(Instant, u64)>,
    /// The answers produced and not yet taken: when, and the key of their request.
    answered: BTreeSet<(Instant, (Instant, u64))>,
    next_id: u64,
}

impl State {
    /// A connection ready for HTTP at `now`.
    pub fn new(now: Instant) -> Self {
        State {
            opened: now,
            served_any: false,
            idle_since: now,
            in_flight: BTreeSet::new(),
            answered: BTreeSet::new(),
            next_id: 0,
        }
    }

    /// Records a request starting at `now`; returns its key for [`State::finish`] and whether
    /// the connection was idle until then.
    pub fn start(&mut self, now: Instant) -> ((Instant, u64), bool) {
        let key = (now, self.next_id);
        self.next_id += 1;
        self.served_any = true;
        let was_idle = self.in_flight.is_empty();
        self.in_flight.insert(key);
        (key, was_idle)
    }

    /// Records that the request `key` was answered at `answered_at` (its body not yet taken).
    pub fn answer(&mut self, key: (Instant, u64), answered_at: Instant) {
        if self.in_flight.contains(&key) {
            self.answered.insert((answered_at, key));
        }
    }

    /// Records the end of the request `key` at `now`; true when the connection became idle.
    pub fn finish(&mut self, key: (Instant, u64), now: Instant) -> bool {
        self.in_flight.remove(&key);
        // A handful of entries: at most the connection's concurrent streams.
        self.answered.retain(|&(_, k)| k != key);
        if self.in_flight.is_empty() {
            self.idle_since = now;
            return true;
        }
        false
    }

    /// When the connection overstays if nothing changes, and why: the oldest request in flight
    /// plus the request bound, or the oldest answer not taken plus the answer bound, whichever
    /// comes first; else the idle bound since the last request ended, or the first-request bound
    /// since the connection opened.
    pub fn deadline(&self, bounds: &Bounds) -> (Instant, Overstay) {
        if let Some(&(oldest, _)) = self.in_flight.first() {
            let request = (oldest + bounds.request, Overstay::SlowRequest);
            return match self.answered.first() {
                Some(&(answered, _)) if answered + bounds.answer < request.0 => {
                    (answered + bounds.answer, Overstay::UnreadAnswer)
                }
                _ => request,
            };
        }
        if self.served_any {
            (self.idle_since + bounds.idle, Overstay::Idle)
        } else {
            (self.opened + bounds.first_request, Overstay::NoFirstRequest)
        }
    }
}

/// The shared activity of one connection: its request guards write it, its watchdog reads it.
#[derive(Debug)]
pub(crate) struct Activity {
    state: Mutex<State>,
    changed: Notify,
    bounds: Bounds,
}

impl Activity {
    /// The activity of a connection ready for HTTP now.
    pub fn new(bounds: Bounds) -> Arc<Self> {
        Arc::new(Activity {
            state: Mutex::new(State::new(Instant::now())),
            changed: Notify::new(),
            bounds,
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state holds no invariant a panic could break half-way.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a request starting now; it is in flight until the guard is dropped.
    pub fn start(self: &Arc<Self>) -> InFlight {
        let (key, was_idle) = self.state().start(Instant::now());
        if was_idle {
            self.changed.notify_one();
        }
        InFlight {
            activity: Arc::clone(self),
            key,
        }
    }

    /// Completes when the connection has overstayed, with why.
    pub async fn overstayed(&self) -> Overstay {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before reading the state, so a change meanwhile wakes us.
            changed.as_mut().enable();
            let (deadline, why) = self.state().deadline(&self.bounds);
            if Instant::now() >= deadline {
                return why;
            }
            // The deadline can only move earlier when the connection turns busy or idle (the
            // bounds differ): those are what `changed` wakes for.
            tokio::select! {
                () = tokio::time::sleep_until(deadline.into()) => {}
                () = changed => {}
            }
        }
    }
}

/// A request in flight on its connection, until dropped.
#[derive(Debug)]
pub(crate) struct InFlight {
    activity: Arc<Activity>,
    key: (Instant, u64),
}

impl InFlight {
    /// The handler has answered: from now the request is also held to the answer bound, until
    /// the guard is dropped with the answer's body.
    pub fn answered(&self) {
        self.activity.state().answer(self.key, Instant::now());
        // The answer bound may come before the request bound the watchdog sleeps on.
        self.activity.changed.notify_one();
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.activity.state().finish(self.key, Instant::now()) {
            self.activity.changed.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: Bounds = Bounds {
        first_request: Duration::from_secs(10),
        idle: Duration::from_secs(60),
        request: Duration::from_secs(120),
        answer: Duration::from_secs(10),
    };

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_new_connection_must_bring_its_first_request_within_the_first_request_bound() {
        let t0 = Instant::now();
        let state = State::new(t0);
        assert_eq!(state.deadline(&BOUNDS), (t0 + secs(10), Overstay::NoFirstRequest));
    }

    #[test]
    fn a_request_in_flight_is_held_to_the_request_bound_from_its_start() {
        let t0 = Instant::now();
        let mut state = State::new(t0);
        let _ = state.start(t0 + secs(3));
        assert_eq!(state.deadline(&BOUNDS), (t0 + secs(123), Overstay::SlowRequest));
    }

    #[test]
    fn the_oldest_request_in_flight_sets_the_deadline_whatever_the_order_they_end() {
        let t0 = Instant::now();
        let mut state = State::new(t0);
        let (a, was_idle) = state.start(t0 + secs(1));
        assert!(was_idle);
        let (b, was_idle) = state.start(t0 + secs(2));
        assert!(!was_idle);
        let (c, _) = state.start(t0 + secs(5));
        assert!(!state.finish(b, t0 + secs(6)));
        assert_eq!(state.deadline(&BOUNDS).0, t0 + secs(121));
        assert!(!state.finish(a, t0 + secs(7)));
        assert_eq!(state.deadline(&BOUNDS), (t0 + secs(125), Overstay::SlowRequest));
        assert!(state.finish(c, t0 + secs(8)));
        assert_eq!(state.deadline(&BOUNDS), (t0 + secs(68), Overstay::Idle));
    }

    #[test]
    fn an_answer_not_taken_is_held_to_the_answer_bound_from_when_it_was_produced() {
        let t0 = Instant::now();
        let mut state = State::new(t0);
        let (a, _) = state.start(t0);
        let (b, _) = state.start(t0 + secs(1));
        state.answer(b, t0 + secs(4));
        assert_eq!(state.deadline(&BOUNDS), (t0 + secs(14), Overstay::UnreadAnswer));
        // Taken: the other request is back to the request bound.
        assert!(!state.finish(b, t0 + secs(5)));
        assert_eq!(state.deadline(&BOUNDS), (t0 + secs(120), Overstay::SlowRequest));
        // An answer produced near the end of the request bound does not extend it.
        state.answer(a, t0 + secs(115));
        assert_eq!(state.deadline(&BOUNDS), (t0 + secs(120), Overstay::SlowRequest));
        assert!(state.finish(a, t0 + secs(116)));
        assert_eq!(state.deadline(&BOUNDS), (t0 + secs(176), Overstay::Idle));
        // An answer of a request already finished is not recorded.
        state.answer(a, t0 + secs(117));
        assert_eq!(state.deadline(&BOUNDS).1, Overstay::Idle);
    }

    #[test]
    fn requests_started_at_the_same_instant_are_tracked_apart() {
        let t0 = Instant::now();
        let mut state = State::new(t0);
        let (a, _) = state.start(t0);
        let (b, _) = state.start(t0);
        assert_ne!(a, b);
        assert!(!state.finish(a, t0 + secs(1)));
        assert_eq!(state.deadline(&BOUNDS).1, Overstay::SlowRequest);
        assert!(state.finish(b, t0 + secs(1)));
    }

    #[test]
    fn after_the_first_request_an_idle_connection_is_held_to_the_idle_bound() {
        let t0 = Instant::now();
        let mut state = State::new(t0);
        let (a, _) = state.start(t0 + secs(1));
        assert!(state.finish(a, t0 + secs(2)));
        assert_eq!(state.deadline(&BOUNDS), (t0 + secs(62), Overstay::Idle));
    }

    #[tokio::test]
    async fn the_watchdog_wakes_when_the_last_request_ends_and_the_idle_bound_is_shorter() {
        let bounds = Bounds {
            first_request: Duration::from_millis(100),
            idle: Duration::from_millis(100),
            request: secs(3600),
            answer: secs(3600),
        };
        let activity = Activity::new(bounds);
        let guard = activity.start();
        let watchdog = tokio::spawn({
            let activity = Arc::clone(&activity);
            async move { activity.overstayed().await }
        });
        tokio::task::yield_now().await;
        drop(guard);
        // Sleeping on the request bound instead would outlast this by far.
        let why = tokio::time::timeout(secs(10), watchdog).await;
        assert_eq!(why.unwrap().unwrap(), Overstay::Idle);
    }

    #[tokio::test]
    async fn the_watchdog_wakes_when_a_request_starts_and_the_request_bound_is_shorter() {
        let bounds = Bounds {
            first_request: Duration::from_secs(3600),
            idle: Duration::from_secs(3600),
            request: Duration::from_millis(100),
            answer: Duration::from_secs(3600),
        };
        let activity = Activity::new(bounds);
        let watchdog = tokio::spawn({
            let activity = Arc::clone(&activity);
            async move { activity.overstayed().await }
        });
        tokio::task::yield_now().await;
        let _guard = activity.start();
        // Sleeping on the first-request bound instead would outlast this by far.
        let why = tokio::time::timeout(Duration::from_secs(10), watchdog).await;
        assert_eq!(why.unwrap().unwrap(), Overstay::SlowRequest);
    }
}
