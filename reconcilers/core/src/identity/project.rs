//! The credentials projection: one derived object per user who has credentials stored, in the
//! legacy Secret `ichor-user-credentials` (one key per user) or in the user's own Secret of the
//! credentials namespace (docs/credentials-sharding.md), or in both while entries move.
//!
//! The credentials Secret holds one key per user and changes on every sign-in (refresh-token
//! families). If every user's node read the whole Secret, each sign-in would recompute every
//! user, and the Secret (one entry per user) would be decoded once per user: quadratic. So before
//! an event is folded into the World, [`derived_events`] turns a change of that Secret, or of a
//! per-user Secret (observed by metadata only), into events about derived objects of kind
//! [`CREDENTIALS_KEY_KIND`], one per user, holding no secret material: only where the entry is
//! stored ([`CredentialsSources`]; `{}` for a key of the legacy Secret alone, as before per-user
//! Secrets existed). A user's node joins the one derived object named after the user; a sign-in
//! that rewrites an existing entry changes nothing derived, so nothing recomputes.
//!
//! Each Secret of the credentials namespace that is not a user's credentials Secret (by what its
//! metadata shows: named `ichor-user-<user>` and labelled with that user; a metadata watch does
//! not carry `type`) is derived as one object of kind [`FOREIGN_SECRET_KIND`], so whether the
//! namespace is dedicated is read from a set that is empty in a healthy installation, never by
//! scanning every Secret on every sign-in.
//!
//! Derived events are a pure function of the World before the event and the event, so they are
//! never journaled: a replay derives them again ([`fold`] is used by both).

use ichor_graph::{Event, KeysOnly, Object, ObjectKey, Prepared, World};
use ichor_renderers::auth::credentials::CREDENTIALS_SECRET_NAME;
use ichor_renderers::contract::{
    CREDENTIALS_NAMESPACE, USER_CREDENTIALS_TYPE, USER_LABEL, user_credentials_secret,
    user_of_credentials_secret,
};
use ichor_renderers::trust::NAMESPACE;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::read::{has_secret_key, label, secret_key_names};

/// The kind of the derived per-key objects. Never written to a cluster or a journal.
pub const CREDENTIALS_KEY_KIND: &str = "ichor.identity/CredentialsKey";

/// The kind of the derived objects naming each Secret of [`CREDENTIALS_NAMESPACE`] that is not
/// a user's credentials Secret (by what its metadata shows: named `ichor-user-<user>` and
/// labelled with that user). Never written to a cluster or a journal.
pub const FOREIGN_SECRET_KIND: &str = "ichor.identity/ForeignCredentialsSecret";

/// The kind of the object saying that the Secrets of [`CREDENTIALS_NAMESPACE`] were listed: the
/// controller's watcher applies it once a list of them is answered and deletes it when a list is
/// refused (the namespace or the controller's Role there missing, or not yet in the authorizer's
/// cache). An empty set of [`FOREIGN_SECRET_KIND`] objects means "no foreign Secret" only while
/// it is present; before, it means "not seen". An observation, journaled like any other; never
/// written to a cluster.
pub const CREDENTIALS_SECRETS_LISTED_KIND: &str = "ichor.identity/CredentialsSecretsListed";

/// The one object of kind [`CREDENTIALS_SECRETS_LISTED_KIND`], named after the namespace.
pub fn credentials_secrets_listed_key() -> ObjectKey {
    ObjectKey::new(
        CREDENTIALS_SECRETS_LISTED_KIND,
        CREDENTIALS_NAMESPACE,
        CREDENTIALS_NAMESPACE,
    )
}

/// The object of [`credentials_secrets_listed_key`] as a source delivers it (no value: its
/// presence is the word). `ichor dev`'s source, whose credentials file is read whole, delivers
/// it at start.
pub fn credentials_secrets_listed() -> Object {
    let key = credentials_secrets_listed_key();
    Object::new(&*key.kind, &*key.namespace, &*key.name, json!({}))
}

/// The derived object naming the foreign Secret `name` of [`CREDENTIALS_NAMESPACE`].
pub fn foreign_secret_key(name: &str) -> ObjectKey {
    ObjectKey::new(FOREIGN_SECRET_KIND, CREDENTIALS_NAMESPACE, name)
}

/// The key of the credentials Secret.
pub fn credentials_secret_key() -> ObjectKey {
    ObjectKey::new("Secret", NAMESPACE, CREDENTIALS_SECRET_NAME)
}

/// The journal projection of the credentials Secret: only its key names matter to the graph (no
/// node reads the Secret, only [`derived_events`] its keys), so a replay reads its values as
/// `null` instead of decoding one entry per user on every sign-in.
pub fn credentials_keys_only() -> KeysOnly {
    KeysOnly::new(
        "Secret",
        NAMESPACE,
        CREDENTIALS_SECRET_NAME,
        &["data", "stringData"],
    )
}

/// The derived object for one user's credentials.
pub fn credentials_key(user: &str) -> ObjectKey {
    ObjectKey::new(CREDENTIALS_KEY_KIND, NAMESPACE, user)
}

/// The key of `user`'s own credentials Secret in [`CREDENTIALS_NAMESPACE`].
pub fn per_user_secret_key(user: &str) -> ObjectKey {
    ObjectKey::new("Secret", CREDENTIALS_NAMESPACE, user_credentials_secret(user))
}

/// Where one user's credentials are stored: the value of its derived object.
///
/// A key of the legacy Secret alone serializes as `{}`, the value derived objects had before
/// per-user Secrets, so journals of the legacy layout replay to the same World and decisions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CredentialsSources {
    /// The legacy Secret holds a key for the user (omitted when it does).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub legacy: bool,
    /// The user's own Secret of [`CREDENTIALS_NAMESPACE`], when one is observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_user: Option<PerUserSource>,
}

/// A per-user credentials Secret as observed (by metadata only: never its entry).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PerUserSource {
    /// `metadata.uid` as observed: the precondition of its removal, so a Secret created again
    /// under the name since is never deleted on the strength of the old one's observation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

fn yes() -> bool {
    true
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_true(b: &bool) -> bool {
    *b
}

impl CredentialsSources {
    /// The sources a derived object holds; a value that does not decode (never written by
    /// [`derived_events`]) counts as the legacy key alone, what such an object meant before.
    pub fn of(derived: &Object) -> Self {
        serde_json::from_value(derived.value.clone()).unwrap_or(CredentialsSources {
            legacy: true,
            per_user: None,
        })
    }

    fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|_| json!({}))
    }
}

fn is_credentials(kind: &str, namespace: &str, name: &str) -> bool {
    kind == "Secret" && namespace == NAMESPACE && name == CREDENTIALS_SECRET_NAME
}

/// The user whose own credentials Secret `kind`/`namespace`/`name` would be.
fn per_user_of<'a>(kind: &str, namespace: &str, name: &'a str) -> Option<&'a str> {
    (kind == "Secret" && namespace == CREDENTIALS_NAMESPACE)
        .then(|| user_of_credentials_secret(name))
        .flatten()
}

/// `secret`, observed under `user`'s name, as a credentials source: labelled with that user
/// (what the metadata shows of the admission policy's rules) and, when its `type` is in the
/// value at all (a metadata watch leaves it out), of the per-user credentials type. Any other
/// Secret there is not credentials: never counted, never collected.
fn per_user_source(secret: &Object, user: &str) -> Option<PerUserSource> {
    if label(secret, USER_LABEL) != Some(user) {
        return None;
    }
    if let Some(type_) = secret.value.get("type")
        && type_.as_str() != Some(USER_CREDENTIALS_TYPE)
    {
        return None;
    }
    let uid = secret
        .value
        .get("metadata")
        .and_then(|m| m.get("uid"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    Some(PerUserSource { uid })
}

/// `user`'s own credentials Secret in `world`, as a source.
fn per_user_in(world: &World, user: &str) -> Option<PerUserSource> {
    world
        .get(&per_user_secret_key(user))
        .and_then(|s| per_user_source(s, user))
}

/// The derived event that makes `user`'s derived object hold `sources` (`None`: no
/// credentials), or nothing when it already does.
fn derive(world: &World, user: &str, legacy: bool, per_user: Option<PerUserSource>) -> Option<Event> {
    let current = world.get(&credentials_key(user));
    if !legacy && per_user.is_none() {
        return current.map(|_| Event::Deleted(credentials_key(user)));
    }
    let value = CredentialsSources { legacy, per_user }.to_value();
    if current.is_some_and(|c| c.value == value) {
        return None;
    }
    Some(Event::Applied(Object::new(
        CREDENTIALS_KEY_KIND,
        NAMESPACE,
        user,
        value,
    )))
}

/// The derived event recording whether the Secret of [`CREDENTIALS_NAMESPACE`] that `event`
/// is about is foreign (not a user's credentials Secret), or nothing when the World already
/// says so or the event is about another object.
fn foreign_event(world: &World, event: &Event) -> Option<Event> {
    let (name, foreign) = match event {
        Event::Applied(o) if o.kind == "Secret" && o.namespace == CREDENTIALS_NAMESPACE => {
            let source = user_of_credentials_secret(&o.name).and_then(|u| per_user_source(o, u));
            (&*o.name, source.is_none())
        }
        Event::Deleted(k) if &*k.kind == "Secret" && &*k.namespace == CREDENTIALS_NAMESPACE => {
            (&*k.name, false)
        }
        _ => return None,
    };
    let key = foreign_secret_key(name);
    match (world.get(&key).is_some(), foreign) {
        (false, true) => Some(Event::Applied(Object::new(
            FOREIGN_SECRET_KIND,
            CREDENTIALS_NAMESPACE,
            name,
            json!({}),
        ))),
        (true, false) => Some(Event::Deleted(key)),
        _ => None,
    }
}

/// The derived events of `event` against the World as it is *before* `event` is folded.
pub fn derived_events(world: &World, event: &Event) -> Vec<Event> {
    let mut out: Vec<Event> = foreign_event(world, event).into_iter().collect();
    out.extend(credentials_events(world, event));
    out
}

/// The derived credentials keys of `event` (see [`derived_events`]).
fn credentials_events(world: &World, event: &Event) -> Vec<Event> {
    let (user, source) = match event {
        Event::Applied(o) => match per_user_of(&o.kind, &o.namespace, &o.name) {
            Some(user) => (user, per_user_source(o, user)),
            None => return legacy_events(world, event),
        },
        Event::Deleted(k) => match per_user_of(&k.kind, &k.namespace, &k.name) {
            Some(user) => (user, None),
            None => return legacy_events(world, event),
        },
        Event::Tick(_) => return Vec::new(),
    };
    derive(world, user, legacy_holds(world, user), source)
        .into_iter()
        .collect()
}

/// Whether the legacy Secret in `world` holds a key for `user`.
fn legacy_holds(world: &World, user: &str) -> bool {
    world
        .get(&credentials_secret_key())
        .is_some_and(|s| has_secret_key(s, user))
}

/// The derived events of a change of the legacy Secret.
fn legacy_events(world: &World, event: &Event) -> Vec<Event> {
    let new = match event {
        Event::Applied(o) if is_credentials(&o.kind, &o.namespace, &o.name) => Some(o),
        Event::Deleted(k) if is_credentials(&k.kind, &k.namespace, &k.name) => None,
        _ => return Vec::new(),
    };
    let old = world.get(&credentials_secret_key());
    // A sign-in rewrites a value: the key names, in order, are those of the Secret before.
    if let (Some(old), Some(new)) = (old, new)
        && secret_key_names(old).eq(secret_key_names(new))
    {
        return Vec::new();
    }
    // The Secret holds a key per user and changes on every sign-in, usually without adding or
    // removing one: look each key up in the other Secret, and sort only the differences.
    let mut gone = keys_missing_from(old, new);
    let mut added = keys_missing_from(new, old);
    gone.sort_unstable();
    added.sort_unstable();
    // A user whose own Secret is observed keeps a derived object when the key goes.
    let mut out = Vec::with_capacity(gone.len() + added.len());
    out.extend(
        gone.into_iter()
            .filter_map(|k| derive(world, k, false, per_user_in(world, k))),
    );
    out.extend(
        added
            .into_iter()
            .filter_map(|k| derive(world, k, true, per_user_in(world, k))),
    );
    out
}

/// The key names of `secret` that `other` lacks (all of them when `other` is absent), unique.
fn keys_missing_from<'a>(secret: Option<&'a Object>, other: Option<&Object>) -> Vec<&'a str> {
    let Some(secret) = secret else {
        return Vec::new();
    };
    let mut out: Vec<&str> = secret_key_names(secret)
        .filter(|k| other.is_none_or(|o| !has_secret_key(o, k)))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Folds `event` and its derived events into the World.
pub fn fold(world: &mut World, event: Event) {
    drop(fold_prepared(world, Prepared::new(event)));
}

/// [`fold`] for an event whose object was hashed ahead (a journal read on another thread);
/// returns the object it replaced or removed (see [`World::apply_prepared`]).
pub fn fold_prepared(world: &mut World, prepared: Prepared) -> Option<Object> {
    let derived = derived_events(world, prepared.event());
    let done = world.apply_prepared(prepared);
    for d in derived {
        world.apply(d);
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(keys: &[&str]) -> Event {
        let data: serde_json::Map<String, serde_json::Value> =
            keys.iter().map(|k| ((*k).to_owned(), json!("e30="))).collect();
        Event::Applied(Object::new(
            "Secret",
            NAMESPACE,
            CREDENTIALS_SECRET_NAME,
            json!({ "data": data }),
        ))
    }

    #[test]
    fn one_derived_object_follows_each_credentials_key() {
        let mut w = World::new();
        fold(&mut w, creds(&["alice", "bob"]));
        assert_eq!(w.count(CREDENTIALS_KEY_KIND), 2);
        fold(&mut w, creds(&["bob", "carol"]));
        assert!(w.get(&credentials_key("alice")).is_none());
        assert!(w.get(&credentials_key("carol")).is_some());
        fold(&mut w, Event::Deleted(credentials_secret_key()));
        assert_eq!(w.count(CREDENTIALS_KEY_KIND), 0);
    }

    /// `user`'s own Secret as a metadata watch delivers it: name, labels, uid, no type, no data.
    fn per_user(user: &str, uid: &str, rv: &str) -> Event {
        let mut o = Object::new(
            "Secret",
            CREDENTIALS_NAMESPACE,
            user_credentials_secret(user),
            json!({"metadata": {"name": user_credentials_secret(user), "namespace": CREDENTIALS_NAMESPACE,
                "uid": uid, "labels": {USER_LABEL: user}}}),
        );
        o.resource_version = Some(rv.to_owned());
        Event::Applied(o)
    }

    fn sources(w: &World, user: &str) -> Option<CredentialsSources> {
        w.get(&credentials_key(user)).map(CredentialsSources::of)
    }

    fn from_own(uid: &str, legacy: bool) -> Option<CredentialsSources> {
        Some(CredentialsSources {
            legacy,
            per_user: Some(PerUserSource {
                uid: Some(uid.to_owned()),
            }),
        })
    }

    #[test]
    fn per_user_secrets_and_legacy_keys_project_to_one_key_each() {
        let mut w = World::new();
        fold(&mut w, creds(&["alice", "bob"]));
        fold(&mut w, per_user("bob", "u-bob", "1"));
        fold(&mut w, per_user("carol", "u-carol", "2"));
        assert_eq!(w.count(CREDENTIALS_KEY_KIND), 3, "one derived object per user");
        let legacy_only = CredentialsSources {
            legacy: true,
            per_user: None,
        };
        assert_eq!(sources(&w, "alice"), Some(legacy_only));
        assert_eq!(
            w.get(&credentials_key("alice")).map(|o| &o.value),
            Some(&json!({}))
        );
        assert_eq!(sources(&w, "bob"), from_own("u-bob", true));
        assert_eq!(sources(&w, "carol"), from_own("u-carol", false));

        // bob moved: his legacy key goes, his own Secret stays, so his derived object stays.
        fold(&mut w, creds(&["alice"]));
        assert_eq!(sources(&w, "bob"), from_own("u-bob", false));
        // carol's own Secret goes while the legacy Secret never held her: she has none left.
        fold(&mut w, Event::Deleted(per_user_secret_key("carol")));
        assert!(w.get(&credentials_key("carol")).is_none());
        // alice gains her own Secret, then loses her legacy key: kept throughout.
        fold(&mut w, per_user("alice", "u-alice", "3"));
        assert_eq!(sources(&w, "alice"), from_own("u-alice", true));
        fold(&mut w, Event::Deleted(credentials_secret_key()));
        assert_eq!(sources(&w, "alice"), from_own("u-alice", false));
        // Both sources gone: no derived object.
        fold(&mut w, Event::Deleted(per_user_secret_key("alice")));
        fold(&mut w, Event::Deleted(per_user_secret_key("bob")));
        assert_eq!(w.count(CREDENTIALS_KEY_KIND), 0);
    }

    #[test]
    fn a_per_user_secret_gone_while_its_legacy_key_remains_keeps_the_key() {
        let mut w = World::new();
        fold(&mut w, creds(&["dave"]));
        fold(&mut w, per_user("dave", "u-dave", "1"));
        fold(&mut w, Event::Deleted(per_user_secret_key("dave")));
        assert_eq!(
            w.get(&credentials_key("dave")).map(|o| &o.value),
            Some(&json!({}))
        );
        fold(&mut w, creds(&[]));
        assert!(w.get(&credentials_key("dave")).is_none());
    }

    #[test]
    fn a_refresh_rewriting_a_per_user_secret_derives_nothing() {
        let mut w = World::new();
        fold(&mut w, per_user("erin", "u-erin", "1"));
        assert!(derived_events(&w, &per_user("erin", "u-erin", "2")).is_empty());
        // Created again under the same name: the new uid is what a removal must name.
        let again = derived_events(&w, &per_user("erin", "u-erin-2", "3"));
        assert_eq!(again.len(), 1);
    }

    #[test]
    fn secrets_that_are_not_per_user_credentials_are_not_projected() {
        let mut w = World::new();
        // Unlabelled, labelled with another user, of another type, unprefixed, elsewhere.
        let Event::Applied(mut base) = per_user("frank", "u", "1") else {
            unreachable!()
        };
        let mut unlabelled = base.clone();
        unlabelled.value["metadata"]["labels"] = json!({});
        let mut other_user = base.clone();
        other_user.value["metadata"]["labels"][USER_LABEL] = json!("grace");
        let mut opaque = base.clone();
        opaque.value["type"] = json!("Opaque");
        let mut unprefixed = base.clone();
        unprefixed.name = "frank".to_owned();
        let mut elsewhere = base.clone();
        elsewhere.namespace = NAMESPACE.to_owned();
        for o in [unlabelled, other_user, opaque, unprefixed, elsewhere] {
            fold(&mut w, Event::Applied(o));
        }
        assert_eq!(w.count(CREDENTIALS_KEY_KIND), 0);
        // A full object of the right type counts (a journal of a test, a sim).
        base.value["type"] = json!(USER_CREDENTIALS_TYPE);
        fold(&mut w, Event::Applied(base));
        assert_eq!(sources(&w, "frank"), from_own("u", false));
    }

    #[test]
    fn a_secret_that_is_not_a_users_credentials_is_derived_as_foreign_until_it_goes() {
        let mut w = World::new();
        let Event::Applied(good) = per_user("gina", "u", "1") else {
            unreachable!()
        };
        let mut token = good.clone();
        token.name = "default-token-x".into();
        let mut mislabelled = good.clone();
        mislabelled.value["metadata"]["labels"][USER_LABEL] = json!("hank");
        mislabelled.name = user_credentials_secret("ivan");
        fold(&mut w, Event::Applied(good.clone()));
        fold(&mut w, Event::Applied(token.clone()));
        fold(&mut w, Event::Applied(mislabelled.clone()));
        assert_eq!(w.count(FOREIGN_SECRET_KIND), 2);
        assert!(w.get(&foreign_secret_key("default-token-x")).is_some());
        assert!(w.get(&foreign_secret_key("ichor-user-ivan")).is_some());
        assert!(
            derived_events(&w, &Event::Applied(token.clone())).is_empty(),
            "seen already"
        );
        // Labelled right after all: no longer foreign; the token Secret deleted: gone.
        mislabelled.value["metadata"]["labels"][USER_LABEL] = json!("ivan");
        fold(&mut w, Event::Applied(mislabelled));
        fold(&mut w, Event::Deleted(token.key()));
        assert_eq!(w.count(FOREIGN_SECRET_KIND), 0);
        // A Secret of ichor-system is never foreign.
        let mut elsewhere = good;
        elsewhere.namespace = NAMESPACE.into();
        elsewhere.name = "whatever".into();
        fold(&mut w, Event::Applied(elsewhere));
        assert_eq!(w.count(FOREIGN_SECRET_KIND), 0);
    }

    #[test]
    fn rewriting_an_existing_key_derives_nothing() {
        let mut w = World::new();
        fold(&mut w, creds(&["alice"]));
        assert!(derived_events(&w, &creds(&["alice"])).is_empty());
    }
}
