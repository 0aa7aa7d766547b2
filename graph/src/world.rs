//! The World: an indexed snapshot of every input object, folded from events.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;

use crate::event::Event;
use crate::object::{Object, ObjectKey};

/// An indexed snapshot folded from events: objects by kind, then by key, and `now` from the
/// latest [`Event::Tick`].
///
/// The World also remembers which keys changed since the graph last evaluated it, so an
/// evaluation costs the changed objects only, never the whole World. Evaluate one World with one
/// [`crate::Graph`].
#[derive(Debug, Default, Clone)]
pub struct World {
    kinds: BTreeMap<String, BTreeMap<ObjectKey, Object>>,
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
        match event {
            Event::Applied(object) => {
                let key = object.key();
                let objects = match self.kinds.get_mut(&object.kind) {
                    Some(objects) => objects,
                    None => self.kinds.entry(object.kind.clone()).or_default(),
                };
                match objects.get_mut(&key) {
                    Some(slot) => *slot = object,
                    None => {
                        objects.insert(key.clone(), object);
                        self.len += 1;
                    }
                }
                self.pending.keys.insert(key);
            }
            Event::Deleted(key) => {
                if let Some(objects) = self.kinds.get_mut(&*key.kind) {
                    if objects.remove(&key).is_some() {
                        self.len -= 1;
                    }
                    if objects.is_empty() {
                        self.kinds.remove(&*key.kind);
                    }
                }
                self.pending.keys.insert(key);
            }
            Event::Tick(now) => {
                if self.now != Some(now) {
                    self.now = Some(now);
                    self.pending.now_changed = true;
                }
            }
        }
    }

    /// The object with this key, if observed.
    pub fn get(&self, key: &ObjectKey) -> Option<&Object> {
        self.kinds.get(&*key.kind)?.get(key)
    }

    /// Every object of one kind, in key order.
    pub fn objects<'a>(&'a self, kind: &str) -> impl Iterator<Item = &'a Object> + 'a {
        self.kinds.get(kind).into_iter().flat_map(|m| m.values())
    }

    /// Every object of one kind with its key, in key order.
    pub(crate) fn entries<'a>(
        &'a self,
        kind: &str,
    ) -> impl Iterator<Item = (&'a ObjectKey, &'a Object)> + 'a {
        self.kinds.get(kind).into_iter().flat_map(|m| m.iter())
    }

    /// How many objects of one kind are observed.
    pub fn count(&self, kind: &str) -> usize {
        self.kinds.get(kind).map_or(0, BTreeMap::len)
    }

    /// Every object, by kind then key.
    pub fn iter(&self) -> impl Iterator<Item = &Object> + '_ {
        self.kinds.values().flat_map(|m| m.values())
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
}
