//! `/validate/talosoperations`: a destructive operation (kind `shutdown`, `ca-rotation`,
//! `etcd-restore`, or `node` with action `reset` or `shutdown`) is started only by a user holding
//! `start` on `talosoperations/<that name>` (`node-reset`, `node-shutdown` for the node actions),
//! so a hand-written CR obeys the same right as `OperationService.CreateOperation`.
//!
//! - CREATE of a destructive operation needs the right.
//! - UPDATE needs it too when the new operation is destructive and what it does changed:
//!   anything in its spec but `spec.paused` (a paused reboot patched into a reset, a reset
//!   retargeted at another machine, another snapshot for a held restore), or when it resumes
//!   (`spec.paused` true to false): an operation held paused by someone with the right is not
//!   started by someone without it. Pausing needs nothing.
//! - A kind or an action this build does not know, or one spelled otherwise than the known
//!   ones (`Shutdown`, `etcd_restore`, a trailing space), is refused on CREATE and on an UPDATE
//!   that changes it: it cannot be told apart from a destructive kind that a more lenient
//!   reader would run. So are `node` without an action and an action on any other kind: each
//!   leaves what runs to the reader's guess.
//!
//! The controller's own identity is exempt.
//!
//! Who drives an operation is also fixed here ([`ownership_problem`]): the label
//! `app.kubernetes.io/managed-by=ichor-identity` (which `ichor config apply` sets, and which alone
//! makes this subsystem's controller drive an operation; without it the operation is Ichor
//! core's) is only for kind `config`, and is never added to or removed from an existing
//! operation, by anyone: added, it would hand a rollout Ichor core may be driving to a second
//! controller; removed, it would stop one half-way with nobody to finish it.

use std::collections::BTreeMap;

use ichor_renderers::crd::{IDENTITY_MANAGER, MANAGED_BY_LABEL, OperationKind, is_identity_operation};
use serde::Deserialize;
use serde_json::Value;

use super::AdmissionState;
use super::access::{ichor_attributes, require_right};
use super::review::{self, AdmissionRequest, Operation, Verdict, decode};

/// The kind this webhook admits.
pub const KIND: &str = "TalosOperation";
/// The resource whose subresources carry the `start` rights.
pub const RESOURCE: &str = "talosoperations";
/// The verb of the destructive-start rights.
pub const START_VERB: &str = "start";
/// The kinds that need no right: the routine operations an operator starts.
pub const ROUTINE_KINDS: [&str; 6] = ["config", "upgrade", "cni", "reboot", "service-restart", "node"];
/// The kinds that need `start` on their own subresource.
pub const DESTRUCTIVE_KINDS: [&str; 3] = ["shutdown", "ca-rotation", "etcd-restore"];
/// The actions of kind `node`.
pub const NODE_ACTIONS: [&str; 3] = ["reset", "shutdown", "reboot"];

/// What an operation does, read leniently (every field kept as written, so a spelling this
/// build does not know is seen and refused rather than failing to decode).
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
struct OperationSpecView {
    #[serde(default)]
    kind: OperationKind,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    cluster: Option<String>,
    #[serde(default)]
    machines: Option<Vec<String>>,
    /// Absent and `null` read as not paused, as the CRD's default.
    #[serde(default)]
    paused: Option<bool>,
    /// Every other field of the spec (core's, which this build does not model): a change of
    /// one is a change of what the operation does.
    #[serde(flatten)]
    rest: BTreeMap<String, Value>,
}

impl OperationSpecView {
    fn paused(&self) -> bool {
        self.paused.unwrap_or(false)
    }

    /// Whether `self` does something else than `old`: any field but `paused` differs.
    fn differs_from(&self, old: &Self) -> bool {
        self.kind != old.kind
            || self.action != old.action
            || self.cluster != old.cluster
            || self.machines != old.machines
            || self.rest != old.rest
    }
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

/// Why `spec.kind`/`spec.action` are not ones this build knows, if they are not.
pub fn unknown_kind_or_action(kind: &OperationKind, action: Option<&str>) -> Option<String> {
    let written = kind.as_str();
    if !ROUTINE_KINDS.contains(&written) && !DESTRUCTIVE_KINDS.contains(&written) {
        return Some(format!(
            "spec.kind: {written:?} is not a known operation kind; use one of {} (exactly, in lower case)",
            ROUTINE_KINDS
                .iter()
                .chain(&DESTRUCTIVE_KINDS)
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    match (kind, action) {
        (OperationKind::Node, Some(a)) if !NODE_ACTIONS.contains(&a) => Some(format!(
            "spec.action: {a:?} is not a node action; use one of {}",
            NODE_ACTIONS.join(", ")
        )),
        (OperationKind::Node, None) => Some(format!(
            "spec.action: an operation of kind \"node\" needs an action; set one of {}",
            NODE_ACTIONS.join(", ")
        )),
        (OperationKind::Node, Some(_)) => None,
        (_, Some(_)) => Some(format!(
            "spec.action: only an operation of kind \"node\" takes an action; remove it from this {written:?} operation"
        )),
        _ => None,
    }
}

/// Why the owner an operation names is refused, if it is. `old` is the stored operation's
/// (whether it is labelled as this subsystem's, and its kind; `None` on CREATE), `new` the
/// written one's.
pub fn ownership_problem(old: Option<(bool, &OperationKind)>, new: (bool, &OperationKind)) -> Option<String> {
    let field = format!("metadata.labels[{MANAGED_BY_LABEL:?}]");
    let (owned, kind) = new;
    if let Some((was_owned, _)) = old
        && was_owned != owned
    {
        return Some(if owned {
            format!(
                "{field}: {IDENTITY_MANAGER:?} cannot be added to an existing operation: Ichor core may be \
                 driving it, and a second controller would drive it again; start the rollout with \
                 `ichor config apply` instead"
            )
        } else {
            format!(
                "{field}: {IDENTITY_MANAGER:?} cannot be removed from an operation or changed: its rollout \
                 would stop half-way with nobody to finish it; pause it (spec.paused) or delete it instead"
            )
        });
    }
    let kind_written = old.is_none_or(|(_, was)| was != kind);
    if owned && kind_written && *kind != OperationKind::Config {
        return Some(format!(
            "{field}: {IDENTITY_MANAGER:?} is only for operations of kind \"config\" (the API server \
             restart rollout); this subsystem drives no {:?} operation: remove the label",
            kind.as_str()
        ));
    }
    None
}

/// Decides one `TalosOperation` admission request.
pub async fn review(state: &AdmissionState, req: &AdmissionRequest) -> Verdict {
    let spec = |which, object| decode::<OperationSpecView>(which, KIND, object);
    let decoded = match req.operation {
        Operation::Create => spec("object", req.object.as_ref()).map(|n| (None, n)),
        Operation::Update => spec("oldObject", req.old_object.as_ref())
            .and_then(|o| spec("object", req.object.as_ref()).map(|n| (Some(o), n))),
        ref op => Err(Verdict::deny(format!(
            "request.operation: {:?} is not admitted for TalosOperation; only CREATE and UPDATE are",
            review::operation_name(op)
        ))),
    };
    let (old, new) = match decoded {
        Ok(pair) => pair,
        Err(denial) => return denial,
    };
    if let Some(problem) = ownership_problem(
        old.as_ref()
            .map(|o| (is_identity_operation(o.metadata.labels.as_ref()), &o.spec.kind)),
        (
            is_identity_operation(new.metadata.labels.as_ref()),
            &new.spec.kind,
        ),
    ) {
        return Verdict::deny(problem);
    }
    let old = old.map(|o| o.spec);
    let what_changed = old.as_ref().is_none_or(|o| new.spec.differs_from(o));
    let resumed = old.as_ref().is_some_and(|o| o.paused() && !new.spec.paused());
    if !what_changed && !resumed {
        // Pause, labels: the operation does what it did, and no later than it would have.
        return Verdict::Allow;
    }
    // Every write that changes what the operation does or resumes it is held to the shapes
    // allowed now, so one stored in a shape since refused cannot be edited or resumed unchecked.
    if let Some(problem) = unknown_kind_or_action(&new.spec.kind, new.spec.action.as_deref()) {
        return Verdict::deny(problem);
    }
    let Some(subresource) = start_subresource(&new.spec.kind, new.spec.action.as_deref()) else {
        return Verdict::Allow;
    };
    if review::username(req) == state.controller_identity {
        return Verdict::Allow;
    }
    let (kind_field, what) = match new.spec.kind {
        OperationKind::Node => (
            "spec.action",
            format!(
                "a node {:?} operation",
                new.spec.action.as_deref().unwrap_or_default()
            ),
        ),
        ref kind => ("spec.kind", format!("a {:?} operation", kind.as_str())),
    };
    let (field, doing) = if old.is_none() {
        (kind_field, format!("starting {what}"))
    } else if what_changed {
        (
            kind_field,
            format!("changing {what} (its spec, other than spec.paused)"),
        )
    } else {
        ("spec.paused", format!("resuming {what}"))
    };
    let name = new.metadata.name.as_deref().unwrap_or(req.name.as_str());
    let attrs = ichor_attributes(START_VERB, RESOURCE, subresource, review::namespace(req), name);
    require_right(state.reviewer.as_ref(), &req.user_info, &attrs, field, &doing).await
}
