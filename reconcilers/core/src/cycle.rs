//! The one reconcile loop, without I/O: events in (journaled, folded), decisions out, the
//! sink's results folded back. Its drivers — the cluster controller, `ichor dev` and the
//! simulation — differ only in where events come from, where actions go (an [`Apply`] sink)
//! and where new key material comes from; every rule of the loop is here and tested once:
//!
//! - nothing is decided before every source's initial list is folded ([`Loop::set_synced`]):
//!   a missing Secret in a half-listed World would otherwise look like "generate new keys";
//! - only the leader gets actions; a standby evaluates (its graph stays warm) and discards them,
//!   and gaining the lease makes the next evaluation diff everything ([`Controller::resync`])
//!   and hand over every effect still requested (the graph announces an effect once, when it
//!   is first requested, and keeps it requested until it observes the result);
//! - a sink problem does the same on the next cycle, after a back-off ([`Loop::retry_delay`]);
//! - a write the store refused because its object changed since it was observed (a 409) is
//!   *stale*, not failed: the sink re-reads the object and reports it with its events, and the
//!   next round decides again from what it read, through the graph, without back-off;
//! - one cycle ([`Loop::settle`]) runs at most [`MAX_ROUNDS`] evaluate–apply rounds.
//!
//! What a driver reports (logs, metrics, a tick's summary) it learns through [`Observe`].

use std::io::Write;
use std::time::Duration;

use async_trait::async_trait;
use ichor_graph::{Action, Conflict, Event, JournalError, JournalWriter, NodeFailure, World};
use jiff::Timestamp;

use crate::identity::{Controller, RenderChange};
use crate::problem::Problem;

/// The most evaluate–apply rounds of one [`Loop::settle`].
pub const MAX_ROUNDS: usize = 16;
/// The first retry delay after a sink problem; doubled per consecutive failure.
pub const RETRY_FIRST: Duration = Duration::from_secs(2);
/// The longest retry delay after sink problems.
pub const RETRY_MAX: Duration = Duration::from_secs(300);
/// The node named in the reason of an effect handed over again (requested earlier, its result
/// not observed yet: after a failed apply or a change of leader).
pub const REISSUE_NODE: &str = "requested-effects";

/// What a sink did with one round's actions.
#[derive(Clone, Default, PartialEq)]
pub struct Report {
    /// The objects as the store now holds them (and the deleted keys), to fold into the World.
    pub events: Vec<Event>,
    /// Every action carried out, as text with its reason.
    pub applied: Vec<String>,
    /// Every action that failed, with the kind and the reason of the failure.
    pub problems: Vec<Problem>,
    /// Every action the store refused because its object changed since it was observed (kind
    /// [`crate::problem::ProblemKind::Conflict`]); the object as re-read is in `events`, so the
    /// next round decides again from it.
    pub stale: Vec<Problem>,
}

impl std::fmt::Debug for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let events: Vec<String> = self
            .events
            .iter()
            .map(|e| match e {
                Event::Applied(o) => format!("applied {}", o.key()),
                Event::Deleted(k) => format!("deleted {k}"),
                Event::Tick(t) => format!("tick {t}"),
            })
            .collect();
        f.debug_struct("Report")
            .field("events", &events)
            .field("applied", &self.applied)
            .field("problems", &self.problems)
            .field("stale", &self.stale)
            .finish()
    }
}

/// Carries out actions: the Kubernetes applier, the local files of `ichor dev`, the simulated
/// store of tests.
#[async_trait]
pub trait Apply: Send {
    /// Applies `actions`, decided over `world`, and reports what happened.
    async fn apply(&mut self, world: &World, actions: &[Action]) -> Report;
}

/// A sink that applies nothing and reports nothing: `ichor-controller run --dry-run`
/// (decisions are logged and counted only).
#[derive(Debug, Default, Clone, Copy)]
pub struct DryRun;

#[async_trait]
impl Apply for DryRun {
    async fn apply(&mut self, _world: &World, _actions: &[Action]) -> Report {
        Report::default()
    }
}

/// One evaluation, as the loop decided it.
#[derive(Debug, Clone, Default)]
pub struct Decision {
    /// The actions handed to the sink (none on a standby), each with its reason; effects
    /// handed over again carry [`REISSUE_NODE`].
    pub actions: Vec<Action>,
    /// Actions decided but left to the leader (a standby's evaluation).
    pub discarded: usize,
    /// Nodes that failed (their outputs kept from before).
    pub failures: Vec<NodeFailure>,
    /// Objects desired by more than one node.
    pub conflicts: Vec<Conflict>,
    /// Clusters whose rendered authentication changed.
    pub renders: Vec<RenderChange>,
    /// How long the evaluation took.
    pub elapsed: Duration,
}

/// What a driver learns from the loop, to log and count. Every method defaults to nothing.
pub trait Observe {
    /// An event is about to be journaled and folded.
    fn event(&mut self, _event: &Event) {}
    /// An evaluation decided.
    fn decided(&mut self, _decision: &Decision) {}
    /// The sink reported.
    fn absorbed(&mut self, _report: &Report) {}
    /// The journal failed; it is closed and the loop goes on without it.
    fn journal_failed(&mut self, _error: JournalError) {}
    /// Leadership changed.
    fn leading(&mut self, _leader: bool) {}
    /// Every source's initial list is folded.
    fn synced(&mut self, _objects: usize) {}
    /// A cycle ran [`MAX_ROUNDS`] rounds without settling.
    fn unsettled(&mut self) {}
}

/// An observer that observes nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Quiet;

impl Observe for Quiet {}

/// What one [`Loop::settle`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CycleReport {
    /// Evaluations run.
    pub rounds: usize,
    /// Every action handed to the sink, as text with its reason.
    pub actions: Vec<String>,
    /// Sink problems.
    pub problems: Vec<Problem>,
    /// Writes refused as stale and decided again in a later round.
    pub stale: Vec<Problem>,
    /// Whether an evaluation decided nothing within [`MAX_ROUNDS`] (a standby always settles).
    pub settled: bool,
}

/// The loop's state: the identity graph and its World, the journal, leadership and sync.
pub struct Loop<O: Observe = Quiet, W: Write = Box<dyn Write + Send>> {
    controller: Controller,
    journal: Option<JournalWriter<W>>,
    observer: O,
    leader: bool,
    synced: bool,
    next_deadline: Option<Timestamp>,
    failures_in_row: u32,
    /// Hand over every still-requested effect with the next leader evaluation.
    reissue: bool,
}

impl<O: Observe, W: Write> Loop<O, W> {
    /// A loop over `controller` that waits for sync and leadership (the cluster), journaling
    /// to `journal` when given.
    pub fn new(controller: Controller, journal: Option<JournalWriter<W>>, observer: O) -> Self {
        Loop {
            controller,
            journal,
            observer,
            leader: false,
            synced: false,
            next_deadline: None,
            failures_in_row: 0,
            reissue: false,
        }
    }

    /// A loop that is the only writer from the start (`ichor dev`, the simulation): synced and
    /// leading, with nothing to hand over again.
    pub fn sole_writer(controller: Controller, journal: Option<JournalWriter<W>>, observer: O) -> Self {
        let mut lp = Loop::new(controller, journal, observer);
        lp.leader = true;
        lp.synced = true;
        lp
    }

    fn fold(&mut self, event: Event) {
        self.observer.event(&event);
        if let Some(journal) = &mut self.journal
            && let Err(e) = journal.append(&event)
        {
            self.observer.journal_failed(e);
            self.journal = None;
        }
        self.controller.fold(event);
    }

    /// Flushes the journal (a failure closes it, as a failed append does).
    pub fn flush(&mut self) {
        if let Some(journal) = &mut self.journal
            && let Err(e) = journal.flush()
        {
            self.observer.journal_failed(e);
            self.journal = None;
        }
    }

    /// Journals and folds one event, without flushing the journal.
    pub fn push(&mut self, event: Event) {
        self.fold(event);
    }

    /// Journals and folds events (one batch), then flushes the journal.
    pub fn ingest(&mut self, events: impl IntoIterator<Item = Event>) {
        for event in events {
            self.fold(event);
        }
        self.flush();
    }

    /// Folds `now` when it moved.
    pub fn tick(&mut self, now: Timestamp) {
        if self.controller.world().now() != Some(now) {
            self.ingest([Event::Tick(now)]);
        }
    }

    /// Evaluates and returns the actions to apply — none before sync, none on a standby; after
    /// a change of leader or a failed apply, with every effect still requested.
    pub fn decide(&mut self) -> Vec<Action> {
        if !self.synced {
            return Vec::new();
        }
        let (eval, renders) = self.controller.evaluate();
        self.next_deadline = eval.next_deadline;
        let mut decision = Decision {
            actions: Vec::new(),
            discarded: 0,
            failures: eval.failures,
            conflicts: eval.conflicts,
            renders,
            elapsed: eval.stats.elapsed,
        };
        if self.leader {
            decision.actions = eval.actions;
            if std::mem::take(&mut self.reissue) {
                let outstanding = self
                    .controller
                    .outstanding_effects(&decision.actions, REISSUE_NODE);
                decision.actions.extend(outstanding);
            }
        } else {
            decision.discarded = eval.actions.len();
        }
        self.observer.decided(&decision);
        decision.actions
    }

    /// Folds back what the sink wrote (and re-read). Returns whether the apply was clean; after
    /// problems the next evaluation diffs everything and hands over every effect still
    /// requested (after [`Loop::retry_delay`]). Stale writes are not problems: what the sink
    /// re-read is folded and the next evaluation decides from it.
    pub fn absorb(&mut self, report: Report) -> bool {
        self.observer.absorbed(&report);
        let clean = report.problems.is_empty();
        let stale = !report.stale.is_empty();
        self.ingest(report.events);
        if clean {
            self.failures_in_row = 0;
        } else {
            self.failures_in_row = self.failures_in_row.saturating_add(1);
        }
        if !clean || stale {
            self.controller.resync();
            self.reissue = true;
        }
        clean
    }

    /// One cycle: evaluate, apply (only while `still_leader()` holds before each round),
    /// absorb, until nothing is decided, a round has problems, or [`MAX_ROUNDS`] rounds ran (a
    /// round with only stale writes goes on: the next one decides from what was re-read).
    pub async fn settle<A: Apply + ?Sized>(
        &mut self,
        sink: &mut A,
        still_leader: &(dyn Fn() -> bool + Sync),
    ) -> CycleReport {
        let mut report = CycleReport::default();
        for _ in 0..MAX_ROUNDS {
            if self.leader && !still_leader() {
                self.set_leader(false);
            }
            let actions = self.decide();
            report.rounds += 1;
            if actions.is_empty() {
                report.settled = true;
                return report;
            }
            report.actions.extend(actions.iter().map(ToString::to_string));
            let applied = sink.apply(self.controller.world(), &actions).await;
            report.problems.extend(applied.problems.iter().cloned());
            report.stale.extend(applied.stale.iter().cloned());
            if !self.absorb(applied) {
                return report;
            }
        }
        self.observer.unsettled();
        report
    }

    /// [`Loop::settle`] for a sink that never waits (local files, the simulation), as the sole
    /// writer.
    pub fn settle_now<A: Apply + ?Sized>(&mut self, sink: &mut A) -> CycleReport {
        futures::executor::block_on(self.settle(sink, &|| true))
    }

    /// Sets leadership. Gaining it makes the next evaluation diff everything and hand over
    /// every effect still requested (a standby's evaluations discarded their actions).
    pub fn set_leader(&mut self, leader: bool) {
        if leader && !self.leader {
            self.controller.resync();
            self.reissue = true;
        }
        if leader != self.leader {
            self.observer.leading(leader);
        }
        self.leader = leader;
    }

    /// Whether this loop applies.
    pub fn is_leader(&self) -> bool {
        self.leader
    }

    /// Marks every source's initial list folded: decisions may start.
    pub fn set_synced(&mut self) {
        if !self.synced {
            self.observer.synced(self.controller.world().len());
        }
        self.synced = true;
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

    /// How long to wait before retrying after consecutive sink problems (`None`: the last
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

    /// The graph and its World.
    pub fn controller(&self) -> &Controller {
        &self.controller
    }

    /// The graph, to evaluate by hand (tests, benchmarks).
    pub fn controller_mut(&mut self) -> &mut Controller {
        &mut self.controller
    }

    /// The observer.
    pub fn observer(&self) -> &O {
        &self.observer
    }

    /// The observer, to take what it collected.
    pub fn observer_mut(&mut self) -> &mut O {
        &mut self.observer
    }

    /// Flushes and returns the journal (shutdown, tests).
    pub fn take_journal(&mut self) -> Option<JournalWriter<W>> {
        self.flush();
        self.journal.take()
    }

    /// The sequence number of the last event journaled (`None`: none yet, or no journal).
    pub fn journal_seq(&self) -> Option<u64> {
        self.journal.as_ref().and_then(JournalWriter::last_seq)
    }

    /// Whether the journal is still open.
    pub fn journaling(&self) -> bool {
        self.journal.is_some()
    }
}

#[cfg(test)]
mod tests;
