//! Per-object conditions and status writes (machines, users) and the credentials garbage
//! collection.

use super::trust::ClusterAuth;
use super::{decode, effect};
use crate::identity::conditions::{StatusWrite, Wanted, merge};
use crate::identity::effects::{PerUserSecretRef, RemoveCredentialsKeyRequest};
use crate::identity::project::CredentialsSources;
use crate::identity::read;
use ichor_graph::{Desired, Object, ObjectKey};
use ichor_renderers::auth::roles::role_errors;
use ichor_renderers::auth::user_name::UserName;
use ichor_renderers::contract::{CREDENTIALS_NAMESPACE, user_credentials_secret};
use ichor_renderers::crd::{
    CONDITION_PASSWORD_SET, CONDITION_READY, IchorUserSpec, TalosMachine, TalosMachineSpec,
    TalosMachineStatus,
};
use ichor_renderers::rollout::restart_required;
use ichor_renderers::trust::NAMESPACE;
use serde_json::Value;

/// The `TalosCluster` a machine belongs to.
pub(crate) fn machine_cluster(machine: &Object) -> Option<ObjectKey> {
    let name = machine.value.get("spec")?.get("cluster")?.as_str()?;
    Some(ObjectKey::new("TalosCluster", machine.namespace.clone(), name))
}

/// A `TalosMachine` and its cluster's render → the `Ready` condition write, when
/// `restart_required` has an opinion that is not already observed.
pub(crate) fn machine_condition(
    key: &ObjectKey,
    machine: &Object,
    cluster: &Option<ClusterAuth>,
) -> Option<StatusWrite> {
    let cluster = cluster.as_ref()?;
    if cluster.documents.is_empty() {
        return None;
    }
    let spec: TalosMachineSpec = decode(machine.value.get("spec")).ok()?;
    let status: Option<TalosMachineStatus> = decode(machine.value.get("status")).ok();
    let mut tm = TalosMachine::new(&key.name, spec);
    tm.metadata.namespace = Some(key.namespace.to_string());
    tm.status = status;
    let (_, cond) = restart_required(std::slice::from_ref(&tm), &cluster.documents)
        .into_iter()
        .next()?;
    let wanted = Wanted {
        type_: CONDITION_READY,
        status: cond.status,
        reason: cond.reason.to_owned(),
        message: cond.message,
    };
    merge(read::conditions(machine), &[wanted], None, None)
}

/// Reasons of the `IchorUser` conditions.
pub mod reasons {
    /// `PasswordSet=True`.
    pub const PASSWORD_SET: &str = "PasswordSet";
    /// `PasswordSet=False`.
    pub const NO_PASSWORD: &str = "NoPassword";
    /// `Ready=True`.
    pub const READY: &str = "Ready";
    /// `Ready=False`: `spec.disabled`.
    pub const DISABLED: &str = "Disabled";
    /// `Ready=False`: no password.
    pub const PASSWORD_NOT_SET: &str = "PasswordNotSet";
    /// `Ready=False`: the name or a role is invalid.
    pub const INVALID_SPEC: &str = "InvalidSpec";
}

/// An `IchorUser` and whether its credentials key exists → the `Ready` and `PasswordSet`
/// conditions write, when not already observed.
pub(crate) fn user_conditions(
    key: &ObjectKey,
    user: &Object,
    credentials: &Option<Object>,
) -> Option<StatusWrite> {
    let password = credentials.is_some();
    let password_set = if password {
        Wanted {
            type_: CONDITION_PASSWORD_SET,
            status: true,
            reason: reasons::PASSWORD_SET.into(),
            message: "A password hash is stored for this user.".into(),
        }
    } else {
        Wanted {
            type_: CONDITION_PASSWORD_SET,
            status: false,
            reason: reasons::NO_PASSWORD.into(),
            message: format!(
                "No password is stored for this user: an admin sets one (`ichor user set-password {}`).",
                key.name
            ),
        }
    };
    let spec: Result<IchorUserSpec, _> = decode(user.value.get("spec"));
    let mut problems: Vec<String> = Vec::new();
    if let Err(e) = UserName::parse(&key.name) {
        problems.push(e.to_string());
    }
    let disabled = match &spec {
        Ok(s) => {
            problems.extend(role_errors(&s.roles).iter().map(ToString::to_string));
            s.disabled
        }
        Err(e) => {
            problems.push(format!("spec does not decode: {e}"));
            false
        }
    };
    let (status, reason, message) = if !problems.is_empty() {
        (false, reasons::INVALID_SPEC, problems.join("; "))
    } else if disabled {
        (
            false,
            reasons::DISABLED,
            "The user is disabled (spec.disabled): signing in and refreshing are refused.".to_owned(),
        )
    } else if !password {
        (
            false,
            reasons::PASSWORD_NOT_SET,
            "The user cannot sign in until a password is set.".to_owned(),
        )
    } else {
        (true, reasons::READY, "The user can sign in.".to_owned())
    };
    let ready = Wanted {
        type_: CONDITION_READY,
        status,
        reason: reason.into(),
        message,
    };
    let observed_generation = user
        .value
        .get("status")
        .and_then(|s| s.get("observedGeneration"))
        .and_then(Value::as_i64);
    merge(
        read::conditions(user),
        &[ready, password_set],
        read::generation(user),
        observed_generation,
    )
}

/// One object's pending write → the desired status object (`{"status": …}` only: a status
/// subresource write). No clock: conditions whose status changed carry no `lastTransitionTime`,
/// which the applier sets (see [`super::conditions`]).
pub(crate) fn status_object(key: &ObjectKey, write: &Option<StatusWrite>) -> Desired {
    match write {
        Some(write) => status_desired(key, write.status()),
        None => Desired::default(),
    }
}

/// The desired status-only object of `key` holding `status`.
fn status_desired(key: &ObjectKey, status: Value) -> Desired {
    // Built by hand: `json!` would serialize the status value into a second copy.
    let mut value = serde_json::Map::new();
    value.insert("status".to_owned(), status);
    Desired {
        objects: vec![Object::new(
            &*key.kind,
            &*key.namespace,
            &*key.name,
            Value::Object(value),
        )],
        effects: Vec::new(),
    }
}

/// An `IchorUser` and its credentials key → the status write of its conditions
/// ([`user_conditions`]), nothing when they are already observed.
pub(crate) fn user_status(key: &ObjectKey, user: &Object, credentials: &Option<Object>) -> Desired {
    match user_conditions(key, user, credentials) {
        Some(write) => status_desired(key, write.into_status()),
        None => Desired::default(),
    }
}

/// An `IchorUser` → whether it still counts as a user: `false` once it is being deleted
/// (`metadata.deletionTimestamp` set). A finalizer can hold a deleted object for as long as its
/// holder wants; the issuer already treats it as absent, and its credentials go as a gone
/// user's do, so nothing of it is left for a later object of the same name either.
pub fn still_a_user(user: &Object) -> bool {
    user.value
        .get("metadata")
        .and_then(|m| m.get("deletionTimestamp"))
        .is_none_or(Value::is_null)
}

/// A user's derived credentials object, its `IchorUser` (whether it is still a user, see
/// [`still_a_user`]) and whether any user is observed → the removal of the user's credentials
/// when its user is gone or being deleted (never while no user at all is observed: the users'
/// list is not in yet): the legacy key when the legacy Secret holds one, and the user's own
/// Secret when one is observed, with the uid it was observed with.
pub(crate) fn credentials_gc(
    key: &ObjectKey,
    derived: &Object,
    user_exists: &Option<bool>,
    users_observed: bool,
) -> Desired {
    if *user_exists == Some(true) || !users_observed {
        return Desired::default();
    }
    let sources = CredentialsSources::of(derived);
    let request = RemoveCredentialsKeyRequest {
        namespace: NAMESPACE.to_owned(),
        secret: ichor_renderers::auth::credentials::CREDENTIALS_SECRET_NAME.to_owned(),
        key: key.name.to_string(),
        in_legacy: sources.legacy,
        per_user: sources.per_user.map(|own| PerUserSecretRef {
            namespace: CREDENTIALS_NAMESPACE.to_owned(),
            name: user_credentials_secret(&key.name),
            uid: own.uid,
        }),
    };
    Desired {
        objects: Vec::new(),
        effects: effect(request.id(), &request).into_iter().collect(),
    }
}
