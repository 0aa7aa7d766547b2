//! The `TalosOperation` (kind `config`) that records an offline apply's progress: a new record,
//! what is read from it, and the reset that resumes it.
//!
//! The reconcile loop moves its states (`ichor_controller_core::identity::rollout`): per node
//! `Pending` → `Applying` → `WaitingReady` → `Done`, a node whose `/readyz` does not come back
//! rolled back (`RollingBack`, then `RolledBack`, or `Failed` when it does not come back
//! either), a refused step `Failed`; `status.phase` is `Running` while steps run, `Failed` after
//! a stop, `Succeeded` at the end. A record left `Running` (the process was interrupted) or
//! `Failed`/`Paused` resumes at its first node not `Done` ([`resume_record`]).

use std::collections::BTreeMap;

use ichor_renderers::crd::{
    NodeState, OperationKind, OperationNodeResult, OperationPhase, TalosOperation, TalosOperationSpec,
    TalosOperationStatus,
};

use super::store::RENDERED_SHA_ANNOTATION;

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
                state: NodeState::Pending.into(),
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
    nodes(op).iter().position(|n| n.state != NodeState::Done)
}

/// The record a resume runs: a new operation for `namespace/cluster` and the render `sha256`
/// over the stored record's machines (in its order), in which only the stored record's `Done`
/// marks are kept (state, message and times: those nodes are skipped, as they were before).
/// Nothing else is taken from the stored record: every other node starts again `Pending` with no
/// previous document and no times, at its address in `addresses` (the manifests' `TalosMachine`s,
/// never the stored record's), the phase is `Running` and the operation is not paused. The record lives in the manifests tree, which others may write to: a stored
/// `previousDocument`, address, `appliedAt` or `sawNotReady` is never acted upon, so a planted
/// record cannot choose what a rollback applies, which node is touched, or that a node counts as
/// done without an apply it has not recorded as `Done`. The graph never restarts a failed
/// operation; resuming is this command's decision, written to the record before the reconcile
/// loop reads it (and journaled as that observation).
pub fn resume_record(
    stored: &TalosOperation,
    namespace: &str,
    cluster: &str,
    sha256: &str,
    addresses: &BTreeMap<String, String>,
) -> TalosOperation {
    let machines: Vec<String> = nodes(stored).iter().map(|n| n.machine.clone()).collect();
    let mut op = new_operation(namespace, cluster, sha256, &machines);
    let status = op.status.get_or_insert_with(Default::default);
    for (node, old) in status.nodes.iter_mut().zip(nodes(stored)) {
        node.address = addresses.get(&node.machine).cloned();
        if old.state == NodeState::Done {
            node.set_state(NodeState::Done);
            node.message = old.message.clone();
            node.started_at = old.started_at.clone();
            node.applied_at = old.applied_at.clone();
            node.finished_at = old.finished_at.clone();
        }
    }
    status.phase = Some(OperationPhase::Running);
    status.current_step = status
        .nodes
        .iter()
        .position(|n| n.state != NodeState::Done)
        .and_then(|i| u32::try_from(i).ok());
    op
}

#[cfg(test)]
mod tests {
    use super::*;
    use ichor_renderers::crd::PreviousDocument;

    fn ts(s: &str) -> jiff::Timestamp {
        s.parse().unwrap_or_default()
    }

    fn manifest_addresses() -> BTreeMap<String, String> {
        machines()
            .into_iter()
            .enumerate()
            .map(|(i, m)| (m, format!("10.0.0.{}", i + 1)))
            .collect()
    }

    fn machines() -> Vec<String> {
        ["cp-1", "cp-2", "cp-3"].map(str::to_owned).to_vec()
    }

    #[test]
    fn a_new_operation_is_pending_on_every_node_and_carries_the_render_hash() {
        let op = new_operation("ichor-system", "prod", "abc", &machines());
        assert_eq!(op.metadata.name.as_deref(), Some("config-prod"));
        assert_eq!(rendered_sha(&op), Some("abc"));
        assert!(nodes(&op).iter().all(|n| n.state == NodeState::Pending));
        assert_eq!(next_step(&op), Some(0));
        assert!(is_resumable(&op));
    }

    /// Node `step` as the rollout records it: `state`, with `message` and times.
    fn record(op: &mut TalosOperation, step: usize, state: NodeState, message: Option<&str>) {
        let status = op.status.get_or_insert_with(Default::default);
        let node = &mut status.nodes[step];
        node.set_state(state);
        node.message = message.map(str::to_owned);
        node.started_at = Some(ts("2027-01-01T00:00:00Z").to_string());
        node.finished_at = Some(ts("2027-01-01T00:05:00Z").to_string());
    }

    fn fail(op: &mut TalosOperation, step: usize) {
        let status = op.status.get_or_insert_with(Default::default);
        status.phase = Some(OperationPhase::Failed);
        status.current_step = u32::try_from(step).ok();
        status.message = Some("stopped".into());
    }

    #[test]
    fn a_failed_step_resumes_at_that_node_and_not_before() {
        let mut op = new_operation("ichor-system", "prod", "abc", &machines());
        record(&mut op, 0, NodeState::Done, None);
        record(&mut op, 1, NodeState::Failed, Some("timed out"));
        fail(&mut op, 1);
        assert_eq!(
            op.status.as_ref().and_then(|s| s.phase),
            Some(OperationPhase::Failed)
        );
        assert_eq!(next_step(&op), Some(1));
        assert!(is_resumable(&op));
        let op = resume_record(&op, "ichor-system", "prod", "abc", &manifest_addresses());
        assert_eq!(nodes(&op)[1].message, None, "a retry clears the old failure");
        assert_eq!(nodes(&op)[1].state, NodeState::Pending);
        assert_eq!(nodes(&op)[0].state, NodeState::Done, "a done node is not touched");
        assert_eq!(op.status.as_ref().and_then(|s| s.current_step), Some(1));
        assert_eq!(
            op.status.as_ref().and_then(|s| s.phase),
            Some(OperationPhase::Running)
        );
    }

    #[test]
    fn a_rolled_back_step_keeps_its_previous_document_and_resumes_at_that_node() {
        let mut op = new_operation("ichor-system", "prod", "abc", &machines());
        let previous = PreviousDocument {
            yaml: Some("old".into()),
            sha256: Some("0ld".into()),
        };
        record(&mut op, 0, NodeState::RolledBack, Some("no /readyz; rolled back"));
        if let Some(s) = op.status.as_mut() {
            s.nodes[0].previous_document = Some(previous.clone());
            s.nodes[0].rolled_back_at = Some(ts("2027-01-01T00:05:00Z").to_string());
        }
        fail(&mut op, 0);
        assert_eq!(nodes(&op)[0].node_state(), Some(NodeState::RolledBack));
        assert_eq!(nodes(&op)[0].previous_document.as_ref(), Some(&previous));
        assert!(is_resumable(&op));
        assert_eq!(next_step(&op), Some(0));
        let op = resume_record(&op, "ichor-system", "prod", "abc", &manifest_addresses());
        assert_eq!(
            nodes(&op)[0].previous_document,
            None,
            "a stored previous document is never kept"
        );
        assert_eq!(
            nodes(&op)[0].rolled_back_at,
            None,
            "a retry clears the old rollback"
        );
        assert_eq!(nodes(&op)[0].state, NodeState::Pending);
    }

    /// A record planted in the manifests tree: a later node waiting for `/readyz` since long
    /// ago, with an address and a previous document of the planter's choosing, and the
    /// operation paused and in another namespace.
    #[test]
    fn a_resume_keeps_only_the_done_marks_of_a_stored_record() {
        let mut op = new_operation("elsewhere", "prod", "abc", &machines());
        record(&mut op, 0, NodeState::Done, Some("ran it"));
        record(&mut op, 1, NodeState::Failed, Some("timed out"));
        record(&mut op, 2, NodeState::WaitingReady, None);
        op.spec.paused = true;
        if let Some(s) = op.status.as_mut() {
            let n = &mut s.nodes[2];
            n.address = Some("10.9.9.9".into());
            n.applied_at = Some("2000-01-01T00:00:00Z".into());
            n.saw_not_ready = true;
            n.previous_document = Some(PreviousDocument {
                yaml: Some("planted".into()),
                sha256: Some("p".into()),
            });
        }
        fail(&mut op, 1);
        let resumed = resume_record(&op, "ichor-system", "prod", "abc", &manifest_addresses());
        assert_eq!(resumed.metadata.namespace.as_deref(), Some("ichor-system"));
        assert!(!resumed.spec.paused);
        assert_eq!(nodes(&resumed)[0].state, NodeState::Done);
        assert_eq!(nodes(&resumed)[0].message.as_deref(), Some("ran it"));
        for n in &nodes(&resumed)[1..] {
            assert_eq!(n.state, NodeState::Pending, "{}", n.machine);
            assert_eq!(
                n.address,
                manifest_addresses().get(&n.machine).cloned(),
                "the manifests' address"
            );
            assert_eq!(n.applied_at, None);
            assert!(!n.saw_not_ready);
            assert_eq!(n.previous_document, None);
            assert_eq!(n.message, None);
        }
        assert_eq!(resumed.status.as_ref().and_then(|s| s.current_step), Some(1));
        assert_eq!(
            resumed.status.as_ref().and_then(|s| s.phase),
            Some(OperationPhase::Running)
        );
    }

    #[test]
    fn a_succeeded_operation_is_not_resumable() {
        let mut op = new_operation("ichor-system", "prod", "abc", &machines());
        for i in 0..3 {
            record(&mut op, i, NodeState::Done, None);
        }
        if let Some(s) = op.status.as_mut() {
            s.phase = Some(OperationPhase::Succeeded);
        }
        assert!(!is_resumable(&op));
        assert_eq!(next_step(&op), None);
    }
}
