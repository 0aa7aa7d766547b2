//! The move off the legacy credentials Secret (docs/credentials-sharding.md, "Migration from the
//! one Secret"): the switch of its phase to `migrating`, the sweep of its keys into one Secret
//! per user, its deletion once empty, and what the `IchorInstallation` says of it. Pure: every
//! input is an observed object, every decision an effect the applier makes
//! ([`super::effects`]), each with the sentence saying why.
//!
//! | phase (annotation) | what the controller asks |
//! |---|---|
//! | Secret absent | nothing: every entry is in its own Secret (`perUser`) |
//! | Secret absent, the installation asking for `legacy` | its creation, empty, in phase `returning` ([`super::returning::RecreateLegacyRequest`]) |
//! | no annotation | nothing: the issuer writes `legacy` on its first read |
//! | `legacy` | the switch ([`SwitchLayoutRequest`]) once [`switch_blocker`] finds nothing in the way |
//! | `migrating` | a batch of at most [`SWEEP_BATCH`] keys ([`SweepRequest`]); none left: the deletion ([`RetireLegacyRequest`]) |
//! | `migrating`, the installation asking for `legacy` | the switch to `returning` ([`super::returning`]) |
//! | `returning` | once [`super::returning::RETURN_WAIT`] has passed since the Secret's creation, a batch back ([`super::returning::ReturnRequest`]); none left: the switch to `legacy` |
//! | another value | nothing |

use std::collections::BTreeMap;

use ichor_graph::{Desired, EffectRequest, Object, ObjectKey};
use ichor_renderers::auth::credentials::CREDENTIALS_SECRET_NAME;
use ichor_renderers::contract::{
    CREDENTIALS_LAYOUT_ANNOTATION, CREDENTIALS_NAMESPACE, CREDENTIALS_NAMESPACE_DEDICATED, LAYOUT_LEGACY,
    LAYOUT_MIGRATING, LAYOUT_PER_USER, LAYOUT_RETURNING, USER_LABEL,
};
use ichor_renderers::crd::{CredentialsLayout, IchorInstallationSpec};
use ichor_renderers::trust::NAMESPACE;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::conditions::{Status, Wanted, merge};
use super::layouts::layout_condition;
pub use super::layouts::{Issuers, issuer_blocker, issuers};
use super::project::CredentialsSources;

/// Keys moved (or stale copies removed) by one batch: one JSON Patch of the legacy Secret each.
pub const SWEEP_BATCH: usize = 100;

/// The phase of the legacy Secret, read from its annotation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    /// No legacy Secret: the end state (or a fresh installation).
    Absent,
    /// The Secret carries no phase yet (written by a release before the per-user layout).
    Unannotated,
    /// `legacy`.
    Legacy,
    /// `migrating`.
    Migrating,
    /// `returning`.
    Returning,
    /// A value this release does not know.
    Unknown(String),
}

/// What the migration needs of the legacy Secret: its phase and, when it holds no key, the
/// resourceVersion it was seen empty at. A sign-in rewrites the Secret but changes neither, so
/// the migration is not decided again on every sign-in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LegacyState {
    /// The phase.
    pub phase: Phase,
    /// The resourceVersion of the Secret when it holds no data key.
    pub empty_at: Option<String>,
    /// In phase `returning`, when the Secret was created (its `creationTimestamp`): the move
    /// back waits until the issuers' memory of its absence has passed
    /// ([`super::returning::return_wait`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<Timestamp>,
}

/// The legacy Secret as observed → its [`LegacyState`].
pub fn legacy_state(secret: &Option<Object>) -> LegacyState {
    let empty = secret.as_ref().is_some_and(|s| {
        s.value
            .get("data")
            .and_then(Value::as_object)
            .is_none_or(serde_json::Map::is_empty)
    });
    LegacyState {
        created: secret
            .as_ref()
            .filter(|_| phase(secret) == Phase::Returning)
            .and_then(|s| s.value.pointer("/metadata/creationTimestamp"))
            .and_then(Value::as_str)
            .and_then(|t| t.parse().ok()),
        phase: phase(secret),
        empty_at: secret
            .as_ref()
            .filter(|_| empty)
            .and_then(|s| s.resource_version.clone()),
    }
}

/// The phase of the legacy Secret as observed.
pub fn phase(secret: &Option<Object>) -> Phase {
    let Some(secret) = secret else {
        return Phase::Absent;
    };
    match secret
        .value
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(CREDENTIALS_LAYOUT_ANNOTATION))
        .and_then(Value::as_str)
    {
        None => Phase::Unannotated,
        Some(LAYOUT_LEGACY) => Phase::Legacy,
        Some(LAYOUT_MIGRATING) => Phase::Migrating,
        Some(LAYOUT_RETURNING) => Phase::Returning,
        Some(other) => Phase::Unknown(other.to_owned()),
    }
}

/// Whether the credentials namespace exists and holds nothing but users' credentials Secrets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Dedication {
    /// The namespace is not observed (missing, or the controller may not see it).
    Missing,
    /// The namespace is observed, but its Secrets have not been listed (the list refused: the
    /// controller's Role there missing or not yet in force), so what it holds is unknown.
    Unlisted,
    /// It holds only Secrets named `ichor-user-<user>` and labelled with that user.
    Dedicated,
    /// It holds these other Secrets (by name, sorted).
    Foreign(Vec<String>),
}

/// The namespace object, the watcher's word that its Secrets were listed
/// ([`super::project::CREDENTIALS_SECRETS_LISTED_KIND`]) and the derived foreign-Secret objects
/// ([`super::project::FOREIGN_SECRET_KIND`]) → the namespace's [`Dedication`]. No foreign
/// Secret counts as dedicated only once a list was answered: a refused list shows nothing, not
/// an empty namespace.
pub fn dedication(
    namespace: &Option<Object>,
    listed: &Option<Object>,
    foreign: &BTreeMap<ObjectKey, Object>,
) -> Dedication {
    if namespace.is_none() {
        return Dedication::Missing;
    }
    if listed.is_none() {
        return Dedication::Unlisted;
    }
    if foreign.is_empty() {
        return Dedication::Dedicated;
    }
    Dedication::Foreign(foreign.keys().map(|k| k.name.to_string()).collect())
}

/// Switch the legacy Secret's phase: one JSON Patch, `test` of the annotation `from`, `replace`
/// with `to` (a replica that read before the switch then fails its own `test`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SwitchLayoutRequest {
    /// The legacy Secret's namespace.
    pub namespace: String,
    /// The legacy Secret's name.
    pub secret: String,
    /// The phase tested.
    pub from: String,
    /// The phase written.
    pub to: String,
    /// Why, in words.
    pub reason: String,
}

impl SwitchLayoutRequest {
    /// The effect id: `credentials-layout <from> to <to>`.
    pub fn id(&self) -> String {
        format!("credentials-layout {} to {}", self.from, self.to)
    }
}

/// One batch of the sweep: each key of `moves` is created as its user's own Secret with the
/// legacy value unchanged (already there: skipped), then every key of `moves` and `stale` is
/// removed from the legacy Secret by one JSON Patch, a `test` against the value read and a
/// `remove` per key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepRequest {
    /// The legacy Secret's namespace.
    pub namespace: String,
    /// The legacy Secret's name.
    pub secret: String,
    /// The namespace of the per-user Secrets.
    pub credentials_namespace: String,
    /// Users whose legacy key has no own Secret observed: moved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moves: Vec<String>,
    /// Users whose own Secret is observed beside a legacy key (a stale copy): the key removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stale: Vec<String>,
}

impl SweepRequest {
    /// The effect id: `credentials-sweep <first user> (<n> keys)`.
    pub fn id(&self) -> String {
        let first = self
            .moves
            .iter()
            .chain(&self.stale)
            .min()
            .map_or("", String::as_str);
        format!(
            "credentials-sweep {first} ({} keys)",
            self.moves.len() + self.stale.len()
        )
    }
}

/// Delete the legacy Secret, empty of users, with the resourceVersion it was seen empty at as
/// the precondition (a key written since makes the DELETE fail and the graph decide again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetireLegacyRequest {
    /// The legacy Secret's namespace.
    pub namespace: String,
    /// The legacy Secret's name.
    pub secret: String,
    /// The resourceVersion it was observed empty at.
    pub resource_version: String,
}

impl RetireLegacyRequest {
    /// The effect id: `retire-legacy-credentials <resourceVersion>`.
    pub fn id(&self) -> String {
        format!("retire-legacy-credentials {}", self.resource_version)
    }
}

/// The step the migration takes next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing to do, and why.
    Wait(String),
    /// Switch `legacy` to `migrating`.
    Switch(SwitchLayoutRequest),
    /// Move one batch.
    Sweep(SweepRequest),
    /// Delete the empty legacy Secret.
    Retire(RetireLegacyRequest),
    /// Move one batch back into the legacy Secret.
    Return(super::returning::ReturnRequest),
    /// Create the legacy Secret again, empty, in phase `returning` (the way back from the end
    /// state).
    Recreate(super::returning::RecreateLegacyRequest),
    /// Done: no legacy Secret.
    Done,
}

/// Counts of the derived credentials keys: users with a key in the legacy Secret, users with
/// their own Secret only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    /// Users whose entry is in its own Secret and no longer in the legacy one.
    pub moved: u64,
    /// Users with a key left in the legacy Secret.
    pub remaining: u64,
}

/// The derived credentials keys → [`Progress`] and the next batch (keys in name order: moves
/// of keys without an own Secret, stale copies of those with one).
pub fn batch(keys: &BTreeMap<ObjectKey, Object>) -> (Progress, Vec<String>, Vec<String>) {
    let mut progress = Progress::default();
    let (mut moves, mut stale) = (Vec::new(), Vec::new());
    for (key, object) in keys {
        let sources = CredentialsSources::of(object);
        if !sources.legacy {
            progress.moved += 1;
            continue;
        }
        progress.remaining += 1;
        // A key no user can be named by (put there by hand) has no Secret it could move to:
        // it stays, and the end state waits for it (see `step`), but it never holds the batch.
        if ichor_renderers::auth::UserName::parse(&key.name).is_err() {
            continue;
        }
        if moves.len() + stale.len() < SWEEP_BATCH {
            let user = key.name.to_string();
            if sources.per_user.is_some() {
                stale.push(user);
            } else {
                moves.push(user);
            }
        }
    }
    (progress, moves, stale)
}

/// Everything the migration decides from.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// The legacy Secret's state.
    pub legacy: &'a LegacyState,
    /// The layout the installation asks for.
    pub asked: CredentialsLayout,
    /// The credentials namespace's dedication.
    pub dedication: &'a Dedication,
    /// Why the issuer replicas do not all understand the per-user layout (`None`: they do).
    pub issuers: &'a Option<String>,
    /// The derived credentials keys.
    pub keys: &'a BTreeMap<ObjectKey, Object>,
    /// In phase `returning`: whether the issuers' memory of the legacy Secret's absence has
    /// passed since it was created ([`super::returning::return_wait`]).
    pub returning_waited: bool,
}

fn namespace_blocker(dedication: &Dedication) -> Option<String> {
    match dedication {
        Dedication::Dedicated => None,
        Dedication::Missing => Some(format!(
            "the namespace {CREDENTIALS_NAMESPACE} is not observed (run `ichor init` to create it)"
        )),
        Dedication::Unlisted => Some(format!(
            "the Secrets of {CREDENTIALS_NAMESPACE} are not listed yet (the controller's Role there is \
             missing or not yet in force: upgrade the chart with users enabled)"
        )),
        Dedication::Foreign(names) => Some(format!(
            "the namespace {CREDENTIALS_NAMESPACE} holds Secrets that are not users' credentials: {}",
            names.join(", ")
        )),
    }
}

/// Why the switch to `migrating` must wait, or `None` when every condition of the design holds.
pub fn switch_blocker(
    asked: CredentialsLayout,
    dedication: &Dedication,
    issuers: &Option<String>,
) -> Option<String> {
    if asked == CredentialsLayout::Legacy {
        return Some(
            "the IchorInstallation asks for the legacy layout (spec.users.credentialsLayout)".to_owned(),
        );
    }
    namespace_blocker(dedication).or_else(|| issuers.clone())
}

/// The next step of the migration and its progress.
pub fn step(inputs: Inputs<'_>) -> (Step, Progress) {
    let (progress, moves, stale) = batch(inputs.keys);
    let step = match &inputs.legacy.phase {
        Phase::Absent if inputs.asked == CredentialsLayout::Legacy => super::returning::recreate(),
        Phase::Absent => Step::Done,
        Phase::Unannotated => Step::Wait(format!(
            "{CREDENTIALS_SECRET_NAME} carries no {CREDENTIALS_LAYOUT_ANNOTATION} yet (the issuer writes {LAYOUT_LEGACY} on its first read)"
        )),
        Phase::Legacy => match switch_blocker(inputs.asked, inputs.dedication, inputs.issuers) {
            Some(why) => Step::Wait(why),
            None => Step::Switch(SwitchLayoutRequest {
                namespace: NAMESPACE.to_owned(),
                secret: CREDENTIALS_SECRET_NAME.to_owned(),
                from: LAYOUT_LEGACY.to_owned(),
                to: LAYOUT_MIGRATING.to_owned(),
                reason: format!(
                    "every issuer pod lists {LAYOUT_PER_USER}, its Deployment has observed its template, \
                     {CREDENTIALS_NAMESPACE} is dedicated and the installation asks for perUser"
                ),
            }),
        },
        Phase::Migrating if inputs.asked == CredentialsLayout::Legacy => super::returning::start(),
        Phase::Migrating => match namespace_blocker(inputs.dedication) {
            Some(why) => Step::Wait(why),
            None if moves.is_empty() && stale.is_empty() => match &inputs.legacy.empty_at {
                Some(rv) => Step::Retire(RetireLegacyRequest {
                    namespace: NAMESPACE.to_owned(),
                    secret: CREDENTIALS_SECRET_NAME.to_owned(),
                    resource_version: rv.clone(),
                }),
                None => Step::Wait(format!(
                    "{CREDENTIALS_SECRET_NAME} still holds keys that are no user's credentials key, or no resourceVersion"
                )),
            },
            None => Step::Sweep(SweepRequest {
                namespace: NAMESPACE.to_owned(),
                secret: CREDENTIALS_SECRET_NAME.to_owned(),
                credentials_namespace: CREDENTIALS_NAMESPACE.to_owned(),
                moves,
                stale,
            }),
        },
        Phase::Returning => {
            let asks_legacy = inputs.asked == CredentialsLayout::Legacy;
            let blocker = switch_blocker(inputs.asked, inputs.dedication, inputs.issuers);
            if asks_legacy && !inputs.returning_waited {
                let (progress, _) = super::returning::batch(inputs.keys);
                return (super::returning::waiting(inputs.legacy.created), progress);
            }
            let unseen = match inputs.dedication {
                Dedication::Missing | Dedication::Unlisted => namespace_blocker(inputs.dedication),
                Dedication::Dedicated | Dedication::Foreign(_) => None,
            };
            return super::returning::step(inputs.keys, asks_legacy, blocker, unseen);
        }
        Phase::Unknown(v) => Step::Wait(format!(
            "{CREDENTIALS_SECRET_NAME} carries the unknown phase {v:?}"
        )),
    };
    (step, progress)
}

/// `status.credentials.layout` for a phase.
fn layout_name(phase: &Phase) -> Option<&'static str> {
    match phase {
        Phase::Absent => Some("perUser"),
        Phase::Unannotated | Phase::Legacy => Some("legacy"),
        Phase::Migrating => Some("migrating"),
        Phase::Returning => Some("returning"),
        Phase::Unknown(_) => None,
    }
}

/// The `CredentialsNamespaceDedicated` condition, `None` while the namespace is not observed.
fn dedicated_condition(dedication: &Dedication) -> Option<Wanted> {
    match dedication {
        Dedication::Missing | Dedication::Unlisted => None,
        Dedication::Dedicated => Some(Wanted {
            type_: CREDENTIALS_NAMESPACE_DEDICATED,
            status: Status::True,
            reason: "OnlyCredentials".to_owned(),
            message: format!(
                "{CREDENTIALS_NAMESPACE} holds only Secrets named ichor-user-<user> and labelled {USER_LABEL}: <user>"
            ),
        }),
        Dedication::Foreign(names) => Some(Wanted {
            type_: CREDENTIALS_NAMESPACE_DEDICATED,
            status: Status::False,
            reason: "ForeignSecret".to_owned(),
            message: format!(
                "Secret {CREDENTIALS_NAMESPACE}/{} is not a user's credentials Secret (named ichor-user-<user>, labelled \
                 {USER_LABEL}: <user>){}; remove it: the move to one Secret per user waits until the namespace \
                 holds nothing else",
                names.first().map_or("", String::as_str),
                match names.len() {
                    0 | 1 => String::new(),
                    n => format!(", nor are {} others", n - 1),
                }
            ),
        }),
    }
}

/// The status write of the installation in force (the first by name): its
/// `CredentialsNamespaceDedicated` and `CredentialsLayoutUnderstood` conditions (`unaware`: the
/// first issuer pod that does not list the per-user layout) and `status.credentials`; `None`
/// when all are
/// already observed, when there is no installation, or while the credentials namespace is not
/// observed or its Secrets not listed (an installation that has not run `ichor init` of this release, whose credentials
/// cannot move yet, and every journal recorded before the namespace was watched).
pub fn installation_status(
    installation: Option<&Object>,
    phase: &Phase,
    dedication: &Dedication,
    unaware: Option<&str>,
    progress: Progress,
) -> Option<Object> {
    let inst = installation?;
    if matches!(dedication, Dedication::Missing | Dedication::Unlisted) {
        return None;
    }
    let status = inst.value.get("status");
    let observed_conditions: Vec<Value> = status
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let wanted: Vec<Wanted> = dedicated_condition(dedication)
        .into_iter()
        .chain([layout_condition(phase, unaware)])
        .collect();
    let conditions = merge(&observed_conditions, &wanted, None, None);
    let mut credentials = json!({"moved": progress.moved, "remaining": progress.remaining});
    if let Some(layout) = layout_name(phase) {
        credentials["layout"] = json!(layout);
    }
    let credentials_same = status.and_then(|s| s.get("credentials")) == Some(&credentials);
    if conditions.is_none() && credentials_same {
        return None;
    }
    let conditions = conditions.map_or(observed_conditions, |w| w.conditions);
    let mut status = json!({"credentials": credentials});
    if !conditions.is_empty() {
        status["conditions"] = Value::Array(conditions);
    }
    Some(Object::new(
        "IchorInstallation",
        "",
        inst.name.clone(),
        json!({"status": status}),
    ))
}

/// The layout an installation asks for (`perUser` when none, or when its spec does not decode:
/// the settings node reports that).
pub fn asked(installation: Option<&Object>) -> CredentialsLayout {
    installation
        .and_then(|i| i.value.get("spec"))
        .and_then(|s| serde_json::from_value::<IchorInstallationSpec>(s.clone()).ok())
        .and_then(|s| s.users)
        .map(|u| u.credentials_layout())
        .unwrap_or_default()
}

fn effect<T: Serialize>(id: String, request: &T) -> Option<EffectRequest> {
    EffectRequest::new(id, request).ok()
}

/// The migration node: its effect (at most one) and the installation's status write
/// (`returning_waited`: see [`Inputs::returning_waited`]).
pub fn migration(
    installations: &BTreeMap<ObjectKey, Object>,
    legacy: &LegacyState,
    dedication: &Dedication,
    issuers: &Issuers,
    keys: &BTreeMap<ObjectKey, Object>,
    returning_waited: bool,
) -> Desired {
    let installation = installations.values().next();
    let inputs = Inputs {
        legacy,
        asked: asked(installation),
        dedication,
        issuers: &issuers.blocker,
        keys,
        returning_waited,
    };
    let (step, progress) = step(inputs);
    let effects = match &step {
        Step::Switch(r) => effect(r.id(), r),
        Step::Sweep(r) => effect(r.id(), r),
        Step::Retire(r) => effect(r.id(), r),
        Step::Return(r) => effect(r.id(), r),
        Step::Recreate(r) => effect(r.id(), r),
        Step::Wait(_) | Step::Done => None,
    };
    Desired {
        objects: installation_status(
            installation,
            &legacy.phase,
            dedication,
            issuers.unaware.as_deref(),
            progress,
        )
        .into_iter()
        .collect(),
        effects: effects.into_iter().collect(),
    }
}

#[cfg(test)]
#[path = "migration_tests.rs"]
mod tests;
