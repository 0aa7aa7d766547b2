//! The loop's rules, with the simulated store as the sink.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::problem::ProblemKind;
use crate::sim::{MemorySink, fixtures};

fn now() -> Timestamp {
    "2027-01-01T00:00:00Z".parse().unwrap()
}

/// Counts what the loop reports.
#[derive(Default)]
struct Counts {
    discarded: usize,
    unsettled: usize,
    leading: Vec<bool>,
}

impl Observe for Counts {
    fn decided(&mut self, decision: &Decision) {
        self.discarded += decision.discarded;
    }
    fn unsettled(&mut self) {
        self.unsettled += 1;
    }
    fn leading(&mut self, leader: bool) {
        self.leading.push(leader);
    }
}

fn cluster_loop() -> Loop<Counts, std::io::Sink> {
    let mut lp = Loop::new(Controller::new().unwrap(), None, Counts::default());
    lp.ingest([
        Event::Applied(fixtures::issuer_service("10.96.0.10")),
        Event::Applied(fixtures::user("alice", &["admin"], false, 1)),
    ]);
    lp.tick(now());
    lp
}

/// Fails its first `failures` applies, then applies in memory.
struct Flaky {
    failures: usize,
    inner: MemorySink,
}

#[async_trait]
impl Apply for Flaky {
    async fn apply(&mut self, world: &World, actions: &[Action]) -> Report {
        if self.failures > 0 {
            self.failures -= 1;
            return Report {
                problems: vec![Problem::new(ProblemKind::Unavailable, "the store is away")],
                ..Report::default()
            };
        }
        self.inner.apply(world, actions).await
    }
}

/// Reports success but hands back alice as she was, without the status just written: the graph
/// decides the same status write again, round after round.
#[derive(Default)]
struct Forgetful(crate::memory::ResourceVersions);

#[async_trait]
impl Apply for Forgetful {
    async fn apply(&mut self, _world: &World, actions: &[Action]) -> Report {
        Report {
            applied: actions.iter().map(ToString::to_string).collect(),
            events: vec![
                self.0
                    .stamp(Event::Applied(fixtures::user("alice", &["admin"], false, 1))),
            ],
            ..Report::default()
        }
    }
}

/// Refuses the first status write of alice as stale (someone changed her since it was
/// decided) and hands back alice as re-read, now disabled at generation 2; then applies in
/// memory.
struct Racing {
    raced: bool,
    inner: MemorySink,
}

#[async_trait]
impl Apply for Racing {
    async fn apply(&mut self, world: &World, actions: &[Action]) -> Report {
        let writes_alice = actions
            .iter()
            .any(|a| matches!(a, Action::Apply { object, .. } if object.kind == "IchorUser"));
        if writes_alice && !self.raced {
            self.raced = true;
            let mut fresh = fixtures::user("alice", &["admin"], true, 2);
            fresh.resource_version = Some("7".into());
            return Report {
                events: vec![Event::Applied(fresh)],
                stale: vec![Problem::new(ProblemKind::Conflict, "IchorUser alice changed")],
                ..Report::default()
            };
        }
        self.inner.apply(world, actions).await
    }
}

#[test]
fn nothing_is_decided_before_sync_and_a_standby_leaves_its_actions_to_the_leader() {
    let mut lp = cluster_loop();
    assert!(lp.decide().is_empty(), "before sync");
    assert_eq!(lp.observer().discarded, 0, "not even evaluated");
    lp.set_synced();
    assert!(lp.decide().is_empty(), "a standby applies nothing");
    assert!(lp.observer().discarded > 0, "but it evaluated");
    lp.set_leader(true);
    let actions = lp.decide();
    assert!(
        actions.iter().any(|a| a.to_string().contains("generate-rsa-key")),
        "{actions:?}"
    );
    assert_eq!(lp.observer().leading, [true]);
}

#[test]
fn gaining_the_lease_hands_over_every_effect_still_requested() {
    let mut lp = cluster_loop();
    lp.set_synced();
    lp.set_leader(true);
    let first = lp.decide();
    assert!(!first.is_empty());
    lp.set_leader(false);
    lp.set_leader(true);
    let again = lp.decide();
    let reissued = again
        .iter()
        .filter(|a| a.reason().node.as_deref() == Some(REISSUE_NODE))
        .count();
    assert!(reissued > 0, "{again:?}");
    assert_eq!(lp.observer().leading, [true, false, true]);
}

#[test]
fn a_failed_apply_backs_off_doubling_and_the_next_cycle_reissues_then_settles() {
    let mut lp = Loop::<Quiet, std::io::Sink>::sole_writer(Controller::new().unwrap(), None, Quiet);
    lp.ingest([Event::Applied(fixtures::issuer_service("10.96.0.10"))]);
    lp.tick(now());
    let mut sink = Flaky {
        failures: 2,
        inner: MemorySink::default(),
    };
    assert_eq!(lp.retry_delay(), None);
    let first = lp.settle_now(&mut sink);
    assert!(!first.settled && first.problems.len() == 1, "{first:?}");
    assert_eq!(first.problems[0].kind, ProblemKind::Unavailable);
    assert_eq!(lp.retry_delay(), Some(RETRY_FIRST));
    lp.settle_now(&mut sink);
    assert_eq!(lp.retry_delay(), Some(RETRY_FIRST * 2));
    let third = lp.settle_now(&mut sink);
    assert!(third.settled, "{third:?}");
    assert!(
        third.actions.iter().any(|a| a.contains(REISSUE_NODE)),
        "{:?}",
        third.actions
    );
    assert_eq!(lp.retry_delay(), None);
}

#[test]
fn a_stale_write_is_decided_again_from_what_was_re_read_in_the_same_cycle_without_back_off() {
    let mut lp = Loop::<Quiet, std::io::Sink>::sole_writer(Controller::new().unwrap(), None, Quiet);
    lp.ingest([Event::Applied(fixtures::user("alice", &["admin"], false, 1))]);
    lp.tick(now());
    let mut sink = Racing {
        raced: false,
        inner: MemorySink::default(),
    };
    let report = lp.settle_now(&mut sink);
    assert!(report.settled, "{report:?}");
    assert!(report.problems.is_empty(), "{report:?}");
    assert_eq!(report.stale.len(), 1, "{report:?}");
    assert_eq!(lp.retry_delay(), None, "a stale write is not a failure");
    let alice = lp
        .world()
        .get(&ichor_graph::ObjectKey::new(
            "IchorUser",
            ichor_renderers::trust::NAMESPACE,
            "alice",
        ))
        .unwrap();
    assert_eq!(
        alice.value["status"]["observedGeneration"], 2,
        "the status written is decided from alice as re-read: {}",
        alice.value["status"]
    );
}

#[test]
fn a_cycle_that_does_not_settle_stops_at_the_round_limit() {
    let mut lp =
        Loop::<Counts, std::io::Sink>::sole_writer(Controller::new().unwrap(), None, Counts::default());
    lp.ingest([Event::Applied(fixtures::user("alice", &["admin"], false, 1))]);
    lp.tick(now());
    let report = lp.settle_now(&mut Forgetful::default());
    assert_eq!(report.rounds, MAX_ROUNDS);
    assert!(!report.settled);
    assert_eq!(lp.observer().unsettled, 1);
}

#[test]
fn the_back_off_is_capped() {
    let mut lp = Loop::<Quiet, std::io::Sink>::sole_writer(Controller::new().unwrap(), None, Quiet);
    for _ in 0..40 {
        lp.absorb(Report {
            problems: vec![Problem::new(ProblemKind::Forbidden, "no")],
            ..Report::default()
        });
    }
    assert_eq!(lp.retry_delay(), Some(RETRY_MAX));
}
