//! The in-memory half of a sink, shared by the sinks that keep objects themselves (the local
//! files of `ichor dev`, the simulation): an apply merges the desired fields into the observed
//! object as server-side apply does for the fields it owns, stamps `lastTransitionTime` on new
//! conditions (the sink's half of the [`crate::identity::StatusWrite`] contract), and every
//! object written gets the next resourceVersion of a counter.

use ichor_graph::{Event, Object, World};
use jiff::Timestamp;
use serde_json::{Value, json};

use crate::identity::conditions::stamp_transition_times;

/// Merges `patch` into `base`: objects recursively, everything else replaced.
pub fn merge_into(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                match b.get_mut(k) {
                    Some(slot) => merge_into(slot, v),
                    None => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, p) => *b = p.clone(),
    }
}

/// `desired` with its new conditions stamped at `now`, merged into `base`.
pub fn merged(base: Option<&Value>, desired: &Value, now: Timestamp) -> Value {
    let mut desired = desired.clone();
    stamp_transition_times(&mut desired, now);
    let mut value = base.cloned().unwrap_or_else(|| json!({}));
    merge_into(&mut value, &desired);
    value
}

/// The object an apply of `desired` leaves in `world`, stamped at the World's latest tick (the
/// Unix epoch before the first one, so runs stay deterministic).
pub fn applied(world: &World, desired: &Object) -> Object {
    let now = world.now().unwrap_or(Timestamp::UNIX_EPOCH);
    let base = world.get(&desired.key()).map(|o| &o.value);
    Object::new(
        desired.kind.clone(),
        desired.namespace.clone(),
        desired.name.clone(),
        merged(base, &desired.value, now),
    )
}

/// A resourceVersion counter: each object written gets the next number.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResourceVersions(u64);

impl ResourceVersions {
    /// A counter whose next version is `last + 1`.
    pub fn after(last: u64) -> Self {
        ResourceVersions(last)
    }

    /// The last version given.
    pub fn last(&self) -> u64 {
        self.0
    }

    /// `event` with the next resourceVersion on its object (other events unchanged).
    pub fn stamp(&mut self, event: Event) -> Event {
        match event {
            Event::Applied(mut o) => {
                self.0 += 1;
                o.resource_version = Some(self.0.to_string());
                Event::Applied(o)
            }
            other => other,
        }
    }
}
