//! The `TalosOperation` (kind `config`) that records an apply's progress, and its state
//! changes as pure functions (the time comes in as `now`).
//!
//! Per node, `status.nodes[i].state` moves `Pending` → `Applying` → `WaitingReady` → `Done`, or
//! to `Failed`; `status.currentStep` is the node in progress; `status.phase` is `Running` while
//! steps run, `Failed` after a stop, `Succeeded` at the end. A record left `Running` (the
//! process was interrupted) or `Failed`/`Paused` resumes at its first node not `Done`.

use std::collections::BTreeMap;

use ichor_renderers::crd::{
    OperationKind, OperationNodeResult, OperationPhase, TalosOperation, TalosOperationSpec,
    TalosOperationStatus,
};

use super::store::RENDERED_SHA_ANNOTATION;

/// Node state: not started.
pub const PENDING: &str = "Pending";
/// Node state: the configuration is being applied.
pub const APPLYING: &str = "Applying";
/// Node state: applied; waiting for the node's kube-apiserver `/readyz`.
pub const WAITING_READY: &str = "WaitingReady";
/// Node state: applied and ready again.
pub const DONE: &str = "Done";
/// Node state: the step failed.
pub const FAILED: &str = "Failed";

/// A new operation applying the render `sha256` to `machines` (in plan order) of the cluster
/// `namespace/cluster`.
pub fn new_operation(namespace: &str, cluster: &str, sha256: &str, machines: &[String]) -> TalosOperation {
    let mut op = TalosOperation::new(
        &format!("config-{cluster}"),
        TalosOperationSpec {
            cluster: cluster.to_owned(),
            kind: OperationKind::Config,
            action: None,
            machines: machines.to_vec(),
            paused: false,
        },
    );
    op.metadata.namespace = Some(namespace.to_owned());
    op.metadata.annotations = Some(BTreeMap::from([(
        RENDERED_SHA_ANNOTATION.to_owned(),
        sha256.to_owned(),
    )]));
    op.status = Some(TalosOperationStatus {
        phase: Some(OperationPhase::Pending),
        current_step: None,
        nodes: machines
            .iter()
            .map(|m| OperationNodeResult {
                machine: m.clone(),
                state: PENDING.to_owned(),
                ..Default::default()
            })
            .collect(),
        message: None,
        rendered_sha256: Some(sha256.to_owned()),
    });
    op
}

/// The sha256 of the render the operation applies.
pub fn rendered_sha(op: &TalosOperation) -> Option<&str> {
    op.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RENDERED_SHA_ANNOTATION))
        .map(String::as_str)
}

/// The node results (empty without a status).
pub fn nodes(op: &TalosOperation) -> &[OperationNodeResult] {
    op.status.as_ref().map(|s| s.nodes.as_slice()).unwrap_or_default()
}

/// Whether the operation stopped before its end and can be resumed: a `config` operation whose
/// phase is not `Succeeded` and which has a node not `Done`.
pub fn is_resumable(op: &TalosOperation) -> bool {
    op.spec.kind == OperationKind::Config
        && op.status.as_ref().and_then(|s| s.phase) != Some(OperationPhase::Succeeded)
        && next_step(op).is_some()
}

/// The first node not `Done`.
pub fn next_step(op: &TalosOperation) -> Option<usize> {
    nodes(op).iter().position(|n| n.state != DONE)
}

fn node_mut(op: &mut TalosOperation, step: usize) -> Option<&mut OperationNodeResult> {
    op.status.as_mut().and_then(|s| s.nodes.get_mut(step))
}

/// Step `step` starts: the operation runs, the node is `Applying` (a previous failure's
/// message and times are cleared).
pub fn start_step(op: &mut TalosOperation, step: usize, now: jiff::Timestamp) {
    let status = op.status.get_or_insert_with(Default::default);
    status.phase = Some(OperationPhase::Running);
    status.current_step = u32::try_from(step).ok();
    status.message = None;
    if let Some(node) = node_mut(op, step) {
        node.state = APPLYING.to_owned();
        node.message = None;
        node.started_at = Some(now.to_string());
        node.finished_at = None;
    }
}

/// The node of step `step` was applied and waits for `/readyz`.
pub fn waiting_ready(op: &mut TalosOperation, step: usize) {
    if let Some(node) = node_mut(op, step) {
        node.state = WAITING_READY.to_owned();
    }
}

/// Step `step` is done.
pub fn finish_step(op: &mut TalosOperation, step: usize, now: jiff::Timestamp) {
    if let Some(node) = node_mut(op, step) {
        node.state = DONE.to_owned();
        node.finished_at = Some(now.to_string());
    }
}

/// Step `step` failed with `message`; the operation stops (`Failed`) with `summary`.
pub fn fail_step(op: &mut TalosOperation, step: usize, message: &str, summary: &str, now: jiff::Timestamp) {
    if let Some(node) = node_mut(op, step) {
        node.state = FAILED.to_owned();
        node.message = Some(message.to_owned());
        node.finished_at = Some(now.to_string());
    }
    let status = op.status.get_or_insert_with(Default::default);
    status.phase = Some(OperationPhase::Failed);
    status.message = Some(summary.to_owned());
}

/// Every step is done.
pub fn succeed(op: &mut TalosOperation) {
    let status = op.status.get_or_insert_with(Default::default);
    status.phase = Some(OperationPhase::Succeeded);
    status.current_step = None;
    status.message = Some("every control plane runs the rendered configuration".to_owned());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> jiff::Timestamp {
        s.parse().unwrap_or_default()
    }

    fn machines() -> Vec<String> {
        ["cp-1", "cp-2", "cp-3"].map(str::to_owned).to_vec()
    }

    #[test]
    fn a_new_operation_is_pending_on_every_node_and_carries_the_render_hash() {
        let op = new_operation("ichor-system", "prod", "abc", &machines());
        assert_eq!(op.metadata.name.as_deref(), Some("config-prod"));
        assert_eq!(rendered_sha(&op), Some("abc"));
        assert!(nodes(&op).iter().all(|n| n.state == PENDING));
        assert_eq!(next_step(&op), Some(0));
        assert!(is_resumable(&op));
    }

    #[test]
    fn a_failed_step_resumes_at_that_node_and_not_before() {
        let mut op = new_operation("ichor-system", "prod", "abc", &machines());
        start_step(&mut op, 0, ts("2027-01-01T00:00:00Z"));
        finish_step(&mut op, 0, ts("2027-01-01T00:00:30Z"));
        start_step(&mut op, 1, ts("2027-01-01T00:00:31Z"));
        fail_step(
            &mut op,
            1,
            "timed out",
            "stopped at cp-2",
            ts("2027-01-01T00:05:31Z"),
        );
        assert_eq!(
            op.status.as_ref().and_then(|s| s.phase),
            Some(OperationPhase::Failed)
        );
        assert_eq!(next_step(&op), Some(1));
        assert!(is_resumable(&op));
        start_step(&mut op, 1, ts("2027-01-01T01:00:00Z"));
        assert_eq!(nodes(&op)[1].message, None, "a retry clears the old failure");
        assert_eq!(nodes(&op)[1].state, APPLYING);
        assert_eq!(op.status.as_ref().and_then(|s| s.current_step), Some(1));
    }

    #[test]
    fn a_succeeded_operation_is_not_resumable() {
        let mut op = new_operation("ichor-system", "prod", "abc", &machines());
        for i in 0..3 {
            start_step(&mut op, i, ts("2027-01-01T00:00:00Z"));
            waiting_ready(&mut op, i);
            finish_step(&mut op, i, ts("2027-01-01T00:00:10Z"));
        }
        succeed(&mut op);
        assert!(!is_resumable(&op));
        assert_eq!(next_step(&op), None);
    }
}
