//! `/validate/talosoperations`: a destructive operation (kind `shutdown`, `ca-rotation`,
//! `etcd-restore`, or `node` with action `reset` or `shutdown`) is created only by a user holding
//! `start` on `talosoperations/<that name>` (`node-reset`, `node-shutdown` for the node actions),
//! so a hand-written CR obeys the same right as `OperationService.CreateOperation`. The
//! controller's own identity is exempt. Other kinds, including kinds this build does not know,
//! need nothing here.

use ichor_renderers::crd::OperationKind;
use serde::Deserialize;

use super::AdmissionState;
use super::access::{ichor_attributes, require_right};
use super::review::{self, AdmissionRequest, Operation, Verdict, decode};

/// The kind this webhook admits.
pub const KIND: &str = "TalosOperation";
/// The resource whose subresources carry the `start` rights.
pub const RESOURCE: &str = "talosoperations";
/// The verb of the destructive-start rights.
pub const START_VERB: &str = "start";

/// `spec.kind` and `spec.action`, read leniently (an action this build does not know is kept as
/// written and is not destructive here).
#[derive(Debug, Default, Deserialize)]
struct OperationSpecView {
    #[serde(default)]
    kind: OperationKind,
    #[serde(default)]
    action: Option<String>,
}

/// The subresource whose `start` an operation of `kind` (with `action`, for `node`) needs, or
/// `None` when the operation is not destructive.
pub fn start_subresource(kind: &OperationKind, action: Option<&str>) -> Option<&'static str> {
    match (kind, action) {
        (OperationKind::Shutdown, _) => Some("shutdown"),
        (OperationKind::CaRotation, _) => Some("ca-rotation"),
        (OperationKind::EtcdRestore, _) => Some("etcd-restore"),
        (OperationKind::Node, Some("reset")) => Some("node-reset"),
        (OperationKind::Node, Some("shutdown")) => Some("node-shutdown"),
        _ => None,
    }
}

/// Decides one `TalosOperation` admission request.
pub async fn review(state: &AdmissionState, req: &AdmissionRequest) -> Verdict {
    if req.operation != Operation::Create {
        return Verdict::deny(format!(
            "request.operation: {:?} is not admitted for TalosOperation; only CREATE is",
            review::operation_name(&req.operation)
        ));
    }
    let new = match decode::<OperationSpecView>("object", KIND, req.object.as_ref()) {
        Ok(new) => new,
        Err(denial) => return denial,
    };
    let Some(subresource) = start_subresource(&new.spec.kind, new.spec.action.as_deref()) else {
        return Verdict::Allow;
    };
    if review::username(req) == state.controller_identity {
        return Verdict::Allow;
    }
    let (field, what) = match new.spec.kind {
        OperationKind::Node => (
            "spec.action",
            format!(
                "a node {:?} operation",
                new.spec.action.as_deref().unwrap_or_default()
            ),
        ),
        ref kind => ("spec.kind", format!("a {:?} operation", kind.as_str())),
    };
    let name = new.metadata.name.as_deref().unwrap_or(req.name.as_str());
    let attrs = ichor_attributes(START_VERB, RESOURCE, subresource, review::namespace(req), name);
    require_right(
        state.reviewer.as_ref(),
        &req.user_info,
        &attrs,
        field,
        &format!("starting {what}"),
    )
    .await
}
