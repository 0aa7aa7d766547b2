//! The rollout's effects (`ichor_controller_core::identity::rollout`): the Talos machine API calls of
//! one control plane's step and the `/readyz` probes, each recorded where the graph reads it.
//!
//! - `rollout-apply`: the node's machine configuration is read (COSI `MachineConfig`), the
//!   document it runs is recorded as `previousDocument` with the node `Applying` (a status write
//!   conditioned on the operation's resourceVersion, before anything is sent to the node), the
//!   rendered document is merged in (a foreign `jwt` list on a node being adopted is refused),
//!   `ApplyConfiguration` with mode `NO_REBOOT` is called, then the node is recorded
//!   `WaitingReady` with `appliedAt`, and the machine's `appliedDocumentHashes` gets the new
//!   hash (field manager [`APPLIED_HASHES_MANAGER`], so the graph's own status writes never
//!   remove it).
//! - `rollout-rollback`: the recorded previous document is put back (or the rendered one
//!   removed), applied with `NO_REBOOT`, and the node recorded `RollingBack` with
//!   `rolledBackAt`; the machine's hash goes back with it.
//! - `rollout-probe`: one `GET /readyz`, returned as the synthetic `ReadyzObservation` event.
//!
//! An apply or rollback is sent only to a node that does not already run its document: when an
//! earlier attempt's call went through and only the status write after it was lost (on a
//! self-hosted control plane the apply restarts the very API server that write goes to), the
//! retry records the step without restarting the API server a second time.
//!
//! A refusal (by the node, the merge, missing credentials, or a talosconfig that holds other
//! clusters' contexts too) is recorded on the node as `Failed` with its message, and the graph
//! fails the operation. A transport failure (the node or the API server unreachable for a
//! moment) is a problem: the loop retries after its back-off, and the graph's step timeout bounds
//! how long.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ichor_graph::{EffectRequest, Event, Object, ObjectKey, World};
use ichor_renderers::authn::talos::{TALOS_KIND, document_sha256};
use ichor_renderers::crd::{NodeState, OperationNodeResult, TalosOperationStatus};
use ichor_talos::readyz::{Observation as Probe, ReadyzProbe};
use ichor_talos::rollout::{NodeSession, Sent, StepError as TalosStepError};
use ichor_talos::talosconfig::{self, TalosContext};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use ichor_controller_core::identity::rollout::{
    ApplyRequest, KUBE_CA_KEY, ProbeRequest, RollbackRequest, TALOS_CREDENTIALS_SUFFIX, TALOSCONFIG_KEY,
    probe_observation, record,
};
use ichor_controller_core::problem::{Problem, ProblemKind};

use super::error::{ApplyError, classify, to_value};
use super::resources::{observed, resource_for};
use super::{ApplyReport, FIELD_MANAGER, KubeApplier, Written, stale_problem};

/// The field manager of the machines' `appliedDocumentHashes` entries this controller writes.
pub use ichor_renderers::contract::ROLLOUT_FIELD_MANAGER as APPLIED_HASHES_MANAGER;
/// How long one Talos call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one `/readyz` probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What one rollout effect came to (as [`Written`], with every object it wrote).
enum Outcome {
    /// Done: the objects as written (and the observation).
    Done(Vec<Event>),
    /// A write was refused as stale: what was read again.
    Stale(Vec<Event>),
}

impl Outcome {
    /// This outcome with one more object written (the machine's applied hash).
    fn and(self, event: Event) -> Self {
        match self {
            Outcome::Done(mut e) => {
                e.push(event);
                Outcome::Done(e)
            }
            Outcome::Stale(mut e) => {
                e.push(event);
                Outcome::Stale(e)
            }
        }
    }
}

impl From<Written> for Outcome {
    fn from(w: Written) -> Self {
        match w {
            Written::Done(e) => Outcome::Done(vec![e]),
            Written::Stale(e) => Outcome::Stale(e),
        }
    }
}

/// What went wrong with one rollout effect.
enum StepError {
    /// Definitive: recorded on the node as `Failed`.
    Refused(String),
    /// Transient: a problem, retried by the loop.
    Transient(ApplyError),
}

impl From<ApplyError> for StepError {
    fn from(e: ApplyError) -> Self {
        StepError::Transient(e)
    }
}

impl From<TalosStepError> for StepError {
    /// The performer's refusal is recorded on the node; its transient failure is a problem.
    fn from(e: TalosStepError) -> Self {
        match e {
            TalosStepError::Refused(m) => StepError::Refused(m),
            TalosStepError::Transient(m) => StepError::Transient(ApplyError::Rollout(m)),
        }
    }
}

/// The Talos credentials and the `/readyz` trust of one cluster.
pub(super) struct Credentials {
    talos: TalosContext,
    probe: ReadyzProbe,
}

/// How many contexts a talosconfig's `contexts` map holds (0 when it is not one: the parser
/// then says why).
fn context_count(text: &str) -> usize {
    serde_yaml::from_str::<serde_yaml::Value>(text)
        .ok()
        .and_then(|v| {
            v.get("contexts")
                .and_then(serde_yaml::Value::as_mapping)
                .map(serde_yaml::Mapping::len)
        })
        .unwrap_or(0)
}

impl KubeApplier {
    /// Performs the rollout effects one at a time.
    pub(super) async fn rollout_effects(
        &self,
        world: &World,
        effects: &[&EffectRequest],
        report: &mut ApplyReport,
    ) {
        for request in effects {
            let outcome = if request.id.starts_with("rollout-probe ") {
                match serde_json::from_value::<ProbeRequest>(request.request.clone()) {
                    Ok(r) => self
                        .probe(world, &r)
                        .await
                        .map(Outcome::from)
                        .map_err(StepError::Transient),
                    Err(e) => Err(StepError::Transient(ApplyError::Rollout(format!(
                        "{}: {e}",
                        request.id
                    )))),
                }
            } else if request.id.starts_with("rollout-apply ") {
                match serde_json::from_value::<ApplyRequest>(request.request.clone()) {
                    Ok(r) => self.rollout_apply(world, &r).await,
                    Err(e) => Err(StepError::Transient(ApplyError::Rollout(format!(
                        "{}: {e}",
                        request.id
                    )))),
                }
            } else {
                match serde_json::from_value::<RollbackRequest>(request.request.clone()) {
                    Ok(r) => self.rollout_rollback(world, &r).await,
                    Err(e) => Err(StepError::Transient(ApplyError::Rollout(format!(
                        "{}: {e}",
                        request.id
                    )))),
                }
            };
            match outcome {
                Ok(Outcome::Done(events)) => {
                    tracing::debug!(effect = %request.id, "performed");
                    report.events.extend(events);
                    report.applied.push(format!("effect {}", request.id));
                }
                Ok(Outcome::Stale(fresh)) => {
                    report.events.extend(fresh);
                    report.stale.push(stale_problem(&request.id));
                }
                Err(StepError::Transient(e)) => {
                    tracing::warn!(effect = %request.id, error = %e, "rollout effect failed; retried");
                    report
                        .problems
                        .push(Problem::new(ProblemKind::Effect, format!("{}: {e}", request.id)));
                }
                Err(StepError::Refused(message)) => {
                    tracing::warn!(effect = %request.id, reason = %message, "rollout step refused");
                    report.problems.push(Problem::new(
                        ProblemKind::Effect,
                        format!("{}: not recorded: {message}", request.id),
                    ));
                }
            }
        }
    }

    /// The cluster's Talos credentials and `/readyz` CA, read from its Secret (and kept for
    /// [`Self::cached_credentials`]).
    async fn credentials(&self, namespace: &str, cluster: &str) -> Result<Arc<Credentials>, StepError> {
        let read = Arc::new(self.read_credentials(namespace, cluster).await?);
        self.talos_credentials
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(format!("{namespace}/{cluster}"), Arc::clone(&read));
        Ok(read)
    }

    /// The credentials as last read, else read now.
    async fn cached_credentials(
        &self,
        namespace: &str,
        cluster: &str,
    ) -> Result<Arc<Credentials>, StepError> {
        let cached = self
            .talos_credentials
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&format!("{namespace}/{cluster}"))
            .cloned();
        match cached {
            Some(c) => Ok(c),
            None => self.credentials(namespace, cluster).await,
        }
    }

    async fn read_credentials(&self, namespace: &str, cluster: &str) -> Result<Credentials, StepError> {
        let name = format!("{cluster}{TALOS_CREDENTIALS_SUFFIX}");
        let what = format!("read of Secret {namespace}/{name}");
        let secret = Api::<Secret>::namespaced(self.client.clone(), namespace)
            .get_opt(&name)
            .await
            .map_err(|e| match e {
                kube::Error::Api(status) if status.code == 403 => StepError::Refused(format!(
                    "the controller may not read Secret {namespace}/{name}: add {cluster} to the chart's \
                     controller.rollout.clusters, which grants exactly that read"
                )),
                e => StepError::Transient(classify(&what, e).into_error(&what)),
            })?;
        let Some(secret) = secret else {
            return Err(StepError::Refused(format!(
                "Secret {namespace}/{name} does not exist: it must hold the cluster's talosconfig \
                 ({TALOSCONFIG_KEY}) and Kubernetes CA ({KUBE_CA_KEY})"
            )));
        };
        let data = secret.data.unwrap_or_default();
        let field = |key: &str| {
            data.get(key)
                .map(|b| b.0.clone())
                .ok_or_else(|| StepError::Refused(format!("Secret {namespace}/{name} has no key {key}")))
        };
        let text = String::from_utf8(field(TALOSCONFIG_KEY)?).map_err(|_| {
            StepError::Refused(format!(
                "Secret {namespace}/{name}: {TALOSCONFIG_KEY} is not UTF-8"
            ))
        })?;
        let label = format!("Secret {namespace}/{name} key {TALOSCONFIG_KEY}");
        let contexts = context_count(&text);
        if contexts > 1 {
            // A talosctl file commonly holds every cluster's os:admin keys: none but this
            // cluster's belongs in it, so such a Secret is refused, not used.
            return Err(StepError::Refused(format!(
                "{label} holds {contexts} talosconfig contexts; it must hold only cluster {cluster}'s \
                 (other clusters' os:admin keys do not belong here): store it again with `ichor init \
                 --cluster {cluster} --talosconfig FILE --kube-ca FILE`, which keeps one context"
            )));
        }
        let talos = talosconfig::parse(&text, &label, None).map_err(|e| StepError::Refused(e.to_string()))?;
        let ca = field(KUBE_CA_KEY)?;
        let probe = ReadyzProbe::from_pem(
            &ca,
            &format!("Secret {namespace}/{name} key {KUBE_CA_KEY}"),
            PROBE_TIMEOUT,
        )
        .map_err(|e| StepError::Refused(e.to_string()))?;
        Ok(Credentials { talos, probe })
    }

    /// The node at `address`, connected with its cluster's credentials (read afresh), with the
    /// machine configuration it runs.
    async fn node_session(
        &self,
        namespace: &str,
        cluster: &str,
        address: &str,
        machine: &str,
    ) -> Result<NodeSession, StepError> {
        let creds = self.credentials(namespace, cluster).await?;
        Ok(NodeSession::open(&creds.talos, address, machine, CALL_TIMEOUT).await?)
    }

    /// The operation as the graph saw it, and its status.
    fn operation(
        world: &World,
        namespace: &str,
        name: &str,
    ) -> Result<(Object, TalosOperationStatus), StepError> {
        let key = ObjectKey::new("TalosOperation", namespace, name);
        let op = world.get(&key).cloned().ok_or_else(|| {
            StepError::Transient(ApplyError::Rollout(format!("{key} is no longer observed")))
        })?;
        let status = op
            .value
            .get("status")
            .cloned()
            .and_then(|s| serde_json::from_value(s).ok())
            .unwrap_or_default();
        Ok((op, status))
    }

    /// Writes the whole status of an operation, conditioned on `resource_version`.
    async fn write_operation_status(
        &self,
        op: &Object,
        resource_version: Option<&str>,
        status: &TalosOperationStatus,
    ) -> Result<Written, ApplyError> {
        let key = op.key();
        let what = format!("status write of {key}");
        let resource = Self::resource(&key)?;
        let mut meta = json!({"name": op.name, "namespace": op.namespace});
        if let Some(rv) = resource_version {
            meta["resourceVersion"] = json!(rv);
        }
        let body = json!({"apiVersion": resource.api.api_version, "kind": resource.api.kind,
            "metadata": meta, "status": to_status(status)});
        let result = self
            .api(&resource, &op.namespace)
            .patch_status(
                &op.name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await;
        self.conditional(&resource, op, &what, result).await
    }

    /// Sets (or, with `None`, removes) the machine's applied hash of the authentication document.
    async fn write_applied_hash(
        &self,
        namespace: &str,
        machine: &str,
        sha: Option<&str>,
    ) -> Result<Event, ApplyError> {
        let key = ObjectKey::new("TalosMachine", namespace, machine);
        let what = format!("appliedDocumentHashes write of {key}");
        let resource = resource_for("TalosMachine").ok_or_else(|| ApplyError::UnknownKind {
            key: key.clone(),
            kind: "TalosMachine".into(),
        })?;
        let hashes: BTreeMap<&str, &str> = sha.map(|s| (TALOS_KIND, s)).into_iter().collect();
        let body = json!({"apiVersion": resource.api.api_version, "kind": resource.api.kind,
            "metadata": {"name": machine, "namespace": namespace},
            "status": {"appliedDocumentHashes": hashes}});
        let written = self
            .api(&resource, namespace)
            .patch_status(
                machine,
                &PatchParams::apply(APPLIED_HASHES_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await
            .map_err(|e| classify(&what, e).into_error(&what))?;
        let fallback = Object::new("TalosMachine", namespace, machine, Value::Null);
        Ok(Event::Applied(observed(
            "TalosMachine",
            &fallback,
            to_value(&what, written)?,
        )))
    }

    /// Records a refusal on the node: `Failed` with `message`.
    async fn refuse(
        &self,
        op: &Object,
        mut status: TalosOperationStatus,
        step: usize,
        message: String,
    ) -> Result<Outcome, StepError> {
        record::refused(&mut status, step, message, (self.clock)());
        Ok(self
            .write_operation_status(op, op.resource_version.as_deref(), &status)
            .await?
            .into())
    }

    async fn rollout_apply(&self, world: &World, r: &ApplyRequest) -> Result<Outcome, StepError> {
        let (op, mut status) = Self::operation(world, &r.namespace, &r.operation)?;
        let state = status.nodes.get(r.step).and_then(OperationNodeResult::node_state);
        if !matches!(state, Some(NodeState::Pending | NodeState::Applying)) {
            // Decided from an older status: the graph decides again from the current one.
            return Ok(Outcome::Stale(vec![Event::Applied(op)]));
        }
        match self.apply_step(&op, &mut status, r).await {
            Err(StepError::Refused(message)) => self.refuse(&op, status, r.step, message).await,
            other => other,
        }
    }

    async fn apply_step(
        &self,
        op: &Object,
        status: &mut TalosOperationStatus,
        r: &ApplyRequest,
    ) -> Result<Outcome, StepError> {
        let mut session = self
            .node_session(&r.namespace, &r.cluster, &r.address, &r.machine)
            .await?;
        let plan = session.plan_apply(TALOS_KIND, &r.document, &r.sha256, r.adopting, document_sha256)?;
        let mut rv = op.resource_version.clone();
        if r.previous.is_none() {
            record::applying(
                status,
                r.step,
                plan.running.clone(),
                document_sha256,
                (self.clock)(),
            );
            match self.write_operation_status(op, rv.as_deref(), status).await? {
                Written::Done(Event::Applied(written)) => rv = written.resource_version.clone(),
                other => return Ok(other.into()),
            }
        }
        let message = match session.apply(plan).await? {
            Sent::AlreadyRunning => {
                // An earlier attempt's apply went through and only its status write was lost (on
                // a self-hosted control plane the apply restarts the very API server that write
                // goes to): the performer did not send it again.
                tracing::info!(machine = %r.machine, "the node already runs the rendered document; not applied again");
                "the node already runs the rendered document (not applied again); waiting for /readyz"
                    .to_owned()
            }
            Sent::Applied(outcome) => {
                tracing::info!(machine = %r.machine, details = %outcome.details, "configuration applied (NO_REBOOT)");
                format!("applied ({}); waiting for /readyz", outcome.details)
            }
        };
        let machine = self
            .write_applied_hash(&r.namespace, &r.machine, Some(&r.sha256))
            .await?;
        record::waiting_ready(status, r.step, message, (self.clock)());
        let written = self.write_operation_status(op, rv.as_deref(), status).await?;
        Ok(Outcome::from(written).and(machine))
    }

    async fn rollout_rollback(&self, world: &World, r: &RollbackRequest) -> Result<Outcome, StepError> {
        let (op, mut status) = Self::operation(world, &r.namespace, &r.operation)?;
        let state = status.nodes.get(r.step).and_then(OperationNodeResult::node_state);
        if !matches!(state, Some(NodeState::Applying | NodeState::WaitingReady)) {
            return Ok(Outcome::Stale(vec![Event::Applied(op)]));
        }
        let result: Result<Outcome, StepError> = async {
            let mut session = self
                .node_session(&r.namespace, &r.cluster, &r.address, &r.machine)
                .await?;
            let plan = session.plan_rollback(
                TALOS_KIND,
                r.previous.yaml.as_deref(),
                r.previous.sha256.as_deref(),
                document_sha256,
            )?;
            match session.rollback(plan).await? {
                Sent::AlreadyRunning => {
                    // Already back (an earlier attempt's status write was lost): not sent again.
                    tracing::warn!(machine = %r.machine, reason = %r.reason,
                        "the node already runs the previous document; not applied again");
                }
                Sent::Applied(outcome) => {
                    tracing::warn!(machine = %r.machine, reason = %r.reason, details = %outcome.details,
                        "rolled back to the previous document");
                }
            }
            let machine = self
                .write_applied_hash(&r.namespace, &r.machine, r.previous.sha256.as_deref())
                .await?;
            record::rolling_back(&mut status, r.step, &r.reason, (self.clock)());
            let written = self
                .write_operation_status(&op, op.resource_version.as_deref(), &status)
                .await?;
            Ok(Outcome::from(written).and(machine))
        }
        .await;
        match result {
            Err(StepError::Refused(message)) => {
                let message = format!("{}; the rollback failed too: {message}", r.reason);
                self.refuse(&op, status, r.step, message).await
            }
            other => other,
        }
    }

    async fn probe(&self, world: &World, r: &ProbeRequest) -> Result<Written, ApplyError> {
        let probe = match self.cached_credentials(&r.namespace, &r.cluster).await {
            Ok(c) => c.probe.clone(),
            Err(StepError::Transient(e)) => return Err(e),
            Err(StepError::Refused(m)) => return Err(ApplyError::Rollout(m)),
        };
        let detail = match probe.check(&r.url).await {
            Probe::Ready => None,
            Probe::NotReady(why) => Some(why),
        };
        Ok(Written::Done(Event::Applied(probe_observation(
            world,
            r,
            detail,
            (self.clock)(),
        ))))
    }
}

/// The status as the API server takes it (the CRD's camelCase JSON).
fn to_status(status: &TalosOperationStatus) -> Value {
    serde_json::to_value(status).unwrap_or(Value::Null)
}
