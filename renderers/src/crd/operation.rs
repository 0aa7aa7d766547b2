//! The parts of `TalosOperation` identity reads (admission) and writes (the `config` rollout).

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// The label naming the controller that drives a `TalosOperation`, and its value on the
/// operations this subsystem drives (the `config` operations `ichor config apply` creates).
/// Ichor core's controller and this subsystem's both read operations of kind `config`; the
/// label keeps them apart, so no rollout is ever driven twice. An operation without it is Ichor
/// core's and is never written by this subsystem's controller.
pub use crate::contract::{IDENTITY_MANAGER, MANAGED_BY_LABEL};

/// Whether an operation with these `metadata.labels` is this subsystem's to drive.
pub fn is_identity_operation(labels: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    labels
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .is_some_and(|v| v == IDENTITY_MANAGER)
}

/// A long-running operation on a cluster (identity's view).
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "ichor.maesh.dev",
    version = "v1alpha1",
    kind = "TalosOperation",
    plural = "talosoperations",
    namespaced,
    status = "TalosOperationStatus",
    derive = "PartialEq",
    doc = "A long-running operation on a cluster (identity's view: kind, action, pause, rollout progress)."
)]
#[serde(rename_all = "camelCase")]
pub struct TalosOperationSpec {
    /// The `TalosCluster` the operation acts on.
    #[schemars(length(max = 253))]
    pub cluster: String,
    /// The operation kind: `config`, `shutdown`, `ca-rotation`, `etcd-restore`, `node`,
    /// `upgrade`, `cni`, … (see [`OperationKind`]).
    pub kind: OperationKind,
    /// For kind `node`: `reset`, `shutdown` or `reboot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<NodeAction>,
    /// The machines the operation targets (empty: the kind decides).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machines: Vec<String>,
    /// A paused operation takes no further step.
    #[serde(default)]
    pub paused: bool,
}

/// The kind of an operation. Unknown kinds are kept as written (`Other`), so that a newer core
/// never fails identity's admission.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[serde(from = "String", into = "String")]
pub enum OperationKind {
    /// Apply rendered machine configuration (identity: the rolling apiserver restart).
    #[default]
    Config,
    /// Shut the cluster down (destructive).
    Shutdown,
    /// Rotate the cluster CAs (destructive).
    CaRotation,
    /// Restore etcd from a snapshot (destructive).
    EtcdRestore,
    /// A node action (reset and shutdown are destructive).
    Node,
    /// Any other kind (upgrades, CNI, service restarts, …).
    Other(String),
}

impl From<String> for OperationKind {
    fn from(s: String) -> Self {
        match s.as_str() {
            "config" => Self::Config,
            "shutdown" => Self::Shutdown,
            "ca-rotation" => Self::CaRotation,
            "etcd-restore" => Self::EtcdRestore,
            "node" => Self::Node,
            _ => Self::Other(s),
        }
    }
}

impl From<OperationKind> for String {
    fn from(k: OperationKind) -> Self {
        k.as_str().to_owned()
    }
}

impl OperationKind {
    /// The kind as written in the object.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Config => "config",
            Self::Shutdown => "shutdown",
            Self::CaRotation => "ca-rotation",
            Self::EtcdRestore => "etcd-restore",
            Self::Node => "node",
            Self::Other(s) => s,
        }
    }
}

impl schemars::JsonSchema for OperationKind {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "OperationKind".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "maxLength": 63})
    }
    fn inline_schema() -> bool {
        true
    }
}

/// The action of a `node` operation.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum NodeAction {
    /// Wipe and reset the node (destructive).
    Reset,
    /// Power the node off (destructive).
    Shutdown,
    /// Reboot the node.
    Reboot,
}

/// Progress of an operation.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TalosOperationStatus {
    /// Where the operation stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<OperationPhase>,
    /// Index (0-based) of the step in progress in `nodes`.
    // `uint32` is no format the apiserver knows (`kubectl apply` warns); the value is an integer
    // of at least 0, which `int64` holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "int64"))]
    pub current_step: Option<u32>,
    /// One entry per machine, in rollout order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<OperationNodeResult>,
    /// A human summary (the failure, or how to resume).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// For kind `config`: the sha256 (hex) of the rendered `KubeAuthenticationConfig` document
    /// this operation rolls, fixed when it starts. A render that changes during the rollout
    /// stops the operation rather than mixing two documents across the control planes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub rendered_sha256: Option<String>,
}

/// The rendered document a node ran before a rollout step replaced it. It holds no secret: a
/// `KubeAuthenticationConfig` carries issuer URLs, claim rules and public CA certificates.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PreviousDocument {
    /// The document as it stood in the node's machine configuration (YAML, one document);
    /// absent when the node had none, so a rollback removes the one the step added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 262144))]
    pub yaml: Option<String>,
    /// sha256 (hex) of `yaml`, as the machine's `appliedDocumentHashes` records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub sha256: Option<String>,
}

/// Where an operation stands.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperationPhase {
    /// Not started.
    Pending,
    /// Steps in progress.
    Running,
    /// Stopped by `spec.paused` or a failure; resumable.
    Paused,
    /// Every step done.
    Succeeded,
    /// Stopped on a failure.
    Failed,
}

/// Where one node of a `config` operation stands: the value of `status.nodes[].state`.
///
/// Per node the state moves `Pending` → `Applying` → `WaitingReady` → `Done`; a node whose
/// `/readyz` does not come back in time moves `RollingBack` → `RolledBack`; a refusal or a
/// failed recovery is `Failed`. The CRD keeps the field a plain string (Ichor core's
/// operations may hold states of their own), so the names are written and compared through
/// this enum and [`OperationNodeResult::node_state`], never spelled as literals.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeState {
    /// Not started.
    Pending,
    /// The previous document is recorded; the apply is under way (or was interrupted).
    Applying,
    /// Applied; waiting for its `/readyz` to go down and come back.
    WaitingReady,
    /// Applied and ready again.
    Done,
    /// `/readyz` did not come back in time; the previous document is being restored.
    RollingBack,
    /// Restored to its previous document and ready again.
    RolledBack,
    /// The step failed (a refusal, or no recovery).
    Failed,
}

impl NodeState {
    /// Every state, in the order a node moves through them.
    pub const ALL: [NodeState; 7] = [
        NodeState::Pending,
        NodeState::Applying,
        NodeState::WaitingReady,
        NodeState::Done,
        NodeState::RollingBack,
        NodeState::RolledBack,
        NodeState::Failed,
    ];

    /// The name as `status.nodes[].state` holds it.
    pub const fn as_str(self) -> &'static str {
        match self {
            NodeState::Pending => "Pending",
            NodeState::Applying => "Applying",
            NodeState::WaitingReady => "WaitingReady",
            NodeState::Done => "Done",
            NodeState::RollingBack => "RollingBack",
            NodeState::RolledBack => "RolledBack",
            NodeState::Failed => "Failed",
        }
    }

    /// The state named `name`; `None` for a name this subsystem does not write.
    pub fn parse(name: &str) -> Option<NodeState> {
        NodeState::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

impl std::fmt::Display for NodeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<NodeState> for String {
    fn from(state: NodeState) -> String {
        state.as_str().to_owned()
    }
}

impl PartialEq<NodeState> for String {
    fn eq(&self, other: &NodeState) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<NodeState> for &str {
    fn eq(&self, other: &NodeState) -> bool {
        *self == other.as_str()
    }
}

/// The result of one machine's step.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OperationNodeResult {
    /// The `TalosMachine` name.
    pub machine: String,
    /// `Pending`, `Applying`, `WaitingReady`, `Done`, `RollingBack`, `RolledBack` or `Failed`.
    // The names of `NodeState`; a string, so states of Ichor core's operations still decode.
    pub state: String,
    /// The machine's address when the step was planned (Talos API target and `/readyz` host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub address: Option<String>,
    /// When `ApplyConfiguration` returned for this node (RFC 3339); the `/readyz` wait and the
    /// step timeout count from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_at: Option<String>,
    /// Whether a `/readyz` probe saw the node's API server not ready since the apply (the
    /// restart was seen going down).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub saw_not_ready: bool,
    /// The document the node ran before this step, recorded before the apply so a rollback
    /// (or a new leader) can restore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_document: Option<PreviousDocument>,
    /// When the previous document was re-applied (RFC 3339), for a step that rolled back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back_at: Option<String>,
    /// Detail of a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the step started (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// When the step ended (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

impl OperationNodeResult {
    /// The node's state, `None` when `state` holds a name this subsystem does not write.
    pub fn node_state(&self) -> Option<NodeState> {
        NodeState::parse(&self.state)
    }

    /// Sets the node's state.
    pub fn set_state(&mut self, state: NodeState) {
        self.state = state.into();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_states_serialise_as_the_names_the_status_holds() {
        let names: Vec<&str> = NodeState::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            names,
            [
                "Pending",
                "Applying",
                "WaitingReady",
                "Done",
                "RollingBack",
                "RolledBack",
                "Failed"
            ]
        );
        for state in NodeState::ALL {
            assert_eq!(
                serde_json::to_value(state).ok(),
                Some(serde_json::Value::String(state.as_str().to_owned()))
            );
            assert_eq!(NodeState::parse(state.as_str()), Some(state));
            let mut node = OperationNodeResult::default();
            node.set_state(state);
            assert_eq!(node.state, state);
            assert_eq!(node.node_state(), Some(state));
        }
        assert_eq!(NodeState::parse("Rebooting"), None);
    }
}
