//! The known devices' lane goes first on the CPU: while a lane check is waiting or running, the
//! shared argon2id queue starts no new check, so the lane's computation shares the cores with at
//! most the shared checks already running (argon2id cannot be interrupted) instead of with a
//! fresh pair after each one ends. A held check waits for its turn before it takes a shared
//! permit, so the lane can borrow every shared permit that is free and run on every core.
//!
//! The hold is bounded both ways. It lasts at most [`MAX_HOLD`] at a time: then the shared queue
//! starts one check and a new hold begins, so a lane kept busy without a pause (one stolen device
//! cookie used over and over: the lane holds one place per user) slows the other sign-ins to one
//! check per [`MAX_HOLD`] and never stops them. And it ends as soon as no lane check is pending.
//! [`turn`] is the decision, on the caller's `now`; [`LanePriority`] keeps its state and wakes the
//! held checks.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// The longest the shared queue waits for the lane before it starts a check anyway: a few lane
/// checks' worth (one takes about 0.2 s on a free core).
pub const MAX_HOLD: Duration = Duration::from_secs(1);

/// Whether a shared check that has its permit may start now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// Start the computation.
    Start,
    /// Wait for the lane, at most until this instant (unless the lane empties first).
    Hold {
        /// When the hold ends whatever the lane does.
        until: Instant,
    },
}

/// The turn of a shared check at `now`, with `lane_pending` lane checks waiting or running and
/// the shared queue held since `held_since` (`None`: it started a check, or the lane was empty,
/// since the last hold began) for at most `max_hold`.
pub fn turn(lane_pending: usize, held_since: Option<Instant>, now: Instant, max_hold: Duration) -> Turn {
    if lane_pending == 0 {
        return Turn::Start;
    }
    let until = held_since.unwrap_or(now) + max_hold;
    if now >= until {
        Turn::Start
    } else {
        Turn::Hold { until }
    }
}

#[derive(Debug, Default)]
struct State {
    lane_pending: usize,
    held_since: Option<Instant>,
}

/// The lane's claim on the CPU, shared by the lane (which counts its pending checks) and the
/// shared queue (which asks for its [`turn`] before each computation).
#[derive(Debug)]
pub struct LanePriority {
    state: Mutex<State>,
    lane_emptied: Notify,
    max_hold: Duration,
}

impl Default for LanePriority {
    fn default() -> Self {
        Self::new(MAX_HOLD)
    }
}

impl LanePriority {
    /// A priority holding the shared queue for at most `max_hold` at a time.
    pub fn new(max_hold: Duration) -> Self {
        LanePriority {
            state: Mutex::new(State::default()),
            lane_emptied: Notify::new(),
            max_hold,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Two counters; a panic elsewhere leaves nothing half-written that matters.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A lane check became pending.
    pub fn lane_enter(&self) {
        self.state().lane_pending += 1;
    }

    /// A lane check ended (or gave up): when it was the last, the held shared checks start.
    pub fn lane_leave(&self) {
        let emptied = {
            let mut state = self.state();
            state.lane_pending = state.lane_pending.saturating_sub(1);
            if state.lane_pending == 0 {
                state.held_since = None;
            }
            state.lane_pending == 0
        };
        if emptied {
            self.lane_emptied.notify_waiters();
        }
    }

    /// How many lane checks are pending now.
    pub fn lane_pending(&self) -> usize {
        self.state().lane_pending
    }

    /// The turn of a shared check that has its permit at `now`, recording the hold it begins or
    /// the start that ends it.
    pub fn take_turn(&self, now: Instant) -> Turn {
        let mut state = self.state();
        let decided = turn(state.lane_pending, state.held_since, now, self.max_hold);
        state.held_since = match decided {
            Turn::Start => None,
            Turn::Hold { .. } => state.held_since.or(Some(now)),
        };
        decided
    }

    /// Completes at `until`, or as soon as no lane check is pending if that is sooner: the wait
    /// of a shared check told to [`Turn::Hold`], before it asks again.
    pub async fn hold(&self, until: Instant) {
        let emptied = self.lane_emptied.notified();
        tokio::pin!(emptied);
        // Registered before reading the state, so a lane emptied meanwhile wakes us.
        emptied.as_mut().enable();
        if self.lane_pending() == 0 {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep_until(until.into()) => {}
            () = emptied => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOLD: Duration = Duration::from_secs(1);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn with_no_lane_check_pending_the_shared_queue_starts_at_once() {
        let now = Instant::now();
        assert_eq!(turn(0, None, now, HOLD), Turn::Start);
        assert_eq!(turn(0, Some(now - ms(10)), now, HOLD), Turn::Start);
    }

    #[test]
    fn a_pending_lane_check_holds_the_shared_queue_for_at_most_the_bound() {
        let t0 = Instant::now();
        assert_eq!(turn(1, None, t0, HOLD), Turn::Hold { until: t0 + HOLD });
        // Asked again during the hold: the same end, not a later one.
        assert_eq!(
            turn(5, Some(t0), t0 + ms(600), HOLD),
            Turn::Hold { until: t0 + HOLD }
        );
        assert_eq!(turn(1, Some(t0), t0 + HOLD, HOLD), Turn::Start);
        assert_eq!(turn(1, Some(t0), t0 + ms(2500), HOLD), Turn::Start);
    }

    #[test]
    fn a_lane_kept_busy_lets_the_shared_queue_start_one_check_per_bound() {
        let p = LanePriority::new(HOLD);
        let t0 = Instant::now();
        p.lane_enter();
        // Two shared checks have their permits; neither starts while the lane has a check.
        assert_eq!(p.take_turn(t0), Turn::Hold { until: t0 + HOLD });
        assert_eq!(p.take_turn(t0 + ms(10)), Turn::Hold { until: t0 + HOLD });
        // The lane never empties: at the bound one starts, and the other is held anew.
        assert_eq!(p.take_turn(t0 + HOLD), Turn::Start);
        assert_eq!(
            p.take_turn(t0 + HOLD + ms(1)),
            Turn::Hold {
                until: t0 + HOLD + ms(1) + HOLD
            }
        );
        assert_eq!(p.take_turn(t0 + HOLD * 2 + ms(1)), Turn::Start);
    }

    #[test]
    fn the_hold_ends_when_the_last_lane_check_does() {
        let p = LanePriority::new(HOLD);
        let t0 = Instant::now();
        p.lane_enter();
        p.lane_enter();
        assert!(matches!(p.take_turn(t0), Turn::Hold { .. }));
        p.lane_leave();
        assert_eq!(p.lane_pending(), 1);
        assert!(matches!(p.take_turn(t0 + ms(1)), Turn::Hold { .. }));
        p.lane_leave();
        assert_eq!(p.take_turn(t0 + ms(2)), Turn::Start);
        // A later lane check begins a hold of its own, with the whole bound.
        p.lane_enter();
        assert_eq!(
            p.take_turn(t0 + ms(3)),
            Turn::Hold {
                until: t0 + ms(3) + HOLD
            }
        );
    }

    #[tokio::test]
    async fn a_held_shared_check_is_woken_when_the_lane_empties() {
        let p = std::sync::Arc::new(LanePriority::new(Duration::from_secs(3600)));
        p.lane_enter();
        let held = tokio::spawn({
            let p = std::sync::Arc::clone(&p);
            async move { p.hold(Instant::now() + Duration::from_secs(3600)).await }
        });
        tokio::task::yield_now().await;
        assert!(!held.is_finished());
        p.lane_leave();
        // Sleeping out the hour-long bound instead would outlast this by far.
        tokio::time::timeout(Duration::from_secs(10), held)
            .await
            .expect("woken")
            .expect("join");
    }
}
