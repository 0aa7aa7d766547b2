//! `/validate/ichorusers`: the grant rule and the last-enabled-admin rule (ADR 0129 decision 2),
//! by the functions of `renderers::auth::roles` the `UserService` API calls, with their messages.
//!
//! - Grant: an Ichor identity (`ichor:*`) may add to `spec.roles` only what
//!   [`Requester::check_grant`] allows (admin anything; built-in roles up to its highest; custom
//!   roles it holds). Other identities are not limited by this rule (RBAC is their gate).
//! - Last enabled admin: an update that turns an enabled admin into something else, or a delete
//!   of one, is refused when no other `IchorUser` of the namespace is an enabled admin. The others
//!   are listed uncached, and only when the change removes an enabled admin (so most writes cost
//!   no call). Exempt: `system:*` users and `system:masters` (the override certificate, the
//!   namespace controller, the garbage collector), and objects already being deleted.

use ichor_renderers::auth::roles::{
    Requester, UserChange, UserState, check_last_admin, is_exempt_from_last_admin_rule,
};
use ichor_renderers::crd::IchorUserSpec;

use super::AdmissionState;
use super::review::{self, AdmissionRequest, Decoded, Operation, Verdict, decode};

/// The kind this webhook admits.
pub const KIND: &str = "IchorUser";

/// Decides one `IchorUser` admission request.
pub async fn review(state: &AdmissionState, req: &AdmissionRequest) -> Verdict {
    let spec = |which, object| decode::<IchorUserSpec>(which, KIND, object);
    let decoded = match req.operation {
        Operation::Create => spec("object", req.object.as_ref()).map(|n| (None, Some(n))),
        Operation::Update => spec("oldObject", req.old_object.as_ref())
            .and_then(|o| spec("object", req.object.as_ref()).map(|n| (Some(o), Some(n)))),
        Operation::Delete => spec("oldObject", req.old_object.as_ref()).map(|o| (Some(o), None)),
        Operation::Connect => Err(Verdict::deny(format!(
            "request.operation: {:?} is not admitted for IchorUser; only CREATE, UPDATE and DELETE are",
            review::operation_name(&req.operation)
        ))),
    };
    let (old, new): (Option<Decoded<'_, IchorUserSpec>>, _) = match decoded {
        Ok(pair) => pair,
        Err(denial) => return denial,
    };
    let username = review::username(req);
    let groups = review::groups(req);

    // The grant rule: only roles added by this write are checked.
    if let (Some(new), Some(requester)) = (&new, Requester::from_identity(username, groups)) {
        let old_roles: &[String] = old.as_ref().map_or(&[], |o| o.spec.roles.as_slice());
        if let Err(refusal) = requester.check_grant(old_roles, &new.spec.roles) {
            return Verdict::deny(format!("spec.roles: {refusal}"));
        }
    }

    // The last-enabled-admin rule.
    if is_exempt_from_last_admin_rule(username, groups) {
        return Verdict::Allow;
    }
    let Some(old) = old else {
        return Verdict::Allow;
    };
    if old.metadata.deletion_timestamp.is_some() {
        return Verdict::Allow;
    }
    let name = old.metadata.name.as_deref().unwrap_or(req.name.as_str());
    let old_state = UserState {
        roles: &old.spec.roles,
        disabled: old.spec.disabled,
    };
    let (change, field) = match &new {
        Some(new) => {
            let new_state = UserState {
                roles: &new.spec.roles,
                disabled: new.spec.disabled,
            };
            let field = if new.spec.disabled && !old.spec.disabled {
                "spec.disabled: "
            } else {
                "spec.roles: "
            };
            (
                UserChange::Update {
                    old: old_state,
                    new: new_state,
                },
                field,
            )
        }
        None => (UserChange::Delete { old: old_state }, ""),
    };
    // A change that keeps every enabled admin passes with no other user at all: no list.
    if check_last_admin(name, &change, std::iter::empty::<(&str, &[String], bool)>()).is_ok() {
        return Verdict::Allow;
    }
    let namespace = match review::namespace(req) {
        "" => old.metadata.namespace.as_deref().unwrap_or_default(),
        namespace => namespace,
    };
    let users = match state.lister.list_users(namespace).await {
        Ok(users) => users,
        Err(error) => {
            tracing::warn!(%error, user = name, "admission: IchorUser list failed; refusing");
            return Verdict::deny(format!(
                "{field}{error}; the change is refused until it can be checked"
            ));
        }
    };
    let others = users.iter().map(|u| {
        (
            u.metadata.name.as_deref().unwrap_or_default(),
            u.spec.roles.as_slice(),
            u.spec.disabled,
        )
    });
    match check_last_admin(name, &change, others) {
        Ok(()) => Verdict::Allow,
        Err(refusal) => Verdict::deny(format!("{field}{refusal}")),
    }
}
