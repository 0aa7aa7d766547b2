//! What a rollout performer records on the operation's node after each Talos call: the same
//! status changes for the cluster's applier and for `ichor config apply --dir`'s file sink, so
//! the graph reads one history whichever sink wrote it.

use jiff::Timestamp;

use ichor_renderers::crd::{NodeState, PreviousDocument, TalosOperationStatus};

/// Before anything is sent: node `step` is `Applying` since `now`, running `previous` (the
/// document of that kind the node ran, `None`: it had none).
pub fn applying(
    status: &mut TalosOperationStatus,
    step: usize,
    previous: Option<String>,
    sha256: fn(&str) -> String,
    now: Timestamp,
) {
    if let Some(node) = status.nodes.get_mut(step) {
        node.set_state(NodeState::Applying);
        node.started_at = Some(now.to_string());
        node.message = None;
        node.previous_document = Some(PreviousDocument {
            sha256: previous.as_deref().map(sha256),
            yaml: previous,
        });
    }
}

/// The apply was sent (or not needed): node `step` waits for `/readyz` since `now`.
pub fn waiting_ready(status: &mut TalosOperationStatus, step: usize, message: String, now: Timestamp) {
    if let Some(node) = status.nodes.get_mut(step) {
        node.set_state(NodeState::WaitingReady);
        node.applied_at = Some(now.to_string());
        node.message = Some(message);
    }
}

/// The previous document was put back on node `step` at `now`, because of `reason`.
pub fn rolling_back(status: &mut TalosOperationStatus, step: usize, reason: &str, now: Timestamp) {
    if let Some(node) = status.nodes.get_mut(step) {
        node.set_state(NodeState::RollingBack);
        node.rolled_back_at = Some(now.to_string());
        node.message = Some(reason.to_owned());
    }
}

/// Node `step` refused the step (or it could not be carried out): `Failed` with `message`.
pub fn refused(status: &mut TalosOperationStatus, step: usize, message: String, now: Timestamp) {
    if let Some(node) = status.nodes.get_mut(step) {
        node.set_state(NodeState::Failed);
        node.message = Some(message);
        node.finished_at = Some(now.to_string());
    }
}
