//! Operations: the Prometheus metrics of the loop and the plain-HTTP endpoints `/metrics`,
//! `/healthz` and `/readyz` (the shared router of `ichor-server`, on `--metrics-listen`).
//!
//! `/healthz` answers 200 while the process serves; `/readyz` answers 200 once every watcher's
//! initial list is folded, and stays 200 on a standby and after a lost lease: every replica
//! serves the admission webhooks, so readiness never depends on leadership.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use ichor_graph::{Action, Cause, Event};
use ichor_renderers::trust::tls::CertFacts;
use ichor_server::health::{Exposition, Readiness};
use ichor_server::metrics::ReloadStatus;

use super::watch::SyncState;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The labels of `ichor_controller_actions_total`: what was decided, on which kind, by which
/// node and why (bounded: node names and causes are a fixed set).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabels {
    /// `apply`, `delete` or `effect`.
    pub action: String,
    /// The object kind, or the effect's first word (`issue-leaf`, `generate-rsa-key`, …).
    pub kind: String,
    /// The graph node that decided it (`orphan` for owned objects no node desires).
    pub node: String,
    /// The cause: `initial`, `inputs-changed`, `removed`, `drift` or `orphan`.
    pub cause: String,
}

impl ActionLabels {
    /// The labels of one action.
    pub fn of(action: &Action) -> Self {
        let (verb, kind) = match action {
            Action::Apply { object, .. } => ("apply", object.kind.clone()),
            Action::Delete { key, .. } => ("delete", key.kind.to_string()),
            Action::Effect { request, .. } => (
                "effect",
                request
                    .id
                    .split_whitespace()
                    .next()
                    .unwrap_or("unknown")
                    .to_owned(),
            ),
        };
        let reason = action.reason();
        let cause = match reason.cause {
            Cause::Initial => "initial",
            Cause::InputsChanged(_) => "inputs-changed",
            Cause::Removed => "removed",
            Cause::Drift => "drift",
            Cause::Orphan => "orphan",
        };
        ActionLabels {
            action: verb.to_owned(),
            kind,
            node: reason.node.clone().unwrap_or_else(|| "orphan".to_owned()),
            cause: cause.to_owned(),
        }
    }
}

/// The label of `ichor_controller_events_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    /// `applied`, `deleted` or `tick`.
    pub r#type: String,
}

/// The label of `ichor_controller_apply_problems_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProblemLabels {
    /// `conflict`, `forbidden`, `invalid`, `unavailable`, `effect` or `other`.
    pub kind: String,
}

/// The labels of `ichor_controller_admission_seconds`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AdmissionLabels {
    /// `ichorusers`, `talosclusters` or `talosoperations`.
    pub webhook: String,
    /// `true` or `false`.
    pub allowed: String,
}

/// The loop's metric handles (cheap clones sharing the same counters).
#[derive(Clone, Debug)]
pub struct Metrics {
    /// Graph evaluations.
    pub reconciles: Counter,
    /// Actions decided by the leader, by action, kind, node and cause.
    pub actions: Family<ActionLabels, Counter>,
    /// Events folded into the World, by type.
    pub events: Family<EventLabels, Counter>,
    /// Graph evaluation wall time, seconds.
    pub evaluation_seconds: Histogram,
    /// Problems reported by the applier (failed writes or effects), by kind.
    pub apply_problems: Family<ProblemLabels, Counter>,
    /// Node instances that failed in an evaluation.
    pub node_failures: Counter,
    /// Journal writes that failed (the journal is then closed; the controller goes on).
    pub journal_errors: Counter,
    /// 1 while this replica holds the Lease and applies, else 0.
    pub leader: Gauge,
    /// 1 once every watcher's initial list is folded.
    pub synced: Gauge,
    /// Objects in the World.
    pub world_objects: Gauge,
    /// notAfter of the issuer's leaf (`ichor-oidc-tls`), Unix seconds; 0 when absent or
    /// unreadable.
    pub issuer_certificate_expiry: Gauge,
    /// Admission decisions and their latency, by webhook and answer.
    pub admission_seconds: Family<AdmissionLabels, Histogram>,
}

fn admission_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 4.0, 9))
}

impl crate::admission::AdmissionObserver for Metrics {
    fn decided(&self, webhook: &'static str, allowed: bool, elapsed: std::time::Duration) {
        self.admission_seconds
            .get_or_create(&AdmissionLabels {
                webhook: webhook.to_owned(),
                allowed: allowed.to_string(),
            })
            .observe(elapsed.as_secs_f64());
    }
}

impl Metrics {
    /// The metrics and the registry that exposes them.
    pub fn new() -> (Self, Registry) {
        let metrics = Metrics {
            reconciles: Counter::default(),
            actions: Family::default(),
            events: Family::default(),
            // 100 µs to ~26 s.
            evaluation_seconds: Histogram::new(exponential_buckets(0.0001, 4.0, 10)),
            apply_problems: Family::default(),
            node_failures: Counter::default(),
            journal_errors: Counter::default(),
            leader: Gauge::default(),
            synced: Gauge::default(),
            world_objects: Gauge::default(),
            issuer_certificate_expiry: Gauge::default(),
            // 100 µs to ~6.5 s (the apiserver gives up after 5 s).
            admission_seconds: Family::new_with_constructor(admission_histogram),
        };
        let mut r = Registry::with_prefix("ichor_controller");
        r.register("reconciles", "Graph evaluations", metrics.reconciles.clone());
        r.register(
            "actions",
            "Actions decided by the leader, by action, kind, node and cause",
            metrics.actions.clone(),
        );
        r.register("events", "Events folded into the World", metrics.events.clone());
        r.register(
            "graph_evaluation_seconds",
            "Graph evaluation wall time",
            metrics.evaluation_seconds.clone(),
        );
        r.register(
            "apply_problems",
            "Problems reported by the applier, by kind (conflict, forbidden, invalid, unavailable, effect, other)",
            metrics.apply_problems.clone(),
        );
        r.register(
            "node_failures",
            "Node instances that failed in an evaluation",
            metrics.node_failures.clone(),
        );
        r.register(
            "journal_errors",
            "Journal writes that failed",
            metrics.journal_errors.clone(),
        );
        r.register(
            "leader",
            "1 while this replica holds the Lease and applies",
            metrics.leader.clone(),
        );
        r.register(
            "watchers_synced",
            "1 once every watcher's initial list is folded",
            metrics.synced.clone(),
        );
        r.register(
            "world_objects",
            "Objects in the World",
            metrics.world_objects.clone(),
        );
        r.register(
            "issuer_certificate_expiry_timestamp_seconds",
            "notAfter of the issuer leaf certificate (ichor-oidc-tls), Unix seconds; 0 when absent",
            metrics.issuer_certificate_expiry.clone(),
        );
        r.register(
            "admission_seconds",
            "Admission decisions and their latency, by webhook and answer",
            metrics.admission_seconds.clone(),
        );
        (metrics, r)
    }

    /// Counts one folded event.
    pub fn event(&self, event: &Event) {
        self.events
            .get_or_create(&EventLabels {
                r#type: event.kind_name().to_owned(),
            })
            .inc();
    }
}

/// The notAfter (Unix seconds) of the leaf in a `kubernetes.io/tls` Secret's JSON (`data` in
/// base64, as the API serves it), `None` when absent or unreadable.
pub fn certificate_expiry(secret: &serde_json::Value) -> Option<i64> {
    use base64::Engine as _;
    let b64 = secret.get("data")?.get("tls.crt")?.as_str()?;
    let pem = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    let text = std::str::from_utf8(&pem).ok()?;
    CertFacts::from_pem(text, "tls.crt of ichor-oidc-tls")
        .ok()
        .map(|f| f.not_after.as_second())
}

/// Readiness: set once every watcher's initial list is folded; until then, the inputs the
/// cluster does not serve (from the watchers' [`SyncState`]) are the reasons `/readyz` gives.
#[derive(Debug, Default)]
pub struct Health {
    ready: AtomicBool,
    sync: Option<Arc<SyncState>>,
}

impl Health {
    /// Readiness that, while not ready, names the inputs `sync`'s watchers found not served.
    pub fn watching(sync: Arc<SyncState>) -> Self {
        Health {
            ready: AtomicBool::new(false),
            sync: Some(sync),
        }
    }

    /// Why the controller is not ready, as far as known: one sentence per input the cluster
    /// does not serve.
    pub fn reasons(&self) -> Vec<String> {
        self.sync.as_ref().map(|s| s.not_served()).unwrap_or_default()
    }

    /// Marks the controller ready (watchers synced).
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }

    /// Whether `/readyz` answers 200.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }
}

/// The router of `/metrics`, `/healthz` and `/readyz`: the shared one, ready once every
/// watcher's initial list is folded (`waitingFor: ["watchers"]` until then, with `reasons`
/// naming each required Ichor kind the cluster does not serve) and, when given, once the
/// webhooks' serving certificate is loaded (the Service sends webhook calls to ready replicas
/// only; one without a certificate fails every handshake).
pub fn router(
    registry: Arc<Registry>,
    health: Arc<Health>,
    webhook_certificate: Option<Arc<dyn ReloadStatus>>,
) -> Router {
    let mut readiness = Readiness::new().require_explained("watchers", move || {
        if health.is_ready() {
            return Ok(());
        }
        let reasons = health.reasons();
        if reasons.is_empty() {
            Err(None)
        } else {
            Err(Some(format!("not ready: {}", reasons.join("; "))))
        }
    });
    if let Some(certificate) = webhook_certificate {
        readiness = readiness.require_loaded(certificate);
    }
    ichor_server::health::router(Arc::new(readiness), registry)
}

/// The registry in the OpenMetrics text format.
///
/// # Errors
/// A metric could not be encoded.
pub fn encode(registry: &Registry) -> Result<String, std::fmt::Error> {
    Exposition::render(registry)
}
