#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use ichor_graph::{Desired, Object, ObjectKey};
use ichor_renderers::crd::{OperationNodeResult, OperationPhase, PreviousDocument, TalosOperationStatus};
use jiff::Timestamp;
use serde_json::{Value, json};

use super::decide::Inputs;
use super::*;
use crate::identity::nodes::ClusterAuth;

const NS: &str = "ichor-system";
const AUTH: &str = "KubeAuthenticationConfig";

fn t(s: &str) -> Timestamp {
    format!("2027-01-01T{s}Z").parse().unwrap()
}

fn settings() -> Object {
    settings_object(&RolloutSettings {
        step_timeout_secs: 300,
        restart_grace_secs: 60,
        poll_interval_millis: 2000,
        apiserver_port: 6443,
        ..RolloutSettings::default()
    })
}

fn render(sha: &str) -> ClusterAuth {
    ClusterAuth {
        documents: BTreeMap::from([(AUTH.to_owned(), sha.to_owned())]),
        yaml: Some(format!("apiVersion: v1alpha1\nkind: {AUTH}\n# {sha}\n")),
        error: None,
    }
}

fn machine(name: &str, role: &str, address: &str, applied: Option<&str>) -> (ObjectKey, Object) {
    let mut value = json!({"spec": {"cluster": "prod", "role": role, "address": address}});
    if let Some(sha) = applied {
        value["status"] = json!({"appliedDocumentHashes": {AUTH: sha}});
    }
    let o = Object::new("TalosMachine", NS, name, value);
    (o.key(), o)
}

fn machines() -> BTreeMap<ObjectKey, Object> {
    BTreeMap::from([
        machine("cp-2", "controlplane", "10.0.0.2", Some("old")),
        machine("cp-1", "controlplane", "10.0.0.1", Some("old")),
        machine("cp-3", "controlplane", "10.0.0.3", None),
        machine("worker-1", "worker", "10.0.0.9", None),
    ])
}

/// An operation `ichor config apply` created (labelled as this subsystem's).
fn operation(name: &str, paused: bool, status: Option<&TalosOperationStatus>) -> Object {
    let mut o = core_operation(name, paused, status);
    o.value["metadata"] = json!({"labels": {MANAGED_BY_LABEL: IDENTITY_MANAGER}});
    o
}

/// An operation of Ichor core (no identity label).
fn core_operation(name: &str, paused: bool, status: Option<&TalosOperationStatus>) -> Object {
    let mut value = json!({"spec": {"cluster": "prod", "kind": "config", "paused": paused}});
    if let Some(s) = status {
        value["status"] = serde_json::to_value(s).unwrap();
    }
    let mut o = Object::new("TalosOperation", NS, name, value);
    o.resource_version = Some("7".into());
    o
}

struct World {
    now: Timestamp,
    settings: Option<Object>,
    cluster: Option<ClusterAuth>,
    machines: BTreeMap<ObjectKey, Object>,
    others: Vec<Object>,
    observation: Option<Observation>,
}

impl World {
    fn new() -> Self {
        World {
            now: t("00:00:00"),
            settings: Some(settings()),
            cluster: Some(render("new")),
            machines: machines(),
            others: Vec::new(),
            observation: None,
        }
    }

    fn decide(&self, op: &Object) -> Timed {
        let mut operations: BTreeMap<ObjectKey, Object> =
            self.others.iter().map(|o| (o.key(), o.clone())).collect();
        operations.insert(op.key(), op.clone());
        let inputs: Inputs = (
            self.now,
            self.settings.clone(),
            self.cluster.clone(),
            self.machines.clone(),
            operations,
            self.observation
                .as_ref()
                .map(|o| observation_object(NS, &op.name, o)),
        );
        let out = rollout(&op.key(), op, &inputs);
        Timed {
            desired: out.value,
            deadline: out.deadline,
        }
    }
}

struct Timed {
    desired: Desired,
    deadline: Option<Timestamp>,
}

impl Timed {
    fn status(&self) -> TalosOperationStatus {
        assert!(self.desired.effects.is_empty(), "{:?}", self.desired.effects);
        assert_eq!(
            self.desired.objects.len(),
            1,
            "one status write: {:?}",
            self.desired
        );
        serde_json::from_value(self.desired.objects[0].value["status"].clone()).unwrap()
    }
    fn effect(&self) -> (&str, &Value) {
        assert!(self.desired.objects.is_empty(), "{:?}", self.desired.objects);
        assert_eq!(self.desired.effects.len(), 1, "one effect: {:?}", self.desired);
        (&self.desired.effects[0].id, &self.desired.effects[0].request)
    }
    fn nothing(&self) {
        assert_eq!(self.desired, Desired::default());
    }
}

fn running() -> TalosOperationStatus {
    let w = World::new();
    w.decide(&operation("roll", false, None)).status()
}

fn at_state(mut status: TalosOperationStatus, i: usize, state: NodeState) -> TalosOperationStatus {
    for n in &mut status.nodes[..i] {
        n.state = NodeState::Done.into();
    }
    status.current_step = Some(u32::try_from(i).unwrap());
    let n = &mut status.nodes[i];
    n.set_state(state);
    n.started_at = Some(t("00:00:00").to_string());
    n.previous_document = Some(PreviousDocument {
        yaml: Some("old doc".into()),
        sha256: Some("old".into()),
    });
    if state != NodeState::Applying && state != NodeState::Pending {
        n.applied_at = Some(t("00:00:01").to_string());
    }
    status
}

fn observed(step: usize, phase: ProbePhase, ready: bool, at: &str, seq: u64) -> Observation {
    Observation {
        step,
        phase,
        machine: format!("cp-{}", step + 1),
        ready,
        detail: (!ready).then(|| "connection refused".into()),
        at: t(at),
        seq,
        saw_not_ready: !ready,
    }
}

#[test]
fn a_new_operation_plans_every_control_plane_that_needs_the_restart_in_name_order() {
    let status = running();
    assert_eq!(status.phase, Some(OperationPhase::Running));
    assert_eq!(status.current_step, Some(0));
    assert_eq!(status.rendered_sha256.as_deref(), Some("new"));
    let nodes: Vec<(&str, Option<NodeState>, Option<&str>)> = status
        .nodes
        .iter()
        .map(|n| (n.machine.as_str(), n.node_state(), n.address.as_deref()))
        .collect();
    assert_eq!(
        nodes,
        [
            ("cp-1", Some(NodeState::Pending), Some("10.0.0.1")),
            ("cp-2", Some(NodeState::Pending), Some("10.0.0.2")),
            ("cp-3", Some(NodeState::Pending), Some("10.0.0.3"))
        ],
        "workers are never in it"
    );
}

#[test]
fn nothing_is_decided_without_the_controllers_rollout_settings() {
    let mut w = World::new();
    w.settings = None;
    w.decide(&operation("roll", false, None)).nothing();
}

#[test]
fn an_operation_of_another_kind_is_left_alone() {
    let w = World::new();
    let mut op = operation("roll", false, None);
    op.value["spec"]["kind"] = json!("upgrade");
    w.decide(&op).nothing();
}

#[test]
fn an_operation_without_the_identity_label_is_ichor_cores_and_never_driven() {
    let w = World::new();
    let other_manager = |name: &str, status: Option<&TalosOperationStatus>| {
        let mut o = core_operation(name, false, status);
        o.value["metadata"] = json!({"labels": {MANAGED_BY_LABEL: "ichor"}});
        o
    };
    // Core's own progress (its node states, never an identity previousDocument).
    let mut applying = at_state(running(), 0, NodeState::Applying);
    applying.nodes[0].previous_document = None;
    for status in [None, Some(running()), Some(applying)] {
        for op in [
            core_operation("core", false, status.as_ref()),
            other_manager("core", status.as_ref()),
        ] {
            assert!(!is_owned(&op), "{op:?}");
            let out = w.decide(&op);
            out.nothing();
            assert_eq!(out.deadline, None, "not even woken up later: {op:?}");
        }
    }
    // The same operation with the label is driven: the label alone decided.
    assert!(is_owned(&operation("core", false, None)));
    assert_eq!(
        w.decide(&operation("core", false, None)).status().phase,
        Some(OperationPhase::Running)
    );
}

#[test]
fn an_unlabelled_operation_this_controller_started_before_the_label_is_driven_to_its_end() {
    // Started before operations were labelled: a node's previous document is recorded, which only
    // this controller writes. After an upgrade it is finished, not left half-rolled out.
    let w = World::new();
    let started = at_state(running(), 0, NodeState::Applying);
    let op = core_operation("before-the-label", false, Some(&started));
    assert!(is_owned(&op), "{op:?}");
    let out = w.decide(&op);
    let (id, request) = out.effect();
    assert_eq!(
        id, "rollout-apply ichor-system/before-the-label 0 cp-1",
        "the step goes on"
    );
    assert_eq!(request["previous"]["yaml"], json!("old doc"));
    // Another manager's label wins over a recorded document.
    let mut other = op.clone();
    other.value["metadata"] = json!({"labels": {MANAGED_BY_LABEL: "ichor"}});
    assert!(!is_owned(&other));
    w.decide(&other).nothing();
}

#[test]
fn a_rollout_of_ichor_core_on_the_same_cluster_holds_an_owned_operation_back() {
    let mut w = World::new();
    w.others
        .push(core_operation("core-reboots", false, Some(&running())));
    let status = w.decide(&operation("ours", false, None)).status();
    assert_eq!(status.phase, Some(OperationPhase::Pending));
    assert!(
        status
            .message
            .unwrap()
            .contains("waiting for operation core-reboots"),
        "one rollout of a cluster at a time, whoever drives it"
    );
}

#[test]
fn an_operation_with_nothing_to_do_succeeds_at_once() {
    let mut w = World::new();
    w.machines = BTreeMap::from([machine("cp-1", "controlplane", "10.0.0.1", Some("new"))]);
    let status = w.decide(&operation("roll", false, None)).status();
    assert_eq!(status.phase, Some(OperationPhase::Succeeded));
    assert!(status.message.unwrap().starts_with("nothing to do"));
}

#[test]
fn an_operation_whose_cluster_has_no_known_control_plane_waits_instead_of_succeeding() {
    let mut w = World::new();
    w.machines = BTreeMap::from([machine("worker-1", "worker", "10.0.0.9", None)]);
    let status = w.decide(&operation("roll", false, None)).status();
    assert_eq!(status.phase, Some(OperationPhase::Pending));
    assert!(
        status
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("waiting for a control plane of cluster prod"),
        "{status:?}"
    );
    w.machines = BTreeMap::new();
    let status = w.decide(&operation("roll", false, None)).status();
    assert_eq!(status.phase, Some(OperationPhase::Pending));
}

#[test]
fn a_cluster_that_renders_nothing_fails_the_operation_before_any_node() {
    let mut w = World::new();
    w.cluster = Some(ClusterAuth {
        documents: BTreeMap::new(),
        yaml: None,
        error: Some("spec.versionContract is missing".into()),
    });
    let status = w.decide(&operation("roll", false, None)).status();
    assert_eq!(status.phase, Some(OperationPhase::Failed));
    assert!(
        status.message.unwrap().contains("versionContract"),
        "the render's reason is said"
    );
}

#[test]
fn a_second_operation_of_the_same_cluster_waits_for_the_running_one() {
    let mut w = World::new();
    w.others.push(operation("first", false, Some(&running())));
    let status = w.decide(&operation("second", false, None)).status();
    assert_eq!(status.phase, Some(OperationPhase::Pending));
    assert!(status.message.unwrap().contains("waiting for operation first"));
    assert!(status.nodes.is_empty(), "nothing planned while another runs");
}

#[test]
fn a_running_operation_applies_its_first_node_with_the_rendered_document() {
    let w = World::new();
    let out = w.decide(&operation("roll", false, Some(&running())));
    let (id, request) = out.effect();
    assert_eq!(id, "rollout-apply ichor-system/roll 0 cp-1");
    let r: ApplyRequest = serde_json::from_value(request.clone()).unwrap();
    assert_eq!(r.address, "10.0.0.1");
    assert_eq!(r.sha256, "new");
    assert!(r.document.contains(AUTH));
    assert!(!r.adopting, "cp-1 reports a document applied by Ichor");
    assert_eq!(r.based_on_resource_version.as_deref(), Some("7"));
}

#[test]
fn a_node_ichor_never_applied_to_is_adopted() {
    let w = World::new();
    let status = at_state(running(), 2, NodeState::Pending);
    let out = w.decide(&operation("roll", false, Some(&status)));
    let (id, request) = out.effect();
    assert_eq!(id, "rollout-apply ichor-system/roll 2 cp-3");
    assert_eq!(request["adopting"], json!(true));
}

#[test]
fn paused_holds_the_next_node_and_unpausing_resumes_it() {
    let w = World::new();
    let status = at_state(running(), 1, NodeState::Pending);
    let paused = w.decide(&operation("roll", true, Some(&status))).status();
    assert_eq!(paused.phase, Some(OperationPhase::Paused));
    assert!(
        paused
            .message
            .as_deref()
            .unwrap()
            .contains("before cp-2 (2 of 3)")
    );
    w.decide(&operation("roll", true, Some(&paused))).nothing();
    let resumed = w.decide(&operation("roll", false, Some(&paused))).status();
    assert_eq!(resumed.phase, Some(OperationPhase::Running));
    let out = w.decide(&operation("roll", false, Some(&resumed)));
    let (id, _) = out.effect();
    assert_eq!(id, "rollout-apply ichor-system/roll 1 cp-2");
}

#[test]
fn a_step_in_flight_finishes_while_paused() {
    let mut w = World::new();
    w.now = t("00:00:05");
    let status = at_state(running(), 0, NodeState::WaitingReady);
    let out = w.decide(&operation("roll", true, Some(&status)));
    let (id, _) = out.effect();
    assert!(id.starts_with("rollout-probe ichor-system/roll 0 apply"), "{id}");
}

#[test]
fn an_interrupted_apply_is_carried_out_again_with_the_recorded_previous_document() {
    let mut w = World::new();
    w.now = t("00:01:00");
    let status = at_state(running(), 0, NodeState::Applying);
    let out = w.decide(&operation("roll", false, Some(&status)));
    let (id, request) = out.effect();
    assert_eq!(id, "rollout-apply ichor-system/roll 0 cp-1");
    assert_eq!(
        request["previous"]["yaml"],
        json!("old doc"),
        "never read again from the node"
    );
    assert_eq!(
        out.deadline,
        Some(t("00:05:00")),
        "the step times out 300 s after it started"
    );
}

#[test]
fn the_first_probe_comes_right_after_the_apply_and_the_next_after_the_interval() {
    let mut w = World::new();
    w.now = t("00:00:01");
    let status = at_state(running(), 0, NodeState::WaitingReady);
    let op = operation("roll", false, Some(&status));
    let out = w.decide(&op);
    let (id, request) = out.effect();
    assert_eq!(id, "rollout-probe ichor-system/roll 0 apply 1");
    assert_eq!(request["url"], json!("https://10.0.0.1:6443/readyz"));
    w.observation = Some(observed(0, ProbePhase::Apply, true, "00:00:01", 1));
    let out = w.decide(&op);
    out.nothing();
    assert_eq!(
        out.deadline,
        Some(t("00:00:03")),
        "the next probe is due 2 s later"
    );
    w.now = t("00:00:03");
    let out = w.decide(&op);
    let (id, _) = out.effect();
    assert_eq!(id, "rollout-probe ichor-system/roll 0 apply 2");
}

#[test]
fn a_restart_seen_going_down_and_coming_back_ends_the_step_and_starts_the_next() {
    let mut w = World::new();
    w.now = t("00:00:04");
    let status = at_state(running(), 0, NodeState::WaitingReady);
    w.observation = Some(observed(0, ProbePhase::Apply, false, "00:00:04", 3));
    let down = w.decide(&operation("roll", false, Some(&status))).status();
    assert!(down.nodes[0].saw_not_ready);
    assert_eq!(down.nodes[0].state, NodeState::WaitingReady);
    w.now = t("00:00:20");
    w.observation = Some(observed(0, ProbePhase::Apply, true, "00:00:20", 9));
    let done = w.decide(&operation("roll", false, Some(&down))).status();
    assert_eq!(done.nodes[0].state, NodeState::Done);
    assert_eq!(done.current_step, Some(1));
    assert!(
        done.nodes[0]
            .message
            .as_deref()
            .unwrap()
            .contains("ready 19s after the apply")
    );
    let out = w.decide(&operation("roll", false, Some(&done)));
    let (id, _) = out.effect();
    assert_eq!(
        id, "rollout-apply ichor-system/roll 1 cp-2",
        "one control plane at a time, in order"
    );
}

#[test]
fn a_restart_seen_in_the_observations_ends_the_step_before_the_status_recorded_it() {
    // The status write of sawNotReady may wait for an API server that is the one restarting.
    let mut w = World::new();
    let status = at_state(running(), 0, NodeState::WaitingReady);
    w.now = t("00:00:09");
    let mut back = observed(0, ProbePhase::Apply, true, "00:00:09", 6);
    back.saw_not_ready = true;
    w.observation = Some(back);
    let done = w.decide(&operation("roll", false, Some(&status))).status();
    assert_eq!(done.nodes[0].state, NodeState::Done);
    assert!(done.nodes[0].saw_not_ready);
    assert!(done.nodes[0].message.as_deref().unwrap().contains("restarted"));
}

#[test]
fn a_node_that_stays_ready_through_the_grace_is_done_and_says_no_restart_was_seen() {
    let mut w = World::new();
    let status = at_state(running(), 0, NodeState::WaitingReady);
    w.now = t("00:00:30");
    w.observation = Some(observed(0, ProbePhase::Apply, true, "00:00:30", 5));
    let op = operation("roll", false, Some(&status));
    assert!(w.decide(&op).desired.objects.is_empty(), "not yet: 29 s of 60");
    w.now = t("00:01:02");
    w.observation = Some(observed(0, ProbePhase::Apply, true, "00:01:02", 20));
    let done = w.decide(&op).status();
    assert_eq!(done.nodes[0].state, NodeState::Done);
    assert!(
        done.nodes[0]
            .message
            .as_deref()
            .unwrap()
            .contains("no restart was seen")
    );
}

#[test]
fn an_observation_of_an_earlier_step_or_before_the_apply_is_ignored() {
    let mut w = World::new();
    w.now = t("00:00:02");
    let status = at_state(running(), 1, NodeState::WaitingReady);
    let op = operation("roll", false, Some(&status));
    w.observation = Some(observed(0, ProbePhase::Apply, true, "00:00:02", 4));
    let out = w.decide(&op);
    let (id, _) = out.effect();
    assert_eq!(id, "rollout-probe ichor-system/roll 1 apply 5");
    w.observation = Some(observed(1, ProbePhase::Apply, false, "00:00:00", 4));
    let out = w.decide(&op);
    let (id, _) = out.effect();
    assert!(
        id.starts_with("rollout-probe"),
        "an observation older than the apply is not a restart"
    );
}

#[test]
fn a_node_whose_readyz_does_not_come_back_in_time_is_rolled_back_and_no_further_node_is_touched() {
    let mut w = World::new();
    let status = at_state(running(), 1, NodeState::WaitingReady);
    w.observation = Some(observed(1, ProbePhase::Apply, false, "00:04:59", 150));
    w.now = t("00:05:01");
    let out = w.decide(&operation("roll", false, Some(&status)));
    let (id, request) = out.effect();
    assert_eq!(id, "rollout-rollback ichor-system/roll 1 cp-2");
    let r: RollbackRequest = serde_json::from_value(request.clone()).unwrap();
    assert_eq!(r.previous.yaml.as_deref(), Some("old doc"));
    assert!(r.reason.contains("did not come back within 300s"), "{}", r.reason);
    assert!(r.reason.contains("connection refused"), "the last answer is said");
}

#[test]
fn a_rolled_back_node_that_is_ready_again_fails_the_operation_naming_what_was_not_touched() {
    let mut w = World::new();
    let mut status = at_state(running(), 0, NodeState::RollingBack);
    status.nodes[0].rolled_back_at = Some(t("00:05:02").to_string());
    status.nodes[0].message = Some("/readyz of cp-1 did not come back within 300s of the apply".into());
    let op = operation("roll", false, Some(&status));
    w.now = t("00:05:02");
    let out = w.decide(&op);
    let (id, _) = out.effect();
    assert_eq!(id, "rollout-probe ichor-system/roll 0 rollback 1");
    w.now = t("00:05:30");
    w.observation = Some(observed(0, ProbePhase::Rollback, true, "00:05:30", 14));
    let failed = w.decide(&op).status();
    assert_eq!(failed.phase, Some(OperationPhase::Failed));
    assert_eq!(failed.nodes[0].state, NodeState::RolledBack);
    let message = failed.message.clone().unwrap();
    assert!(
        message.contains("re-applied and the API server is ready again"),
        "{message}"
    );
    assert!(message.contains("not touched: cp-2, cp-3"), "{message}");
    assert_eq!(failed.nodes[1].state, NodeState::Pending);
    w.decide(&operation("roll", false, Some(&failed))).nothing();
}

#[test]
fn a_rollback_that_does_not_bring_the_node_back_fails_it_for_a_person() {
    let mut w = World::new();
    let mut status = at_state(running(), 0, NodeState::RollingBack);
    status.nodes[0].rolled_back_at = Some(t("00:05:02").to_string());
    w.now = t("00:10:03");
    let failed = w.decide(&operation("roll", false, Some(&status))).status();
    assert_eq!(failed.nodes[0].state, NodeState::Failed);
    assert!(failed.message.unwrap().contains("needs attention"));
}

#[test]
fn a_failure_the_performer_recorded_fails_the_operation() {
    let w = World::new();
    let mut status = at_state(running(), 0, NodeState::Failed);
    status.nodes[0].message = Some("ApplyConfiguration refused: InvalidArgument".into());
    let failed = w.decide(&operation("roll", false, Some(&status))).status();
    assert_eq!(failed.phase, Some(OperationPhase::Failed));
    assert!(failed.message.unwrap().contains("InvalidArgument"));
}

#[test]
fn a_render_that_changes_during_the_rollout_stops_it_before_the_next_node() {
    let mut w = World::new();
    w.cluster = Some(render("newer"));
    let status = at_state(running(), 1, NodeState::Pending);
    let failed = w.decide(&operation("roll", false, Some(&status))).status();
    assert_eq!(failed.phase, Some(OperationPhase::Failed));
    assert!(failed.message.unwrap().contains("changed during the rollout"));
}

#[test]
fn the_last_node_done_succeeds_the_operation() {
    let w = World::new();
    let mut status = running();
    for n in &mut status.nodes {
        *n = OperationNodeResult {
            state: NodeState::Done.into(),
            ..n.clone()
        };
    }
    let done = w.decide(&operation("roll", false, Some(&status))).status();
    assert_eq!(done.phase, Some(OperationPhase::Succeeded));
    assert_eq!(done.current_step, None);
}

#[test]
fn settings_in_milliseconds_are_written_only_when_finer_than_seconds() {
    use std::time::Duration;
    let whole = RolloutSettings::default().with_durations(Duration::from_secs(5), Duration::from_secs(2));
    let text = serde_json::to_string(&whole).unwrap();
    assert!(
        !text.contains("Millis\":null") && !text.contains("stepTimeoutMillis"),
        "{text}"
    );
    assert_eq!(whole.step_timeout(), jiff::SignedDuration::from_secs(5));
    let fine =
        RolloutSettings::default().with_durations(Duration::from_millis(1500), Duration::from_millis(400));
    assert_eq!(fine.step_timeout(), jiff::SignedDuration::from_millis(1500));
    assert_eq!(fine.restart_grace(), jiff::SignedDuration::from_millis(400));
    let back: RolloutSettings = serde_json::from_value(serde_json::to_value(fine).unwrap()).unwrap();
    assert_eq!(back, fine);
    assert_eq!(super::seconds_text(fine.step_timeout()), "1.5s");
    assert_eq!(super::seconds_text(whole.step_timeout()), "5s");
}
