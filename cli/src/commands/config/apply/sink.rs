//! The file sink of the offline rollout: what the reconcile loop decides for `ichor config apply
//! --dir`, carried out against the operation record in `DIR/.ichor/operations/`, the machine
//! configurations read from `--machine-config-dir`, the nodes' Talos API and their `/readyz`.
//!
//! - A status write of the `TalosOperation` is saved to its record and fed back with a new
//!   resourceVersion; the node transitions it carries are printed (`[i/n] machine: …`).
//! - `rollout-apply`: connect, Talos `Version`, then the performer the controller uses too
//!   ([`ichor_talos::rollout::NodeSession`]) over the machine's configuration from
//!   `--machine-config-dir`: the document it ran is recorded (`Applying`, `previousDocument`)
//!   before anything is sent, the merged configuration is applied with `NO_REBOOT`, and the node
//!   is recorded `WaitingReady` with `appliedAt`.
//! - `rollout-rollback`: the node's configuration is read from the node, the recorded previous
//!   document put back and applied with `NO_REBOOT`; the node is recorded `RollingBack`.
//! - `rollout-probe`: one `GET /readyz` ([`ichor_talos::readyz`]), fed back as the graph's
//!   `ReadyzObservation`.
//!
//! Any failure of a step is recorded on its node as `Failed` (the operation then stops): offline
//! there is nobody to retry a node that cannot be reached. Everything else the graph decides
//! (the trust ConfigMap it would write, machine status, key material) is kept in memory only,
//! never written into the user's GitOps tree.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use async_trait::async_trait;
use ichor_controller_core::{
    cycle::{Apply, Report},
    identity::rollout::{
        ApplyRequest, IDENTITY_MANAGER, MANAGED_BY_LABEL, ProbePhase, ProbeRequest, RollbackRequest,
        probe_observation, readyz_url, record,
    },
    memory::{ResourceVersions, applied},
    problem::{Problem, ProblemKind},
};
use ichor_graph::{Action, EffectRequest, Event, Object, World};
use ichor_renderers::{
    authn::talos::{TALOS_KIND, document_sha256},
    crd::{NodeState, OperationNodeResult, OperationPhase, TalosOperation, TalosOperationStatus},
};
use ichor_talos::{
    readyz::{Observation as Probe, ReadyzProbe},
    rollout::{self as step, NodeSession, Sent},
    talosconfig::TalosContext,
};
use serde_json::{Value, json};

use super::super::store::{FileOperationStore, OperationStore};

/// A duration for people: `2.5s`, `5m00s`.
pub(super) fn human(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs >= 60.0 {
        let whole = d.as_secs();
        format!("{}m{:02}s", whole / 60, whole % 60)
    } else {
        format!("{secs:.1}s")
    }
}

/// The operation record as the graph observes it: labelled as this subsystem's (the graph drives
/// only those), with `resource_version`.
pub(super) fn operation_object(op: &TalosOperation, resource_version: u64) -> Object {
    let mut value = serde_json::to_value(op).unwrap_or(Value::Null);
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        let labels = meta.entry("labels").or_insert_with(|| json!({}));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert(MANAGED_BY_LABEL.to_owned(), json!(IDENTITY_MANAGER));
        }
    }
    let mut object = Object::new(
        "TalosOperation",
        op.metadata.namespace.as_deref().unwrap_or_default(),
        op.metadata.name.as_deref().unwrap_or_default(),
        value,
    );
    object.resource_version = Some(resource_version.to_string());
    object
}

/// What a step's failure comes to: recorded on the node, or the write of that record failing.
type StepResult = Result<Vec<Event>, String>;

/// The offline rollout's sink (see the module documentation).
pub(super) struct FileSink<'a> {
    pub(super) store: &'a FileOperationStore,
    pub(super) talos: &'a TalosContext,
    pub(super) probe: &'a ReadyzProbe,
    /// Each machine's configuration from `--machine-config-dir`, as read by the preflight.
    pub(super) configs: BTreeMap<String, String>,
    /// How long one Talos call may take (`--node-timeout`).
    pub(super) call_timeout: Duration,
    /// `--apiserver-port`, for the progress line naming the `/readyz` URL.
    pub(super) apiserver_port: u16,
    /// `--restart-grace`, for the progress line of a node that stayed ready.
    pub(super) restart_grace: Duration,
    /// The record as last written.
    pub(super) op: TalosOperation,
    /// Its resourceVersion.
    pub(super) version: u64,
    /// Versions of the objects kept in memory.
    pub(super) versions: ResourceVersions,
    /// When each step began and was applied (for the progress lines).
    pub(super) started: BTreeMap<usize, Instant>,
    pub(super) applied_at: BTreeMap<usize, Instant>,
    /// The latest `/readyz` answer printed, per step.
    pub(super) last_answer: BTreeMap<usize, Probe>,
    /// Why the record could not be written (the run stops: its progress would be lost).
    pub(super) unwritable: Option<String>,
    /// The steps whose previous document this process read and recorded itself: the only ones
    /// it rolls back (a record in the manifests tree is not trusted to say what a node ran).
    pub(super) previous_read: BTreeSet<usize>,
}

impl FileSink<'_> {
    fn status(&self) -> TalosOperationStatus {
        self.op.status.clone().unwrap_or_default()
    }

    /// One progress line; `message` may quote a node (its version, its warnings), so its control
    /// characters are escaped.
    fn say(&self, step: usize, message: &str) {
        let total = self.status().nodes.len();
        let machine = self
            .status()
            .nodes
            .get(step)
            .map(|n| n.machine.clone())
            .unwrap_or_default();
        let message = crate::terminal::escape_controls(message);
        eprintln!("[{}/{total}] {machine}: {message}", step + 1);
    }

    /// Saves `status` to the record; the operation as the graph now observes it.
    fn save(&mut self, status: TalosOperationStatus) -> Result<Event, String> {
        let before = self.status();
        self.op.status = Some(status);
        if let Err(e) = self.store.save(&self.op) {
            let e = e.to_string();
            self.unwritable = Some(e.clone());
            return Err(e);
        }
        self.version += 1;
        self.report_transitions(&before);
        Ok(Event::Applied(operation_object(&self.op, self.version)))
    }

    /// Prints what changed between `before` and the record now.
    fn report_transitions(&mut self, before: &TalosOperationStatus) {
        let now = self.status();
        for (i, node) in now.nodes.iter().enumerate() {
            let was = before.nodes.get(i).and_then(OperationNodeResult::node_state);
            let is = node.node_state();
            if was == is {
                continue;
            }
            match is {
                Some(NodeState::Applying) => {
                    self.started.entry(i).or_insert_with(Instant::now);
                }
                Some(NodeState::Done) => {
                    if node.saw_not_ready {
                        self.say(i, "the API server restarted and is ready");
                    } else {
                        self.say(
                            i,
                            &format!(
                                "/readyz stayed ready for {}: no restart was seen (quicker than the probe \
                                 interval, or the node already ran this configuration)",
                                human(self.restart_grace)
                            ),
                        );
                    }
                    let took = self.started.get(&i).map(Instant::elapsed).unwrap_or_default();
                    self.say(i, &format!("done in {}", human(took)));
                }
                Some(NodeState::RolledBack) => self.say(i, "/readyz ready again after the rollback"),
                Some(NodeState::Failed) => {}
                _ => {}
            }
        }
    }

    /// Records step `step` as `Failed` with `message`.
    fn refuse(&mut self, step: usize, message: String) -> StepResult {
        let mut status = self.status();
        record::refused(&mut status, step, message, jiff::Timestamp::now());
        Ok(vec![self.save(status)?])
    }

    /// The machine with its applied hash set to `sha` (kept in memory, as the GitOps tree is not
    /// written).
    fn machine_hash(&mut self, world: &World, namespace: &str, machine: &str, sha: Option<&str>) -> Event {
        let hashes: BTreeMap<&str, &str> = sha.map(|s| (TALOS_KIND, s)).into_iter().collect();
        let desired = Object::new(
            "TalosMachine",
            namespace,
            machine,
            json!({"status": {"appliedDocumentHashes": hashes}}),
        );
        self.versions.stamp(Event::Applied(applied(world, &desired)))
    }

    async fn rollout_apply(&mut self, world: &World, r: &ApplyRequest) -> StepResult {
        let state = self
            .status()
            .nodes
            .get(r.step)
            .and_then(OperationNodeResult::node_state);
        if !matches!(state, Some(NodeState::Pending | NodeState::Applying)) {
            return Ok(vec![Event::Applied(operation_object(&self.op, self.version))]);
        }
        self.started.insert(r.step, Instant::now());
        match self.apply_step(world, r).await {
            Ok(events) => Ok(events),
            Err(message) => self.refuse(r.step, message),
        }
    }

    async fn apply_step(&mut self, world: &World, r: &ApplyRequest) -> StepResult {
        let (mut client, endpoint) = step::connect(self.talos, &r.address, self.call_timeout)
            .await
            .map_err(|e| e.to_string())?;
        let version = client.version(&r.address).await.map_err(|e| e.to_string())?;
        self.say(
            r.step,
            &format!("Talos {version} (via {endpoint}); applying the configuration, mode NO_REBOOT"),
        );
        let config = self.configs.get(&r.machine).cloned().ok_or_else(|| {
            format!(
                "no machine configuration of {} was read from --machine-config-dir",
                r.machine
            )
        })?;
        let mut session = NodeSession::with_config(client, &r.address, &r.machine, config);
        let mut plan = session
            .plan_apply(TALOS_KIND, &r.document, &r.sha256, r.adopting, document_sha256)
            .map_err(|e| e.to_string())?;
        // The configuration comes from --machine-config-dir, not from the node: that the file
        // already holds the rendered document says nothing of what the node runs, so the
        // configuration is always sent (ApplyConfiguration of an unchanged configuration is a
        // no-op on the node).
        plan.already_running = false;
        let mut events = Vec::new();
        if r.previous.is_none() {
            self.previous_read.insert(r.step);
            let mut status = self.status();
            record::applying(
                &mut status,
                r.step,
                plan.running.clone(),
                document_sha256,
                jiff::Timestamp::now(),
            );
            events.push(self.save(status)?);
        }
        let message = match session.apply(plan).await.map_err(|e| e.to_string())? {
            Sent::AlreadyRunning => {
                self.say(
                    r.step,
                    "its configuration already holds the rendered document; not applied again",
                );
                "the node already runs the rendered document (not applied again); waiting for /readyz"
                    .to_owned()
            }
            Sent::Applied(outcome) => {
                self.say(r.step, &format!("applied: {}", outcome.details));
                for w in &outcome.warnings {
                    self.say(r.step, &format!("warning from Talos: {w}"));
                }
                format!("applied ({}); waiting for /readyz", outcome.details)
            }
        };
        self.applied_at.insert(r.step, Instant::now());
        events.push(self.machine_hash(world, &r.namespace, &r.machine, Some(&r.sha256)));
        let mut status = self.status();
        record::waiting_ready(&mut status, r.step, message, jiff::Timestamp::now());
        events.push(self.save(status)?);
        self.say(
            r.step,
            &format!(
                "waiting for {} to go down and come back (or stay ready for {})",
                readyz_url(&r.address, self.apiserver_port),
                human(self.restart_grace)
            ),
        );
        Ok(events)
    }

    async fn rollout_rollback(&mut self, world: &World, r: &RollbackRequest) -> StepResult {
        let state = self
            .status()
            .nodes
            .get(r.step)
            .and_then(OperationNodeResult::node_state);
        if !matches!(state, Some(NodeState::Applying | NodeState::WaitingReady)) {
            return Ok(vec![Event::Applied(operation_object(&self.op, self.version))]);
        }
        self.say(
            r.step,
            &format!(
                "{} (--node-timeout); rolling back to the document it ran before",
                r.reason
            ),
        );
        if !self.previous_read.contains(&r.step) {
            let message = format!(
                "{}; not rolled back: the document this node ran before was not read by this run, so \
                 restore it by hand (the operation record is not trusted to say what it was)",
                r.reason
            );
            return self.refuse(r.step, message);
        }
        let result: StepResult = async {
            let mut session = NodeSession::open(self.talos, &r.address, &r.machine, self.call_timeout)
                .await
                .map_err(|e| e.to_string())?;
            let plan = session
                .plan_rollback(
                    TALOS_KIND,
                    r.previous.yaml.as_deref(),
                    r.previous.sha256.as_deref(),
                    document_sha256,
                )
                .map_err(|e| e.to_string())?;
            match session.rollback(plan).await.map_err(|e| e.to_string())? {
                Sent::Applied(outcome) => self.say(r.step, &format!("rolled back: {}", outcome.details)),
                Sent::AlreadyRunning => self.say(
                    r.step,
                    "the node already runs its previous document; not applied again",
                ),
            }
            let machine = self.machine_hash(world, &r.namespace, &r.machine, r.previous.sha256.as_deref());
            let mut status = self.status();
            record::rolling_back(&mut status, r.step, &r.reason, jiff::Timestamp::now());
            Ok(vec![machine, self.save(status)?])
        }
        .await;
        match result {
            Ok(events) => Ok(events),
            Err(message) => {
                let message = format!("{}; the rollback failed too: {message}", r.reason);
                self.refuse(r.step, message)
            }
        }
    }

    async fn rollout_probe(&mut self, world: &World, r: &ProbeRequest) -> Event {
        let answer = self.probe.check(&r.url).await;
        if r.phase == ProbePhase::Apply && self.last_answer.get(&r.step) != Some(&answer) {
            let since = self
                .applied_at
                .get(&r.step)
                .map(Instant::elapsed)
                .unwrap_or_default();
            match &answer {
                Probe::Ready => self.say(
                    r.step,
                    &format!("/readyz ready ({} after the apply)", human(since)),
                ),
                Probe::NotReady(why) => self.say(
                    r.step,
                    &format!("/readyz not ready: {why} ({} after the apply)", human(since)),
                ),
            }
            self.last_answer.insert(r.step, answer.clone());
        }
        let detail = match answer {
            Probe::Ready => None,
            Probe::NotReady(why) => Some(why),
        };
        Event::Applied(probe_observation(world, r, detail, jiff::Timestamp::now()))
    }

    /// One rollout effect; other effects (key material, certificates) are not performed
    /// offline.
    async fn effect(&mut self, world: &World, request: &EffectRequest) -> Option<StepResult> {
        let id = request.id.as_str();
        let bad = |e: serde_json::Error| Err(format!("{id}: {e}"));
        Some(if id.starts_with("rollout-probe ") {
            match serde_json::from_value::<ProbeRequest>(request.request.clone()) {
                Ok(r) => Ok(vec![self.rollout_probe(world, &r).await]),
                Err(e) => bad(e),
            }
        } else if id.starts_with("rollout-apply ") {
            match serde_json::from_value::<ApplyRequest>(request.request.clone()) {
                Ok(r) => self.rollout_apply(world, &r).await,
                Err(e) => bad(e),
            }
        } else if id.starts_with("rollout-rollback ") {
            match serde_json::from_value::<RollbackRequest>(request.request.clone()) {
                Ok(r) => self.rollout_rollback(world, &r).await,
                Err(e) => bad(e),
            }
        } else {
            return None;
        })
    }
}

#[async_trait]
impl Apply for FileSink<'_> {
    async fn apply(&mut self, world: &World, actions: &[Action]) -> Report {
        let mut report = Report::default();
        for action in actions {
            match action {
                Action::Apply { object, .. } if &*object.kind == "TalosOperation" => {
                    let status = object
                        .value
                        .get("status")
                        .cloned()
                        .and_then(|s| serde_json::from_value::<TalosOperationStatus>(s).ok());
                    match status.map(|s| self.save(s)) {
                        Some(Ok(event)) => report.events.push(event),
                        Some(Err(e)) => report.problems.push(Problem::new(ProblemKind::Other, e)),
                        None => report.problems.push(Problem::new(
                            ProblemKind::Other,
                            format!("{action}: the status does not decode"),
                        )),
                    }
                }
                Action::Apply { object, .. } => {
                    let object = applied(world, object);
                    report.events.push(self.versions.stamp(Event::Applied(object)));
                }
                Action::Delete { key, .. } => report.events.push(Event::Deleted(key.clone())),
                Action::Effect { request, .. } => match self.effect(world, request).await {
                    Some(Ok(events)) => report.events.extend(events),
                    Some(Err(e)) => report
                        .problems
                        .push(Problem::new(ProblemKind::Effect, format!("{}: {e}", request.id))),
                    None => continue,
                },
            }
            report.applied.push(action.to_string());
        }
        report
    }
}

/// Whether the operation has ended.
pub(super) fn ended(op: &TalosOperation) -> bool {
    matches!(
        op.status.as_ref().and_then(|s| s.phase),
        Some(OperationPhase::Succeeded | OperationPhase::Failed)
    )
}
