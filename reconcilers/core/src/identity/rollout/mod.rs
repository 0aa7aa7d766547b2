//! The apiserver-restart rollout of a `TalosOperation` of kind `config`, decided in the graph
//! (seed 000, "Amendment: the apiserver restart rolls out one control plane at a time").
//!
//! One family instance per operation reads the operation, its cluster's render, the machines,
//! every operation (one runs per cluster), the settings, `now` and the latest `/readyz`
//! observation, and decides the next thing to do ([`decide`]): a write of the operation's
//! status, or one effect. The performers (in the cluster driver) do the I/O and record what they
//! did in the operation's status, so a new leader resumes from the object alone:
//!
//! | effect | the performer |
//! |---|---|
//! | `rollout-apply <ns>/<op> <step> <machine>` ([`ApplyRequest`]) | reads the node's machine configuration, records the document it replaces (`previousDocument`) and the node `Applying`, merges the rendered document, calls `ApplyConfiguration` with mode `NO_REBOOT`, then records `WaitingReady` with `appliedAt` and the machine's `appliedDocumentHashes` |
//! | `rollout-probe <ns>/<op> <step> <phase> <seq>` ([`ProbeRequest`]) | one `GET /readyz`, reported as the synthetic object [`OBSERVATION_KIND`] `<ns>/<op>` (journaled like every input) |
//! | `rollout-rollback <ns>/<op> <step> <machine>` ([`RollbackRequest`]) | re-applies the recorded previous document (or removes the rendered one where the node had none), records `RollingBack` with `rolledBackAt` and the machine's previous hash |
//!
//! Per node the state moves `Pending` → `Applying` → `WaitingReady` → `Done`; a node whose
//! `/readyz` does not come back within the step timeout is rolled back (`RollingBack` →
//! `RolledBack`) and the operation fails, touching no further node. A failure the performer
//! records (`Failed`) fails the operation. `spec.paused` holds the next node (a step in flight
//! finishes). The rendered document is fixed when the operation starts (`renderedSha256`): a
//! render that changes meanwhile fails the operation before its next node.
//!
//! Nothing is decided unless the controller pushed [`SETTINGS_KIND`] (the cluster controller
//! does; `ichor dev` and the simulation do not roll anything).
//!
//! Only the operations this subsystem owns are driven ([`is_owned`]): those labelled
//! [`MANAGED_BY_LABEL`]`=`[`IDENTITY_MANAGER`], which `ichor config apply` sets when it creates
//! one. Any other `config` operation is Ichor core's rollout of reboot-required changes: no
//! status write and no effect is ever decided for it, so it is never driven twice. It is still
//! read as a sibling, so an owned operation waits while core rolls the same cluster. The graph
//! attaches reasons to actions only, so an operation left alone leaves no line of its own in the
//! journal; the journal holds the operation as observed, labels included, and a replay decides
//! the same nothing from it.
//!
//! The cluster's Talos credentials are the Secret `<cluster>`[`TALOS_CREDENTIALS_SUFFIX`] in
//! the operation's namespace: key [`TALOSCONFIG_KEY`] (the talosconfig, `os:admin`) and
//! [`KUBE_CA_KEY`] (the Kubernetes CA that verifies each `/readyz`).

mod decide;
pub mod record;
mod wait;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::json;

use ichor_graph::{Object, ObjectKey};
use ichor_renderers::crd::PreviousDocument;
pub use ichor_renderers::crd::{IDENTITY_MANAGER, MANAGED_BY_LABEL};
use ichor_renderers::rollout::APISERVER_PORT;
use ichor_renderers::trust::NAMESPACE;

pub use decide::readyz_url;
pub(crate) use decide::rollout;
pub use ichor_renderers::crd::NodeState;

/// Kind of the synthetic object carrying the controller's rollout settings (never stored).
pub const SETTINGS_KIND: &str = "IchorRolloutSettings";
/// Its name, in `ichor-system`.
pub const SETTINGS_NAME: &str = "flags";
/// Kind of the synthetic object holding an operation's latest `/readyz` observation.
pub const OBSERVATION_KIND: &str = "ReadyzObservation";
/// The Talos credentials Secret of cluster `C` is `C` followed by this.
pub const TALOS_CREDENTIALS_SUFFIX: &str = "-talosconfig";
/// Key of the talosconfig in that Secret.
pub const TALOSCONFIG_KEY: &str = "talosconfig";
/// Key of the Kubernetes CA (PEM) in that Secret, which verifies `/readyz`.
pub const KUBE_CA_KEY: &str = "ca.crt";

/// The rollout's timing and the apiserver port, from the controller's flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutSettings {
    /// How long one node may take from its apply to `/readyz` back, before it is rolled back
    /// (and again for the rollback to bring it back), in seconds.
    pub step_timeout_secs: u64,
    /// A node whose `/readyz` stays ready this long after the apply is done (the restart was
    /// quicker than the probes, or the node already ran the document), in seconds.
    pub restart_grace_secs: u64,
    /// Time between two `/readyz` probes of a node, in milliseconds.
    pub poll_interval_millis: u64,
    /// The kube-apiserver port every `/readyz` is checked on.
    pub apiserver_port: u16,
    /// The step timeout in milliseconds, when it is not a whole number of seconds (the offline
    /// rollout's flags take e.g. `1500ms`); it then takes precedence over `stepTimeoutSecs`.
    /// Absent from what the controller writes, so its journals are unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_timeout_millis: Option<u64>,
    /// The restart grace in milliseconds, as [`RolloutSettings::step_timeout_millis`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_grace_millis: Option<u64>,
}

impl RolloutSettings {
    /// Settings with the step timeout and restart grace given to the millisecond: whole seconds
    /// are kept in the seconds fields alone (as the controller writes them), anything finer in
    /// the `*_millis` fields as well.
    pub fn with_durations(
        mut self,
        step_timeout: std::time::Duration,
        restart_grace: std::time::Duration,
    ) -> Self {
        let split = |d: std::time::Duration| {
            let millis = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
            (d.as_secs(), (millis % 1000 != 0).then_some(millis))
        };
        (self.step_timeout_secs, self.step_timeout_millis) = split(step_timeout);
        (self.restart_grace_secs, self.restart_grace_millis) = split(restart_grace);
        self
    }

    /// How long one node may take from its apply to `/readyz` back.
    pub fn step_timeout(&self) -> jiff::SignedDuration {
        duration(self.step_timeout_secs, self.step_timeout_millis)
    }

    /// How long `/readyz` must stay ready after an apply to count as restarted.
    pub fn restart_grace(&self) -> jiff::SignedDuration {
        duration(self.restart_grace_secs, self.restart_grace_millis)
    }
}

fn duration(secs: u64, millis: Option<u64>) -> jiff::SignedDuration {
    match millis {
        Some(ms) => jiff::SignedDuration::from_millis(i64::try_from(ms).unwrap_or(i64::MAX)),
        None => jiff::SignedDuration::from_secs(i64::try_from(secs).unwrap_or(i64::MAX)),
    }
}

/// A duration in messages: `300s` for whole seconds (as the controller has always written
/// them), `1.5s` otherwise.
pub(crate) fn seconds_text(d: jiff::SignedDuration) -> String {
    let millis = d.as_millis();
    if millis % 1000 == 0 {
        format!("{}s", millis / 1000)
    } else {
        let text = format!("{}.{:03}", millis / 1000, millis % 1000);
        format!("{}s", text.trim_end_matches('0'))
    }
}

impl Default for RolloutSettings {
    /// 5 minutes per node, 60 s of grace, a probe a second, port 6443 (as `ichor config apply`).
    fn default() -> Self {
        RolloutSettings {
            step_timeout_secs: 300,
            restart_grace_secs: 60,
            poll_interval_millis: 1000,
            apiserver_port: APISERVER_PORT,
            step_timeout_millis: None,
            restart_grace_millis: None,
        }
    }
}

/// The synthetic object carrying `settings` into the graph; the cluster controller pushes it
/// once at start, so a replay decides with the values it had.
pub fn settings_object(settings: &RolloutSettings) -> Object {
    Object::new(
        SETTINGS_KIND,
        NAMESPACE,
        SETTINGS_NAME,
        json!({ "spec": settings }),
    )
}

/// Which wait a probe serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbePhase {
    /// After the rendered document was applied.
    Apply,
    /// After the previous document was re-applied.
    Rollback,
}

impl ProbePhase {
    fn as_str(self) -> &'static str {
        match self {
            ProbePhase::Apply => "apply",
            ProbePhase::Rollback => "rollback",
        }
    }
}

/// Apply the rendered document to one control plane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyRequest {
    /// The operation's namespace.
    pub namespace: String,
    /// The operation.
    pub operation: String,
    /// The `TalosCluster` (same namespace), whose Talos credentials are used.
    pub cluster: String,
    /// The step (index in `status.nodes`).
    pub step: usize,
    /// The `TalosMachine`.
    pub machine: String,
    /// Its address (the Talos `node` target).
    pub address: String,
    /// The rendered document (YAML).
    pub document: String,
    /// Its sha256, recorded in the machine's `appliedDocumentHashes`.
    pub sha256: String,
    /// The node has no document applied by Ichor yet: a foreign non-empty `jwt` list in its
    /// current document is refused, not overwritten.
    pub adopting: bool,
    /// What an earlier attempt recorded as the node's previous document (kept, never read again
    /// from a node that may already run the new one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<PreviousDocument>,
    /// The operation's resourceVersion the decision was made from; the status writes are
    /// conditioned on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub based_on_resource_version: Option<String>,
}

impl ApplyRequest {
    /// `rollout-apply <ns>/<op> <step> <machine>`.
    pub fn id(&self) -> String {
        format!(
            "rollout-apply {}/{} {} {}",
            self.namespace, self.operation, self.step, self.machine
        )
    }
}

/// Re-apply the document a control plane ran before its step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RollbackRequest {
    /// The operation's namespace.
    pub namespace: String,
    /// The operation.
    pub operation: String,
    /// The `TalosCluster`.
    pub cluster: String,
    /// The step.
    pub step: usize,
    /// The `TalosMachine`.
    pub machine: String,
    /// Its address.
    pub address: String,
    /// The document to restore (`yaml` absent: remove the rendered one).
    pub previous: PreviousDocument,
    /// Why, in words (recorded in the node's message).
    pub reason: String,
    /// The operation's resourceVersion the decision was made from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub based_on_resource_version: Option<String>,
}

impl RollbackRequest {
    /// `rollout-rollback <ns>/<op> <step> <machine>`.
    pub fn id(&self) -> String {
        format!(
            "rollout-rollback {}/{} {} {}",
            self.namespace, self.operation, self.step, self.machine
        )
    }
}

/// One `GET /readyz` of a control plane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeRequest {
    /// The operation's namespace.
    pub namespace: String,
    /// The operation (names the observation object).
    pub operation: String,
    /// The `TalosCluster` (its Secret holds the CA that verifies `/readyz`).
    pub cluster: String,
    /// The step.
    pub step: usize,
    /// The `TalosMachine`.
    pub machine: String,
    /// Which wait.
    pub phase: ProbePhase,
    /// The URL.
    pub url: String,
    /// The sequence number the observation gets (one more than the latest observed).
    pub seq: u64,
    /// When the wait began (the apply, or the rollback): an observation since then that saw
    /// the API server not ready carries that forward.
    pub since: Timestamp,
}

impl ProbeRequest {
    /// `rollout-probe <ns>/<op> <step> <phase> <seq>`.
    pub fn id(&self) -> String {
        format!(
            "rollout-probe {}/{} {} {} {}",
            self.namespace,
            self.operation,
            self.step,
            self.phase.as_str(),
            self.seq
        )
    }
}

/// The latest `/readyz` observation of an operation (the value of its [`OBSERVATION_KIND`]
/// object).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Observation {
    /// The step probed.
    pub step: usize,
    /// Which wait.
    pub phase: ProbePhase,
    /// The machine.
    pub machine: String,
    /// Whether `/readyz` answered 200 `ok`.
    pub ready: bool,
    /// What it answered otherwise (status, body excerpt, or the connection error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// When the probe was answered.
    pub at: Timestamp,
    /// The probe's sequence number.
    pub seq: u64,
    /// Whether this probe, or one before it of the same wait, saw the API server not ready.
    #[serde(default)]
    pub saw_not_ready: bool,
}

/// The observation object for `operation` holding `observation`.
pub fn observation_object(namespace: &str, operation: &str, observation: &Observation) -> Object {
    Object::new(
        OBSERVATION_KIND,
        namespace,
        operation,
        serde_json::to_value(observation).unwrap_or_default(),
    )
}

/// The observation object of one `/readyz` answer to `request` at `at` (`detail`: what it
/// answered when not ready), carrying forward that the wait saw the API server down: from the
/// latest observation in `world` when it is of the same wait. Both sinks (the cluster and
/// `ichor config apply --dir`) record probes with it.
pub fn probe_observation(
    world: &ichor_graph::World,
    request: &ProbeRequest,
    detail: Option<String>,
    at: Timestamp,
) -> Object {
    let key = ObjectKey::new(
        OBSERVATION_KIND,
        request.namespace.as_str(),
        request.operation.as_str(),
    );
    let seen_down_before = world
        .get(&key)
        .and_then(|o| serde_json::from_value::<Observation>(o.value.clone()).ok())
        .is_some_and(|p| {
            p.step == request.step && p.phase == request.phase && p.at >= request.since && p.saw_not_ready
        });
    let ready = detail.is_none();
    let observation = Observation {
        step: request.step,
        phase: request.phase,
        machine: request.machine.clone(),
        ready,
        detail: detail.map(|d| d.chars().take(256).collect()),
        at,
        seq: request.seq,
        saw_not_ready: seen_down_before || !ready,
    };
    observation_object(&request.namespace, &request.operation, &observation)
}

/// The key of an operation's observation object.
pub(crate) fn observation_key(operation: &Object) -> Option<ObjectKey> {
    Some(ObjectKey::new(
        OBSERVATION_KIND,
        operation.namespace.clone(),
        operation.name.clone(),
    ))
}

/// Whether this controller drives `operation`: its `metadata.labels` hold
/// [`MANAGED_BY_LABEL`]`=`[`IDENTITY_MANAGER`]. With another manager the operation is left
/// alone; without the label it is Ichor core's too, unless [`started_before_the_label`].
pub fn is_owned(operation: &Object) -> bool {
    let manager = operation
        .value
        .get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(|l| l.get(MANAGED_BY_LABEL));
    match manager {
        Some(m) => m.as_str() == Some(IDENTITY_MANAGER),
        None => started_before_the_label(operation),
    }
}

/// An unlabelled operation whose status records a node's previous authentication document
/// (`previousDocument`, which only this controller writes): one this controller started before
/// its operations were labelled. It is driven to its end, so an upgrade does not leave it
/// half-rolled out and holding every later rollout of its cluster back.
fn started_before_the_label(operation: &Object) -> bool {
    operation
        .value
        .get("status")
        .and_then(|s| s.get("nodes"))
        .and_then(serde_json::Value::as_array)
        .is_some_and(|nodes| {
            nodes
                .iter()
                .any(|n| n.get("previousDocument").is_some_and(|d| !d.is_null()))
        })
}

/// The `TalosCluster` an operation acts on.
pub(crate) fn operation_cluster(operation: &Object) -> Option<ObjectKey> {
    let name = operation.value.get("spec")?.get("cluster")?.as_str()?;
    Some(ObjectKey::new("TalosCluster", operation.namespace.clone(), name))
}

#[cfg(test)]
mod tests;
