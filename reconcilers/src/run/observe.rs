//! What the cluster driver makes of the loop's reports: every decision logged with its reason
//! and counted, sink problems counted by kind, the journal's failures, leadership and sync as
//! gauges.

use ichor_controller_core::cycle::{Decision, Observe, Report};
use ichor_controller_core::identity::replay::describe;
use ichor_graph::{Action, Event, JournalError};
use ichor_renderers::trust::TLS_SECRET;

use super::metrics::{ActionLabels, Metrics, ProblemLabels, certificate_expiry};

/// The cluster loop's observer: logs and metrics.
#[derive(Debug, Clone)]
pub struct ClusterObserver {
    metrics: Metrics,
}

impl ClusterObserver {
    /// An observer counting into `metrics`.
    pub fn new(metrics: Metrics) -> Self {
        ClusterObserver { metrics }
    }

    /// The metrics counted into.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }
}

fn is_tls(kind: &str, name: &str) -> bool {
    kind == "Secret" && name == TLS_SECRET
}

impl Observe for ClusterObserver {
    fn event(&mut self, event: &Event) {
        self.metrics.event(event);
        match event {
            Event::Applied(o) if is_tls(&o.kind, &o.name) => {
                let expiry = certificate_expiry(&o.value).unwrap_or(0);
                self.metrics.issuer_certificate_expiry.set(expiry);
            }
            Event::Deleted(k) if is_tls(&k.kind, &k.name) => {
                self.metrics.issuer_certificate_expiry.set(0);
            }
            _ => {}
        }
    }

    fn decided(&mut self, decision: &Decision) {
        self.metrics.reconciles.inc();
        self.metrics
            .evaluation_seconds
            .observe(decision.elapsed.as_secs_f64());
        for failure in &decision.failures {
            self.metrics.node_failures.inc();
            tracing::warn!(failure = ?failure, "graph node failed");
        }
        for conflict in &decision.conflicts {
            tracing::warn!(conflict = ?conflict, "an object is desired by more than one node");
        }
        for render in &decision.renders {
            tracing::info!(render = %render, "authentication render changed");
        }
        if decision.discarded > 0 {
            tracing::debug!(
                actions = decision.discarded,
                "standby: actions left to the leader"
            );
        }
        for action in &decision.actions {
            decided(&self.metrics, action);
        }
    }

    fn absorbed(&mut self, report: &Report) {
        for line in &report.applied {
            tracing::info!(applied = %line, "applied");
        }
        for problem in &report.problems {
            self.metrics
                .apply_problems
                .get_or_create(&ProblemLabels {
                    kind: problem.kind.label().to_owned(),
                })
                .inc();
            tracing::warn!(problem = %problem, kind = problem.kind.label(), "apply failed; retried after a backoff");
        }
        for stale in &report.stale {
            self.metrics
                .apply_problems
                .get_or_create(&ProblemLabels {
                    kind: stale.kind.label().to_owned(),
                })
                .inc();
            tracing::info!(problem = %stale, kind = stale.kind.label(), "stale write; decided again from a fresh read");
        }
    }

    fn journal_failed(&mut self, error: JournalError) {
        tracing::error!(error = %error, "the journal cannot be written; it is closed, the controller goes on");
        self.metrics.journal_errors.inc();
    }

    fn leading(&mut self, leader: bool) {
        if leader {
            tracing::info!("leading: applying from now on");
        } else {
            tracing::warn!("not leading any more: applying stopped");
        }
        self.metrics.leader.set(i64::from(leader));
    }

    fn synced(&mut self, objects: usize) {
        tracing::info!(objects, "watchers synced");
        self.metrics.synced.set(1);
    }

    fn unsettled(&mut self) {
        tracing::warn!(
            rounds = ichor_controller_core::cycle::MAX_ROUNDS,
            "the graph did not settle; the next cycle goes on"
        );
    }
}

fn decided(metrics: &Metrics, action: &Action) {
    metrics.actions.get_or_create(&ActionLabels::of(action)).inc();
    tracing::info!(
        action = %action,
        reason = %action.reason(),
        detail = %describe(action).trim(),
        "decided"
    );
}
