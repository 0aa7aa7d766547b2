//! The World: an indexed snapshot of every input object, folded from events.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;

use crate::canonical::{Digest, digest_object};
use crate::event::Event;
use crate::object::{Object, ObjectKey};

/// An event with the digest of its object computed ahead of folding it.
///
/// Hashing an object's canonical encoding is a large part of folding one event; a journal
/// reader running on another thread ([`crate::JournalReader::read_ahead`]) does it there, so
/// the thread that folds and evaluates only files the result.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    event: Event,
    digest: Option<Digest>,
}

impl Prepared {
    /// Prepares `event`: an applied object is hashed now.
    pub fn new(event: Event) -> Self {
        let digest = match &event {
            Event::Applied(object) => Some(digest_object(object)),
            Event::Deleted(_) | Event::Tick(_) => None,
        };
        Self { event, digest }
    }

    /// The event.
    pub fn event(&self) -> &Event {
        &self.event
    }

    /// The event, giving up the digest.
    pub fn into_event(self) -> Event {
        self.event
    }
}

impl From<Event> for Prepared {
    fn from(event: Event) -> Self {
        Self::new(event)
    }
}

/// An observed object and the digest of its canonical encoding.
#[derive(Debug, Clone)]
struct Held {
    object: Object,
    digest: Digest,
}

/// An indexed snapshot folded from events: objects by kind, then by key, and `now` from the
/// latest [`Event::Tick`].
///
/// The World also remembers which keys changed since the graph last evaluated it, so an
/// evaluation costs the changed objects only, never the whole World. Evaluate one World with one
/// [`crate::Graph`].
#[derive(Debug, Default, Clone)]
pub struct World {
    kinds: BTreeMap<String, BTreeMap<ObjectKey, Held>>,
    now: Option<Timestamp>,
    len: usize,
    pending: Pending,
}

/// What changed since the last evaluation.
#[derive(Debug, Default, Clone)]
pub(crate) struct Pending {
    pub(crate) keys: BTreeSet<ObjectKey>,
    pub(crate) now_changed: bool,
}

impl World {
    /// An empty World with no time yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds one event into the World.
    pub fn apply(&mut self, event: Event) {
        drop(self.apply_prepared(Prepared::new(event)));
    }

    /// Folds one event whose object was hashed ahead ([`Prepared`]); returns the object the
    /// event replaced or removed, so the caller decides where it is freed.
    pub fn apply_prepared(&mut self, prepared: Prepared) -> Option<Object> {
        let Prepared { event, digest } = prepared;
        match event {
            Event::Applied(object) => {
                let key = object.key();
                let digest = digest.unwrap_or_else(|| digest_object(&object));
                let held = Held { object, digest };
                let objects = match self.kinds.get_mut(&held.object.kind) {
                    Some(objects) => objects,
                    None => self.kinds.entry(held.object.kind.clone()).or_default(),
                };
                let replaced = match objects.get_mut(&key) {
                    Some(slot) => Some(std::mem::replace(slot, held).object),
                    None => {
                        objects.insert(key.clone(), held);
                        self.len += 1;
                        None
                    }
                };
                self.pending.keys.insert(key);
                replaced
            }
            Event::Deleted(key) => {
                let mut removed = None;
                if let Some(objects) = self.kinds.get_mut(&*key.kind) {
                    removed = objects.remove(&key).map(|h| h.object);
                    if removed.is_some() {
                        self.len -= 1;
                    }
                    if objects.is_empty() {
                        self.kinds.remove(&*key.kind);
                    }
                }
                self.pending.keys.insert(key);
                removed
            }
            Event::Tick(now) => {
                if self.now != Some(now) {
                    self.now = Some(now);
                    self.pending.now_changed = true;
                }
                None
            }
        }
    }

    /// The object with this key, if observed.
    pub fn get(&self, key: &ObjectKey) -> Option<&Object> {
        self.kinds.get(&*key.kind)?.get(key).map(|h| &h.object)
    }

    /// The object with this key and the sha256 of its canonical encoding (as
    /// [`digest_object`]), if observed.
    pub fn get_with_digest(&self, key: &ObjectKey) -> Option<(&Object, &Digest)> {
        self.kinds
            .get(&*key.kind)?
            .get(key)
            .map(|h| (&h.object, &h.digest))
    }

    /// Every object of one kind, in key order.
    pub fn objects<'a>(&'a self, kind: &str) -> impl Iterator<Item = &'a Object> + 'a {
        self.kinds
            .get(kind)
            .into_iter()
            .flat_map(|m| m.values())
            .map(|h| &h.object)
    }

    /// Every object of one kind with its key, in key order.
    pub(crate) fn entries<'a>(
        &'a self,
        kind: &str,
    ) -> impl Iterator<Item = (&'a ObjectKey, &'a Object)> + 'a {
        self.kinds
            .get(kind)
            .into_iter()
            .flat_map(|m| m.iter())
            .map(|(k, h)| (k, &h.object))
    }

    /// How many objects of one kind are observed.
    pub fn count(&self, kind: &str) -> usize {
        self.kinds.get(kind).map_or(0, BTreeMap::len)
    }

    /// Every object, by kind then key.
    pub fn iter(&self) -> impl Iterator<Item = &Object> + '_ {
        self.kinds.values().flat_map(|m| m.values()).map(|h| &h.object)
    }

    /// How many objects the World holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the World holds no object.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The time of the latest tick, if any.
    pub fn now(&self) -> Option<Timestamp> {
        self.now
    }

    /// Whether any object or the time changed since the last evaluation.
    pub fn has_pending_changes(&self) -> bool {
        !self.pending.keys.is_empty() || self.pending.now_changed
    }

    pub(crate) fn take_pending(&mut self) -> Pending {
        std::mem::take(&mut self.pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn folds_applies_deletes_and_ticks_into_an_indexed_snapshot() {
        let mut w = World::new();
        w.apply(Event::Applied(Object::new("User", "ns", "a", json!({"v": 1}))));
        w.apply(Event::Applied(Object::new("User", "ns", "b", json!({"v": 2}))));
        w.apply(Event::Applied(Object::new("User", "ns", "a", json!({"v": 3}))));
        w.apply(Event::Applied(Object::new("Cluster", "", "c", json!({}))));
        w.apply(Event::Deleted(ObjectKey::new("Cluster", "", "c")));
        w.apply(Event::Deleted(ObjectKey::new("Cluster", "", "never")));
        let t = Timestamp::from_second(1_800_000_000).unwrap();
        w.apply(Event::Tick(t));
        assert_eq!(w.len(), 2);
        assert_eq!(w.count("User"), 2);
        assert_eq!(w.count("Cluster"), 0);
        assert_eq!(
            w.get(&ObjectKey::new("User", "ns", "a")).unwrap().value,
            json!({"v": 3})
        );
        assert_eq!(w.now(), Some(t));
        let pending = w.take_pending();
        assert_eq!(pending.keys.len(), 4);
        assert!(pending.now_changed);
        assert!(!w.has_pending_changes());
    }

    #[test]
    fn folding_hands_back_the_object_replaced_or_removed() {
        let mut w = World::new();
        let a1 = Object::new("User", "ns", "a", json!({"v": 1}));
        let a2 = Object::new("User", "ns", "a", json!({"v": 2}));
        assert_eq!(w.apply_prepared(Prepared::new(Event::Applied(a1.clone()))), None);
        assert_eq!(
            w.apply_prepared(Prepared::new(Event::Applied(a2.clone()))),
            Some(a1)
        );
        assert_eq!(
            w.apply_prepared(Prepared::new(Event::Deleted(a2.key()))),
            Some(a2)
        );
        assert_eq!(
            w.apply_prepared(Prepared::new(Event::Deleted(ObjectKey::new("User", "ns", "a")))),
            None
        );
        assert!(w.is_empty());
    }
}
