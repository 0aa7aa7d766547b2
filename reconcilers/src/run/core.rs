//! The loop core, without a cluster: events in (journaled, folded), decisions out, the
//! applier's results folded back. [`Loop::settle`] is one cycle: tick, evaluate, apply, absorb,
//! until the graph decides nothing (at most [`MAX_ROUNDS`] rounds) — the in-cluster twin of
//! [`crate::local::LocalController::tick`].
//!
//! Safety rules kept here rather than in the driver, so they are tested:
//! - nothing is decided before every watcher's initial list is folded ([`Loop::set_synced`]):
//!   a missing Secret in a half-listed World would otherwise look like "generate new keys";
//! - only the leader gets actions; a standby evaluates (its graph stays warm) and discards them,
//!   and gaining the lease makes the next evaluation diff everything ([`Controller::resync`])
//!   and hand over every effect still requested (the graph announces an effect once, when it
//!   is first requested, and keeps it requested until it observes the result);
//! - an applier problem does the same on the next cycle, after a backoff.

use std::io::Write;
use std::time::Duration;

use async_trait::async_trait;
use ichor_graph::{Action, Event, JournalWriter, ObjectKey, World};
use ichor_renderers::trust::{NAMESPACE, TLS_SECRET};
use jiff::Timestamp;

use super::metrics::{ActionLabels, Metrics, certificate_expiry};
use crate::identity::Controller;
use crate::identity::replay::describe;

/// The most evaluate–apply rounds of one [`Loop::settle`].
pub const MAX_ROUNDS: usize = crate::local::MAX_ROUNDS;
/// The first retry delay after an applier problem; doubled per consecutive failure.
pub const RETRY_FIRST: Duration = Duration::from_secs(2);
/// The longest retry delay after applier problems.
pub const RETRY_MAX: Duration = Duration::from_secs(300);

pub use crate::apply::ApplyReport;

/// Performs actions against the store (the Kubernetes applier, or a fake in tests).
#[async_trait]
pub trait Apply: Send {
    /// Applies `actions`, decided over `world`, and reports what happened.
    async fn apply(&mut self, world: &World, actions: &[Action]) -> ApplyReport;
}

/// An applier that applies nothing and reports nothing: `ichor-controller run --dry-run`
/// (decisions are logged and counted only).
#[derive(Debug, Default, Clone, Copy)]
pub struct DryRun;

#[async_trait]
impl Apply for DryRun {
    async fn apply(&mut self, _world: &World, actions: &[Action]) -> ApplyReport {
        for action in actions {
            tracing::info!(action = %action, "dry run: not applied");
        }
        ApplyReport::default()
    }
}

/// The journal the loop writes (`--journal FILE`), Secret data redacted to sha256.
pub type Journal = JournalWriter<Box<dyn Write + Send>>;

/// What one [`Loop::settle`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CycleReport {
    /// Evaluations run.
    pub rounds: usize,
    /// Every action handed to the applier, as text with its reason.
    pub actions: Vec<String>,
    /// Applier problems and node failures.
    pub problems: Vec<String>,
    /// Whether an evaluation decided nothing within [`MAX_ROUNDS`] (a standby always settles).
    pub settled: bool,
}

/// The loop's state: the identity graph and its World, the journal, leadership and sync.
pub struct Loop {
    controller: Controller,
    journal: Option<Journal>,
    metrics: Metrics,
    leader: bool,
    synced: bool,
    next_deadline: Option<Timestamp>,
    failures_in_row: u32,
    /// Hand over every still-requested effect with the next leader evaluation.
    reissue: bool,
}

/// The node named in the reason of an effect handed over again (requested earlier, its result
/// not observed yet: after a failed apply or a change of leader).
pub use crate::local::REISSUE_NODE;

impl Loop {
    /// A loop over `controller`, journaling to `journal` when given.
    pub fn new(controller: Controller, journal: Option<Journal>, metrics: Metrics) -> Self {
        Loop {
            controller,
            journal,
            metrics,
            leader: false,
            synced: false,
            next_deadline: None,
            failures_in_row: 0,
            reissue: false,
        }
    }

    fn fold(&mut self, event: Event) {
        if let Some(journal) = &mut self.journal
            && let Err(e) = journal.append(&event)
        {
            tracing::error!(error = %e, "the journal cannot be written; it is closed, the controller goes on");
            self.metrics.journal_errors.inc();
            self.journal = None;
        }
        self.metrics.event(&event);
        let tls = matches!(&event, Event::Applied(o) if o.kind == "Secret" && o.name == TLS_SECRET)
            || matches!(&event, Event::Deleted(k) if &*k.kind == "Secret" && &*k.name == TLS_SECRET);
        self.controller.fold(event);
        if tls {
            let key = ObjectKey::new("Secret", NAMESPACE, TLS_SECRET);
            let expiry = self
                .controller
                .world()
                .get(&key)
                .and_then(|o| certificate_expiry(&o.value))
                .unwrap_or(0);
            self.metrics.issuer_certificate_expiry.set(expiry);
        }
    }

    fn flush(&mut self) {
        if let Some(journal) = &mut self.journal
            && let Err(e) = journal.flush()
        {
            tracing::error!(error = %e, "the journal cannot be flushed; it is closed, the controller goes on");
            self.metrics.journal_errors.inc();
            self.journal = None;
        }
        self.metrics
            .world_objects
            .set(self.controller.world().len() as i64);
    }

    /// Journals and folds watch events (one batch: everything queued).
    pub fn ingest(&mut self, events: impl IntoIterator<Item = Event>) {
        for event in events {
            self.fold(event);
        }
        self.flush();
    }

    /// Folds `now` (when it moved) and evaluates; returns the actions to apply — none before
    /// the watchers synced, none on a standby. Logs node failures, conflicts, render changes and
    /// every action with its reason.
    pub fn decide(&mut self, now: Timestamp) -> Vec<Action> {
        if !self.synced {
            return Vec::new();
        }
        if self.controller.world().now() != Some(now) {
            self.fold(Event::Tick(now));
            self.flush();
        }
        let (eval, renders) = self.controller.evaluate();
        self.metrics.reconciles.inc();
        self.metrics
            .evaluation_seconds
            .observe(eval.stats.elapsed.as_secs_f64());
        self.next_deadline = eval.next_deadline;
        for failure in &eval.failures {
            self.metrics.node_failures.inc();
            tracing::warn!(failure = ?failure, "graph node failed");
        }
        for conflict in &eval.conflicts {
            tracing::warn!(conflict = ?conflict, "an object is desired by more than one node");
        }
        for render in &renders {
            tracing::info!(render = %render, "authentication render changed");
        }
        if !self.leader {
            if !eval.actions.is_empty() {
                tracing::debug!(
                    actions = eval.actions.len(),
                    "standby: actions left to the leader"
                );
            }
            return Vec::new();
        }
        let mut actions = eval.actions;
        if std::mem::take(&mut self.reissue) {
            let outstanding = self.controller.outstanding_effects(&actions, REISSUE_NODE);
            actions.extend(outstanding);
        }
        for action in &actions {
            self.metrics
                .actions
                .get_or_create(&ActionLabels::of(action))
                .inc();
            tracing::info!(
                action = %action,
                reason = %action.reason(),
                detail = %describe(action).trim(),
                "decided"
            );
        }
        actions
    }

    /// Folds back what the applier wrote; counts and logs its problems. Returns whether the
    /// apply was clean; after problems the next evaluation diffs everything (after
    /// [`Loop::retry_delay`]).
    pub fn absorb(&mut self, report: ApplyReport) -> bool {
        for line in &report.applied {
            tracing::info!(applied = %line, "applied");
        }
        for problem in &report.problems {
            self.metrics.apply_problems.inc();
            tracing::warn!(problem = %problem, "apply failed; retried after a backoff");
        }
        self.ingest(report.events);
        if report.problems.is_empty() {
            self.failures_in_row = 0;
            true
        } else {
            self.failures_in_row = self.failures_in_row.saturating_add(1);
            self.controller.resync();
            self.reissue = true;
            false
        }
    }

    /// One cycle at `now`: evaluate, apply (only while `still_leader()` holds before each
    /// round), absorb, until nothing is decided or [`MAX_ROUNDS`] rounds ran.
    pub async fn settle<A: Apply + ?Sized>(
        &mut self,
        applier: &mut A,
        now: Timestamp,
        still_leader: &(dyn Fn() -> bool + Sync),
    ) -> CycleReport {
        let mut report = CycleReport::default();
        for _ in 0..MAX_ROUNDS {
            if self.leader && !still_leader() {
                self.set_leader(false);
            }
            let actions = self.decide(now);
            report.rounds += 1;
            if actions.is_empty() {
                report.settled = true;
                return report;
            }
            report.actions.extend(actions.iter().map(ToString::to_string));
            let applied = applier.apply(self.controller.world(), &actions).await;
            report.problems.extend(applied.problems.iter().cloned());
            if !self.absorb(applied) {
                return report;
            }
        }
        tracing::warn!(
            rounds = MAX_ROUNDS,
            "the graph did not settle; the next cycle goes on"
        );
        report
    }

    /// Sets leadership. Gaining it makes the next evaluation diff everything (a standby's
    /// evaluations discarded their actions).
    pub fn set_leader(&mut self, leader: bool) {
        if leader && !self.leader {
            self.controller.resync();
            self.reissue = true;
            tracing::info!("leading: applying from now on");
        } else if !leader && self.leader {
            tracing::warn!("not leading any more: applying stopped");
        }
        self.leader = leader;
        self.metrics.leader.set(i64::from(leader));
    }

    /// Whether this loop applies.
    pub fn is_leader(&self) -> bool {
        self.leader
    }

    /// Marks every watcher's initial list folded: decisions may start.
    pub fn set_synced(&mut self) {
        if !self.synced {
            tracing::info!(objects = self.controller.world().len(), "watchers synced");
        }
        self.synced = true;
        self.metrics.synced.set(1);
    }

    /// Makes the next evaluation diff everything (the periodic resync).
    pub fn resync(&mut self) {
        self.controller.resync();
    }

    /// The earliest instant after the last evaluation's `now` at which the graph's output
    /// changes (a key to activate, a certificate to renew): the next Tick.
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.next_deadline
    }

    /// How long to wait before retrying after consecutive applier problems (`None`: the last
    /// apply was clean): 2 s doubled per failure, at most 5 minutes.
    pub fn retry_delay(&self) -> Option<Duration> {
        if self.failures_in_row == 0 {
            return None;
        }
        let shift = self.failures_in_row.saturating_sub(1).min(16);
        Some(RETRY_FIRST.saturating_mul(1 << shift).min(RETRY_MAX))
    }

    /// The World.
    pub fn world(&self) -> &World {
        self.controller.world()
    }

    /// Flushes and returns the journal (shutdown, tests).
    pub fn take_journal(&mut self) -> Option<Journal> {
        self.flush();
        self.journal.take()
    }
}
