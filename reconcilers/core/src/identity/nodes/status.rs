//! Per-object conditions and status writes (machines, users) and the credentials garbage
//! collection.

use super::trust::ClusterAuth;
use super::{decode, effect};
use crate::identity::conditions::{Status, StatusWrite, Wanted, merge};
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
        status: cond.status.into(),
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
    /// `PasswordSet=Unknown` and `Ready=Unknown`: the users' own credentials Secrets are not
    /// listed (the controller's Role in their namespace missing or not yet in force).
    pub const CREDENTIALS_NOT_LISTED: &str = "CredentialsNotListed";
}

/// The observed condition `type_` of `user` when its status and reason are a pair of
/// `written_by` (what the password's branch writes: a status set by anyone else with a borrowed
/// reason is not kept), else `Unknown` with reason [`reasons::CREDENTIALS_NOT_LISTED`].
fn observed_or_unknown(user: &Object, type_: &'static str, written_by: &[(Status, &str)]) -> Wanted {
    let text = |c: &Value, field: &str| c.get(field).and_then(Value::as_str).map(str::to_owned);
    read::conditions(user)
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
        .and_then(|c| {
            let status = Status::parse(&text(c, "status")?)?;
            let reason = text(c, "reason").filter(|r| written_by.contains(&(status, r.as_str())))?;
            Some(Wanted {
                type_,
                status,
                reason,
                message: text(c, "message").unwrap_or_default(),
            })
        })
        .unwrap_or_else(|| Wanted {
            type_,
            status: Status::Unknown,
            reason: reasons::CREDENTIALS_NOT_LISTED.into(),
            message: format!(
                "The Secrets of {CREDENTIALS_NAMESPACE} are not listed (the controller's Role there is missing, \
                 as the chart renders it only with ichorUI.users.enabled, or not yet in force), so whether a \
                 password is stored for this user is not known yet."
            ),
        })
}

/// An `IchorUser`, whether its credentials key exists, and whether the users' own credentials
/// Secrets were listed (`listed`: a refused list shows none of them) → the `Ready` and
/// `PasswordSet` conditions write, when not already observed.
///
/// A user whose credentials are not found while the Secrets are not listed may have a password
/// in a Secret the controller cannot see: its password-derived conditions stay as observed (a
/// refusal, or the moments of a re-list, change nothing, so a Role not yet in force does not
/// rewrite every user's status twice), and a user that has none yet gets them `Unknown`, reason
/// `CredentialsNotListed`.
pub(crate) fn user_conditions(
    key: &ObjectKey,
    user: &Object,
    credentials: &Option<Object>,
    listed: bool,
) -> Option<StatusWrite> {
    let password = match (credentials.is_some(), listed) {
        (true, _) => Some(true),
        (false, true) => Some(false),
        (false, false) => None,
    };
    let password_set = match password {
        Some(true) => Wanted {
            type_: CONDITION_PASSWORD_SET,
            status: Status::True,
            reason: reasons::PASSWORD_SET.into(),
            message: "A password hash is stored for this user.".into(),
        },
        Some(false) => Wanted {
            type_: CONDITION_PASSWORD_SET,
            status: Status::False,
            reason: reasons::NO_PASSWORD.into(),
            message: format!(
                "No password is stored for this user: an admin sets one (`ichor user set-password {}`).",
                key.name
            ),
        },
        None => observed_or_unknown(
            user,
            CONDITION_PASSWORD_SET,
            &[
                (Status::True, reasons::PASSWORD_SET),
                (Status::False, reasons::NO_PASSWORD),
                (Status::Unknown, reasons::CREDENTIALS_NOT_LISTED),
            ],
        ),
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
    let ready = |status: bool, reason: &str, message: String| Wanted {
        type_: CONDITION_READY,
        status: status.into(),
        reason: reason.into(),
        message,
    };
    let ready = if !problems.is_empty() {
        ready(false, reasons::INVALID_SPEC, problems.join("; "))
    } else if disabled {
        ready(
            false,
            reasons::DISABLED,
            "The user is disabled (spec.disabled): signing in and refreshing are refused.".to_owned(),
        )
    } else {
        match password {
            None => observed_or_unknown(
                user,
                CONDITION_READY,
                &[
                    (Status::True, reasons::READY),
                    (Status::False, reasons::PASSWORD_NOT_SET),
                    (Status::Unknown, reasons::CREDENTIALS_NOT_LISTED),
                ],
            ),
            Some(false) => ready(
                false,
                reasons::PASSWORD_NOT_SET,
                "The user cannot sign in until a password is set.".to_owned(),
            ),
            Some(true) => ready(true, reasons::READY, "The user can sign in.".to_owned()),
        }
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

/// An `IchorUser`, its credentials key and whether the users' own Secrets were listed → the
/// status write of its conditions ([`user_conditions`]), nothing when they are already observed.
pub(crate) fn user_status(
    key: &ObjectKey,
    user: &Object,
    credentials: &Option<Object>,
    listed: bool,
) -> Desired {
    match user_conditions(key, user, credentials, listed) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::Controller;
    use crate::identity::project::{credentials_secrets_listed, credentials_secrets_listed_key};
    use crate::sim::fixtures;
    use ichor_graph::{Action, Event};
    use serde_json::json;

    /// `user` as observed with these conditions written for its generation.
    fn observed(user: &Object, conditions: &[(&str, &str, &str)]) -> Object {
        let generation = read::generation(user).unwrap_or(1);
        let conditions: Vec<Value> = conditions
            .iter()
            .map(|(t, s, r)| {
                json!({"type": t, "status": s, "reason": r, "message": "as written",
                    "observedGeneration": generation, "lastTransitionTime": "2027-01-01T00:00:00Z"})
            })
            .collect();
        let mut user = user.clone();
        user.value["status"] = json!({"conditions": conditions, "observedGeneration": generation});
        user
    }

    /// (type, status, reason) of each condition the write carries.
    fn written(write: Option<StatusWrite>) -> Option<Vec<(String, String, String)>> {
        let text = |c: &Value, f: &str| c[f].as_str().unwrap_or_default().to_owned();
        write.map(|w| {
            w.conditions
                .iter()
                .map(|c| (text(c, "type"), text(c, "status"), text(c, "reason")))
                .collect()
        })
    }

    fn triples(items: &[(&str, &str, &str)]) -> Option<Vec<(String, String, String)>> {
        Some(
            items
                .iter()
                .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
                .collect(),
        )
    }

    /// The password conditions while the Secrets are not listed and nothing was written.
    const NOT_KNOWN: [(&str, &str, &str); 2] = [
        ("Ready", "Unknown", "CredentialsNotListed"),
        ("PasswordSet", "Unknown", "CredentialsNotListed"),
    ];
    /// The password conditions of a user the list showed without credentials.
    const NONE_STORED: [(&str, &str, &str); 2] = [
        ("Ready", "False", "PasswordNotSet"),
        ("PasswordSet", "False", "NoPassword"),
    ];

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new("IchorUser", NAMESPACE, name)
    }

    #[test]
    fn a_user_whose_credentials_are_not_found_before_a_list_is_unknown_then_without_password() {
        let erin = fixtures::user("erin", &["viewer"], false, 1);
        assert_eq!(
            written(user_conditions(&key("erin"), &erin, &None, false)),
            triples(&NOT_KNOWN)
        );
        assert_eq!(
            written(user_conditions(&key("erin"), &erin, &None, true)),
            triples(&NONE_STORED)
        );
        // Once listed and written, the Unknown conditions give way to what the list showed.
        let unknown = observed(&erin, &NOT_KNOWN);
        assert_eq!(
            written(user_conditions(&key("erin"), &unknown, &None, true)),
            triples(&NONE_STORED)
        );
        assert_eq!(user_conditions(&key("erin"), &unknown, &None, false), None);
    }

    #[test]
    fn a_refused_list_rewrites_no_user_whose_password_conditions_were_written() {
        let alice = fixtures::user("alice", &["admin"], false, 1);
        for conditions in [
            [("Ready", "True", "Ready"), ("PasswordSet", "True", "PasswordSet")],
            NONE_STORED,
        ] {
            let seen = observed(&alice, &conditions);
            assert_eq!(
                user_conditions(&key("alice"), &seen, &None, false),
                None,
                "{conditions:?}"
            );
        }
    }

    #[test]
    fn a_status_written_by_someone_else_under_a_password_reason_is_not_kept() {
        let alice = fixtures::user("alice", &["admin"], false, 1);
        let forged = observed(
            &alice,
            &[
                ("Ready", "True", "PasswordNotSet"),
                ("PasswordSet", "True", "NoPassword"),
            ],
        );
        assert_eq!(
            written(user_conditions(&key("alice"), &forged, &None, false)),
            triples(&NOT_KNOWN)
        );
    }

    #[test]
    fn what_the_spec_says_is_written_while_the_password_is_not_known() {
        let written_true = [("Ready", "True", "Ready"), ("PasswordSet", "True", "PasswordSet")];
        let disabled = observed(&fixtures::user("alice", &["admin"], true, 2), &written_true);
        // The generation moved: each condition is written for it, the password's as observed.
        let write = user_conditions(&key("alice"), &disabled, &None, false);
        assert_eq!(
            written(write.clone()),
            triples(&[
                ("Ready", "False", "Disabled"),
                ("PasswordSet", "True", "PasswordSet")
            ])
        );
        assert_eq!(write.and_then(|w| w.observed_generation), Some(2));
        // Enabled again before the list: whether it can sign in is not known.
        let enabled = observed(
            &fixtures::user("alice", &["admin"], false, 3),
            &[
                ("Ready", "False", "Disabled"),
                ("PasswordSet", "True", "PasswordSet"),
            ],
        );
        assert_eq!(
            written(user_conditions(&key("alice"), &enabled, &None, false)),
            triples(&[
                ("Ready", "Unknown", "CredentialsNotListed"),
                ("PasswordSet", "True", "PasswordSet"),
            ])
        );
    }

    #[test]
    fn found_credentials_are_a_password_listed_or_not() {
        let erin = fixtures::user("erin", &["viewer"], false, 1);
        let key_object = Some(Object::new(
            crate::identity::project::CREDENTIALS_KEY_KIND,
            NAMESPACE,
            "erin",
            json!({}),
        ));
        for listed in [false, true] {
            assert_eq!(
                written(user_conditions(&key("erin"), &erin, &key_object, listed)),
                triples(&[("Ready", "True", "Ready"), ("PasswordSet", "True", "PasswordSet")])
            );
        }
    }

    fn user_writes(actions: &[Action]) -> Vec<Value> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Apply { object, .. } if object.kind == "IchorUser" => Some(object.value.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_graph_holds_the_password_conditions_on_the_watchers_word_that_the_secrets_were_listed() {
        let mut c = Controller::new().expect("builds");
        c.fold(Event::Applied(fixtures::user("erin", &["viewer"], false, 1)));
        let (eval, _) = c.evaluate();
        let writes = user_writes(&eval.actions);
        assert_eq!(writes.len(), 1, "{writes:?}");
        assert_eq!(writes[0]["status"]["conditions"][1]["status"], "Unknown");

        c.fold(Event::Applied(credentials_secrets_listed()));
        let (eval, _) = c.evaluate();
        let writes = user_writes(&eval.actions);
        assert_eq!(writes.len(), 1, "{writes:?}");
        assert_eq!(writes[0]["status"]["conditions"][1]["reason"], "NoPassword");

        // Written and observed; then a watch is refused: nothing is rewritten.
        let erin = observed(&fixtures::user("erin", &["viewer"], false, 1), &NONE_STORED);
        c.fold(Event::Applied(erin));
        c.fold(Event::Deleted(credentials_secrets_listed_key()));
        let (eval, _) = c.evaluate();
        assert_eq!(user_writes(&eval.actions), Vec::<Value>::new());
    }
}
