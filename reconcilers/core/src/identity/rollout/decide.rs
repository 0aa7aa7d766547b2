//! The rollout's state machine: one operation and what the graph knows → a status write, one
//! effect, or nothing, with the instant the answer would change.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::de::DeserializeOwned;
use serde_json::Value;

use ichor_graph::{Desired, EffectRequest, Object, ObjectKey, Timed};
use ichor_renderers::cluster::AUTHENTICATION_DOCUMENT;
use ichor_renderers::crd::{
    MachineRole, NodeState, OperationKind, OperationNodeResult, OperationPhase, TalosMachine,
    TalosMachineSpec, TalosMachineStatus, TalosOperation, TalosOperationSpec, TalosOperationStatus,
};
use ichor_renderers::rollout::plan;

use super::{ApplyRequest, Observation, RolloutSettings, SETTINGS_KIND};
use crate::identity::nodes::ClusterAuth;

/// The inputs of one operation's decision, besides the operation itself.
pub(crate) type Inputs = (
    Timestamp,
    Option<Object>,
    Option<ClusterAuth>,
    BTreeMap<ObjectKey, Object>,
    BTreeMap<ObjectKey, Object>,
    Option<Object>,
);

/// What the decision amounts to.
pub(super) enum Next {
    Nothing,
    Status(TalosOperationStatus),
    Effect(Option<EffectRequest>),
}

fn decode<T: DeserializeOwned>(v: Option<&Value>) -> Option<T> {
    T::deserialize(v.unwrap_or(&Value::Null)).ok()
}

pub(super) fn rfc3339(s: Option<&str>) -> Option<Timestamp> {
    s.and_then(|s| s.parse().ok())
}

/// `https://<address>:<port>/readyz`, with an IPv6 address in brackets.
pub fn readyz_url(address: &str, port: u16) -> String {
    let host = match address.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(v6)) => format!("[{v6}]"),
        _ => address.to_ascii_lowercase(),
    };
    format!("https://{host}:{port}/readyz")
}

/// The family function: one operation → its next status write or effect.
pub(crate) fn rollout(key: &ObjectKey, operation: &Object, inputs: &Inputs) -> Timed<Desired> {
    // Ichor core's operations (no identity label) are never written or acted on.
    if !super::is_owned(operation) {
        return Timed::forever(Desired::default());
    }
    let (now, settings, cluster, machines, operations, observation) = inputs;
    let Some(settings) = settings
        .as_ref()
        .filter(|o| &*o.key().kind == SETTINGS_KIND)
        .and_then(|o| decode::<RolloutSettings>(o.value.get("spec")))
    else {
        return Timed::forever(Desired::default());
    };
    let Some(spec) = decode::<TalosOperationSpec>(operation.value.get("spec")) else {
        return Timed::forever(Desired::default());
    };
    if spec.kind != OperationKind::Config {
        return Timed::forever(Desired::default());
    }
    let mut op = TalosOperation::new(&key.name, spec);
    op.metadata.namespace = Some(key.namespace.to_string());
    op.metadata.resource_version = operation.resource_version.clone();
    op.status = decode(operation.value.get("status"));
    let observation = observation
        .as_ref()
        .and_then(|o| decode::<Observation>(Some(&o.value)));
    let ctx = Context {
        now: *now,
        settings,
        cluster: cluster.as_ref(),
        machines,
        operations,
        observation: observation.as_ref(),
    };
    let (next, deadline) = ctx.decide(&op);
    let desired = match next {
        Next::Nothing => Desired::default(),
        Next::Effect(effect) => Desired {
            objects: Vec::new(),
            effects: effect.into_iter().collect(),
        },
        Next::Status(status) => {
            let mut value = serde_json::Map::new();
            value.insert(
                "status".to_owned(),
                serde_json::to_value(status).unwrap_or(Value::Null),
            );
            Desired {
                objects: vec![Object::new(
                    "TalosOperation",
                    &*key.namespace,
                    &*key.name,
                    Value::Object(value),
                )],
                effects: Vec::new(),
            }
        }
    };
    Timed {
        value: desired,
        deadline,
    }
}

pub(super) struct Context<'a> {
    pub(super) now: Timestamp,
    pub(super) settings: RolloutSettings,
    pub(super) cluster: Option<&'a ClusterAuth>,
    pub(super) machines: &'a BTreeMap<ObjectKey, Object>,
    pub(super) operations: &'a BTreeMap<ObjectKey, Object>,
    pub(super) observation: Option<&'a Observation>,
}

pub(super) fn effect<T: serde::Serialize>(id: String, request: &T) -> Next {
    Next::Effect(EffectRequest::new(id, request).ok())
}

impl Context<'_> {
    /// When a step that began at `since` (as recorded in the status, or now when it was not)
    /// times out: `(start, start + step timeout)`.
    pub(super) fn step_deadline(&self, since: Option<&str>) -> (Timestamp, Timestamp) {
        let start = rfc3339(since).unwrap_or(self.now);
        (start, start + self.settings.step_timeout())
    }

    fn decide(&self, op: &TalosOperation) -> (Next, Option<Timestamp>) {
        let status = op.status.clone().unwrap_or_default();
        match status.phase {
            Some(OperationPhase::Succeeded | OperationPhase::Failed) => (Next::Nothing, None),
            None | Some(OperationPhase::Pending) => (self.start(op), None),
            Some(OperationPhase::Running | OperationPhase::Paused) => self.step(op, status),
        }
    }

    /// Writes `status` when it differs from what is observed.
    pub(super) fn write(op: &TalosOperation, status: TalosOperationStatus) -> Next {
        if op.status.as_ref() == Some(&status) {
            Next::Nothing
        } else {
            Next::Status(status)
        }
    }

    fn cluster_machines(&self, op: &TalosOperation) -> Vec<TalosMachine> {
        let namespace = op.metadata.namespace.as_deref().unwrap_or_default();
        self.machines
            .iter()
            .filter(|(k, _)| &*k.namespace == namespace)
            .filter_map(|(k, m)| {
                let spec: TalosMachineSpec = decode(m.value.get("spec"))?;
                (spec.cluster == op.spec.cluster).then(|| {
                    let mut tm = TalosMachine::new(&k.name, spec);
                    tm.metadata.namespace = Some(namespace.to_owned());
                    tm.status = decode::<TalosMachineStatus>(m.value.get("status"));
                    tm
                })
            })
            .collect()
    }

    /// Another operation of the same cluster that has started and not ended, owned or not: a
    /// rollout of Ichor core holds this one back too (one rollout of a cluster at a time).
    fn running_sibling(&self, op: &TalosOperation) -> Option<String> {
        let namespace = op.metadata.namespace.as_deref().unwrap_or_default();
        let name = op.metadata.name.as_deref().unwrap_or_default();
        self.operations
            .iter()
            .filter(|(k, _)| &*k.namespace == namespace && &*k.name != name)
            .find(|(_, o)| {
                let spec: Option<TalosOperationSpec> = decode(o.value.get("spec"));
                let status: Option<TalosOperationStatus> = decode(o.value.get("status"));
                spec.is_some_and(|s| s.kind == OperationKind::Config && s.cluster == op.spec.cluster)
                    && matches!(
                        status.and_then(|s| s.phase),
                        Some(OperationPhase::Running | OperationPhase::Paused)
                    )
            })
            .map(|(k, _)| k.name.to_string())
    }

    /// A pending operation: wait for a sibling, or plan and start.
    fn start(&self, op: &TalosOperation) -> Next {
        let cluster = &op.spec.cluster;
        let pending = |message: String| TalosOperationStatus {
            phase: Some(OperationPhase::Pending),
            message: Some(message),
            ..TalosOperationStatus::default()
        };
        let failed = |message: String| TalosOperationStatus {
            phase: Some(OperationPhase::Failed),
            message: Some(message),
            ..TalosOperationStatus::default()
        };
        if let Some(other) = self.running_sibling(op) {
            return Self::write(
                op,
                pending(format!(
                    "waiting for operation {other}, which is rolling cluster {cluster}: one rollout at a time"
                )),
            );
        }
        if op.spec.paused {
            return Self::write(
                op,
                TalosOperationStatus {
                    phase: Some(OperationPhase::Paused),
                    message: Some(
                        "paused (spec.paused) before its first node; set spec.paused to false to start"
                            .into(),
                    ),
                    ..TalosOperationStatus::default()
                },
            );
        }
        let Some(render) = self.cluster else {
            return Self::write(
                op,
                pending(format!(
                    "waiting for TalosCluster {cluster}, which does not exist"
                )),
            );
        };
        let (Some(sha), Some(_)) = (render.documents.get(AUTHENTICATION_DOCUMENT), &render.yaml) else {
            let why = render
                .error
                .clone()
                .unwrap_or_else(|| "no document was rendered".into());
            return Self::write(
                op,
                failed(format!(
                    "cluster {cluster} renders no {AUTHENTICATION_DOCUMENT}: {why}; nothing was applied"
                )),
            );
        };
        let machines = self.cluster_machines(op);
        // Every Talos cluster has a control plane: none known means its TalosMachines have not
        // been observed yet (their watch and the operations' are separate streams), not that
        // there is nothing to do. Succeeding here would end the operation with nothing applied.
        if !machines.iter().any(|m| m.spec.role == MachineRole::ControlPlane) {
            return Self::write(
                op,
                pending(format!(
                    "waiting for a control plane of cluster {cluster}: no TalosMachine of role \
                     controlplane names it yet"
                )),
            );
        }
        let plan = match plan(cluster, &machines, &render.documents) {
            Ok(p) => p,
            Err(e) => return Self::write(op, failed(format!("{e}; nothing was applied"))),
        };
        let steps: Vec<_> = plan
            .steps
            .iter()
            .filter(|s| op.spec.machines.is_empty() || op.spec.machines.contains(&s.machine))
            .collect();
        if steps.is_empty() {
            let status = TalosOperationStatus {
                phase: Some(OperationPhase::Succeeded),
                message: Some(format!(
                    "nothing to do: every control plane of {cluster} runs the rendered configuration"
                )),
                rendered_sha256: Some(sha.clone()),
                ..TalosOperationStatus::default()
            };
            return Self::write(op, status);
        }
        let total = steps.len();
        Self::write(
            op,
            TalosOperationStatus {
                phase: Some(OperationPhase::Running),
                current_step: Some(0),
                nodes: steps
                    .iter()
                    .map(|s| OperationNodeResult {
                        machine: s.machine.clone(),
                        state: NodeState::Pending.into(),
                        address: Some(s.address.clone()),
                        ..OperationNodeResult::default()
                    })
                    .collect(),
                message: Some(format!(
                    "restarting the API server of {total} control plane(s) of {cluster}, one at a time"
                )),
                rendered_sha256: Some(sha.clone()),
            },
        )
    }

    /// A running (or paused) operation: the node in progress decides.
    fn step(&self, op: &TalosOperation, status: TalosOperationStatus) -> (Next, Option<Timestamp>) {
        let Some(i) = status.nodes.iter().position(|n| n.state != NodeState::Done) else {
            let mut done = status.clone();
            done.phase = Some(OperationPhase::Succeeded);
            done.current_step = None;
            done.message = Some(format!(
                "every control plane of {} runs the rendered configuration",
                op.spec.cluster
            ));
            return (Self::write(op, done), None);
        };
        let node = &status.nodes[i];
        match node.node_state() {
            Some(NodeState::Pending) => (self.next_node(op, &status, i), None),
            Some(NodeState::Applying) => self.applying(op, &status, i),
            Some(NodeState::WaitingReady) => self.waiting(op, &status, i),
            Some(NodeState::RollingBack) => self.rolling_back(op, &status, i),
            Some(NodeState::RolledBack | NodeState::Failed) => {
                let message = node
                    .message
                    .clone()
                    .unwrap_or_else(|| format!("{} failed", node.machine));
                (Self::write(op, self.fail(&status, i, None, &message)), None)
            }
            Some(NodeState::Done) | None => {
                let message = format!("{}: unknown node state {:?}", node.machine, node.state);
                (
                    Self::write(op, self.fail(&status, i, Some(NodeState::Failed), &message)),
                    None,
                )
            }
        }
    }

    /// The operation failed at step `i`: its summary says what, and that no later node was
    /// touched.
    pub(super) fn fail(
        &self,
        status: &TalosOperationStatus,
        i: usize,
        node_state: Option<NodeState>,
        message: &str,
    ) -> TalosOperationStatus {
        let mut out = status.clone();
        let untouched: Vec<&str> = status.nodes[i + 1..].iter().map(|n| n.machine.as_str()).collect();
        if let Some(node) = out.nodes.get_mut(i) {
            if let Some(state) = node_state {
                node.set_state(state);
                node.finished_at = Some(self.now.to_string());
            }
            node.message.get_or_insert_with(|| message.to_owned());
        }
        out.phase = Some(OperationPhase::Failed);
        out.current_step = u32::try_from(i).ok();
        let untouched = if untouched.is_empty() {
            "no later control plane".to_owned()
        } else {
            untouched.join(", ")
        };
        out.message = Some(format!(
            "stopped at {}: {message}; not touched: {untouched}",
            status.nodes[i].machine
        ));
        out
    }

    /// Step `i` is next: start it, unless paused or the render moved on.
    fn next_node(&self, op: &TalosOperation, status: &TalosOperationStatus, i: usize) -> Next {
        let node = &status.nodes[i];
        let total = status.nodes.len();
        if op.spec.paused {
            let mut paused = status.clone();
            paused.phase = Some(OperationPhase::Paused);
            paused.current_step = u32::try_from(i).ok();
            paused.message = Some(format!(
                "paused (spec.paused) before {} ({} of {total}); set spec.paused to false to resume",
                node.machine,
                i + 1
            ));
            return Self::write(op, paused);
        }
        let render = self.cluster;
        let current = render.and_then(|r| r.documents.get(AUTHENTICATION_DOCUMENT));
        let (Some(render), Some(sha)) = (render, current) else {
            let why = format!(
                "cluster {} no longer renders a {AUTHENTICATION_DOCUMENT}",
                op.spec.cluster
            );
            return Self::write(op, self.fail(status, i, Some(NodeState::Failed), &why));
        };
        if status.rendered_sha256.as_deref() != Some(sha.as_str()) {
            let why = format!(
                "the rendered document changed during the rollout (sha256 {} → {}); start a new operation \
                 (ichor config apply --cluster {}) to roll the new one",
                short(status.rendered_sha256.as_deref().unwrap_or("none")),
                short(sha),
                op.spec.cluster
            );
            return Self::write(op, self.fail(status, i, Some(NodeState::Failed), &why));
        }
        if status.phase == Some(OperationPhase::Paused) || status.current_step != u32::try_from(i).ok() {
            let mut running = status.clone();
            running.phase = Some(OperationPhase::Running);
            running.current_step = u32::try_from(i).ok();
            running.message = Some(format!(
                "restarting the API server of {} ({} of {total})",
                node.machine,
                i + 1
            ));
            return Self::write(op, running);
        }
        self.apply_effect(op, status, i, render, sha)
    }

    fn apply_effect(
        &self,
        op: &TalosOperation,
        status: &TalosOperationStatus,
        i: usize,
        render: &ClusterAuth,
        sha: &str,
    ) -> Next {
        let node = &status.nodes[i];
        let machine = self
            .cluster_machines(op)
            .into_iter()
            .find(|m| m.metadata.name.as_deref() == Some(&node.machine));
        let Some(machine) = machine else {
            let why = format!("TalosMachine {} no longer exists", node.machine);
            return Self::write(op, self.fail(status, i, Some(NodeState::Failed), &why));
        };
        let adopting = machine
            .status
            .as_ref()
            .is_none_or(|s| !s.applied_document_hashes.contains_key(AUTHENTICATION_DOCUMENT));
        let request = ApplyRequest {
            namespace: op.metadata.namespace.clone().unwrap_or_default(),
            operation: op.metadata.name.clone().unwrap_or_default(),
            cluster: op.spec.cluster.clone(),
            step: i,
            machine: node.machine.clone(),
            address: node
                .address
                .clone()
                .unwrap_or_else(|| machine.spec.address.clone()),
            document: render.yaml.clone().unwrap_or_default(),
            sha256: sha.to_owned(),
            adopting,
            previous: node.previous_document.clone(),
            based_on_resource_version: op.metadata.resource_version.clone(),
        };
        effect(request.id(), &request)
    }

    /// Step `i` is `Applying`: the performer recorded the previous document and was applying
    /// when it last wrote. Re-apply (the same merge is harmless) until the step times out, then
    /// roll back.
    fn applying(
        &self,
        op: &TalosOperation,
        status: &TalosOperationStatus,
        i: usize,
    ) -> (Next, Option<Timestamp>) {
        let node = &status.nodes[i];
        let (_, timeout) = self.step_deadline(node.started_at.as_deref());
        if self.now >= timeout {
            let why = format!(
                "the apply did not complete within {}",
                super::seconds_text(self.settings.step_timeout())
            );
            return (self.rollback_or_fail(op, status, i, &why), None);
        }
        let render = self.cluster;
        let sha = status.rendered_sha256.clone().unwrap_or_default();
        match render {
            Some(render) if render.documents.get(AUTHENTICATION_DOCUMENT) == Some(&sha) => {
                (self.apply_effect(op, status, i, render, &sha), Some(timeout))
            }
            _ => (
                self.rollback_or_fail(op, status, i, "the rendered document changed during the apply"),
                None,
            ),
        }
    }
}

/// The first 12 hex digits of a sha256, for messages.
fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}
