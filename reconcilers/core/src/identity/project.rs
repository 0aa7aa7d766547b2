//! The credentials projection: one derived object per key of `ichor-user-credentials`.
//!
//! The credentials Secret holds one key per user and changes on every sign-in (refresh-token
//! families). If every user's node read the whole Secret, each sign-in would recompute every
//! user, and the Secret (one entry per user) would be decoded once per user: quadratic. So before
//! an event is folded into the World, [`derived_events`] turns a change of that Secret into
//! events about derived objects of kind [`CREDENTIALS_KEY_KIND`], one per key, holding no secret
//! material (an empty value: only the key's existence matters). A user's node joins the one
//! derived object named after the user; a sign-in that rewrites an existing key changes nothing
//! derived, so nothing recomputes.
//!
//! Derived events are a pure function of the World before the event and the event, so they are
//! never journaled: a replay derives them again ([`fold`] is used by both).

use ichor_graph::{Event, KeysOnly, Object, ObjectKey, Prepared, World};
use ichor_renderers::auth::credentials::CREDENTIALS_SECRET_NAME;
use ichor_renderers::trust::NAMESPACE;
use serde_json::json;

use super::read::{has_secret_key, secret_key_names};

/// The kind of the derived per-key objects. Never written to a cluster or a journal.
pub const CREDENTIALS_KEY_KIND: &str = "ichor.identity/CredentialsKey";

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

/// The derived object for one user's key.
pub fn credentials_key(user: &str) -> ObjectKey {
    ObjectKey::new(CREDENTIALS_KEY_KIND, NAMESPACE, user)
}

fn is_credentials(kind: &str, namespace: &str, name: &str) -> bool {
    kind == "Secret" && namespace == NAMESPACE && name == CREDENTIALS_SECRET_NAME
}

/// The derived events of `event` against the World as it is *before* `event` is folded.
pub fn derived_events(world: &World, event: &Event) -> Vec<Event> {
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
    let mut out = Vec::with_capacity(gone.len() + added.len());
    out.extend(gone.into_iter().map(|k| Event::Deleted(credentials_key(k))));
    out.extend(
        added
            .into_iter()
            .map(|k| Event::Applied(Object::new(CREDENTIALS_KEY_KIND, NAMESPACE, k, json!({})))),
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

    #[test]
    fn rewriting_an_existing_key_derives_nothing() {
        let mut w = World::new();
        fold(&mut w, creds(&["alice"]));
        assert!(derived_events(&w, &creds(&["alice"])).is_empty());
    }
}
