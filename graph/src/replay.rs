//! Replay: the decisions of a recorded journal, offline.

use std::fmt;
use std::io::BufRead;

use crate::diff::Action;
use crate::engine::{Graph, NodeFailure};
use crate::journal::{JournalError, JournalReader, PreparedEntry, Recycler};
use crate::world::World;

/// One action decided during a replay, with the seq of the event it followed.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayedAction {
    /// The seq of the last event folded before the evaluation that decided this action.
    pub seq: u64,
    /// The action, with its reason.
    pub action: Action,
}

/// Every decision of a replayed journal.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplayReport {
    /// Events read.
    pub events: u64,
    /// Evaluations run.
    pub evaluations: u64,
    /// The seq of the last event read.
    pub last_seq: Option<u64>,
    /// Every action, in decision order.
    pub actions: Vec<ReplayedAction>,
    /// Every node failure, with the seq it followed.
    pub failures: Vec<(u64, NodeFailure)>,
}

impl fmt::Display for ReplayReport {
    /// One line per action (`seq 12: apply User ns/a (user-status[User ns/a]: initial)`),
    /// failures, then a summary line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for a in &self.actions {
            writeln!(f, "seq {}: {}", a.seq, a.action)?;
        }
        for (seq, fail) in &self.failures {
            match &fail.instance {
                Some(i) => writeln!(f, "seq {seq}: node {}[{i}] failed: {}", fail.node, fail.error)?,
                None => writeln!(f, "seq {seq}: node {} failed: {}", fail.node, fail.error)?,
            }
        }
        writeln!(
            f,
            "{} events, {} evaluations, {} actions, {} failures",
            self.events,
            self.evaluations,
            self.actions.len(),
            self.failures.len()
        )
    }
}

/// A replay stopped by a bad journal line; holds what was decided before it.
#[derive(Debug, thiserror::Error)]
#[error("replay stopped after {} events: {error}", partial.events)]
pub struct ReplayError {
    /// The journal defect (it names the line).
    #[source]
    pub error: JournalError,
    /// The decisions up to the defect.
    pub partial: Box<ReplayReport>,
}

/// Replays a journal event by event: fold each event into a fresh World, evaluate, record the
/// actions. The graph is [reset](Graph::reset) first.
///
/// # Errors
/// The first bad journal line, with the report of everything before it.
pub fn replay<R: BufRead + Send>(
    journal: JournalReader<R>,
    graph: &mut Graph,
) -> Result<ReplayReport, ReplayError> {
    replay_in_batches(journal, graph, 1)
}

/// Replays a journal evaluating once per `batch` events (at least 1), as a controller that
/// drains its watch queue does.
///
/// # Errors
/// The first bad journal line, with the report of everything before it.
pub fn replay_in_batches<R: BufRead + Send>(
    journal: JournalReader<R>,
    graph: &mut Graph,
    batch: usize,
) -> Result<ReplayReport, ReplayError> {
    journal.read_ahead(|entries, recycler| replay_prepared(entries, recycler, graph, batch))
}

fn replay_prepared(
    entries: &mut dyn Iterator<Item = Result<PreparedEntry, JournalError>>,
    recycler: &mut Recycler,
    graph: &mut Graph,
    batch: usize,
) -> Result<ReplayReport, ReplayError> {
    let batch = batch.max(1);
    graph.reset();
    let mut world = World::new();
    let mut report = ReplayReport::default();
    let mut in_batch = 0;
    for item in entries {
        let entry = match item {
            Ok(e) => e,
            Err(error) => {
                if in_batch > 0 {
                    evaluate(graph, &mut world, &mut report);
                }
                return Err(ReplayError {
                    error,
                    partial: Box::new(report),
                });
            }
        };
        report.events += 1;
        report.last_seq = Some(entry.seq);
        if let Some(done) = world.apply_prepared(entry.prepared) {
            recycler.recycle(done);
        }
        in_batch += 1;
        if in_batch == batch {
            evaluate(graph, &mut world, &mut report);
            in_batch = 0;
        }
    }
    if in_batch > 0 {
        evaluate(graph, &mut world, &mut report);
    }
    Ok(report)
}

fn evaluate(graph: &mut Graph, world: &mut World, report: &mut ReplayReport) {
    let seq = report.last_seq.unwrap_or(0);
    let eval = graph.evaluate(world);
    report.evaluations += 1;
    report.actions.extend(
        eval.actions
            .into_iter()
            .map(|action| ReplayedAction { seq, action }),
    );
    report
        .failures
        .extend(eval.failures.into_iter().map(|f| (seq, f)));
}
