//! The evaluation of a built [`Graph`] against a [`World`].
//!
//! An evaluation is a [`Pass`] over the slots in graph order, in steps:
//!
//! 1. `sources`: the digests of the source slots (now, one object, a kind) follow the World's
//!    changes since the previous evaluation;
//! 2. `computed`: each computed node recomputes the instances whose inputs' digests changed
//!    (`instance`), reading upstream outputs through `upstream`; emitters record what they
//!    desire (`emissions`);
//! 3. `actions`: the touched keys are diffed against the World, and newly requested effects
//!    follow.
//!
//! What persists from one evaluation to the next (digests, instance memos, desired objects,
//! effects, deadlines) is the `memo`.

mod actions;
mod computed;
mod emissions;
mod instance;
mod memo;
mod pass;
mod sources;
mod upstream;

use std::collections::BTreeSet;
use std::time::Instant;

use jiff::Timestamp;
use serde::de::DeserializeOwned;

use self::memo::{FamilyMemo, SlotState, State, emitted_object};
use self::pass::{Pass, Sinks};
use crate::builder::SlotDef;
use crate::canonical::Digest;
use crate::diff::{Action, EffectRequest, Ownership};
use crate::inputs::{Family, Node, SlotId};
use crate::object::{Object, ObjectKey};
use crate::stats::EvalStats;
use crate::world::World;

/// A node instance whose function could not run (an input or its output did not round-trip
/// through JSON). Its previous output is kept; it is retried when an input changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFailure {
    /// The node.
    pub node: String,
    /// The instance key, for a family.
    pub instance: Option<ObjectKey>,
    /// What went wrong.
    pub error: String,
}

/// Two node instances desire the same object. The first in graph order wins; the conflict is
/// reported each time the object is diffed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The object desired twice.
    pub key: ObjectKey,
    /// The nodes desiring it, `node[instance]`, the winner first.
    pub nodes: Vec<String>,
}

/// The result of one evaluation.
#[derive(Debug, Clone, Default)]
pub struct Evaluation {
    /// The actions, applies and deletes in key order, then newly requested effects.
    pub actions: Vec<Action>,
    /// The earliest deadline after `now` over all node instances.
    pub next_deadline: Option<Timestamp>,
    /// Node instances that failed.
    pub failures: Vec<NodeFailure>,
    /// Objects desired by more than one node instance.
    pub conflicts: Vec<Conflict>,
    /// Counters and timings.
    pub stats: EvalStats,
    /// The graph that evaluated (handles of another graph see no change).
    builder: u64,
    /// Per slot, the instance keys whose output changed or went away.
    changed: Vec<BTreeSet<ObjectKey>>,
}

impl Evaluation {
    /// The instances of a family node whose output changed in this evaluation (a new instance,
    /// a different output, or an instance gone), in key order; none for a handle of another
    /// graph. A caller following one family's outputs reads these instead of every instance,
    /// so its cost follows the change, not the family's size.
    pub fn changed_instances<T>(&self, family: &Family<T>) -> impl Iterator<Item = &ObjectKey> + '_ {
        let keys = if family.builder == self.builder {
            self.changed.get(family.slot)
        } else {
            None
        };
        keys.into_iter().flatten()
    }
}

/// A built graph with its memo: evaluate it after folding events into a [`World`].
///
/// Each evaluation looks only at what changed since the previous one: the objects touched by
/// events, the node instances reading them, and downstream instances whose inputs' digests
/// changed. The first evaluation (and the one after [`Graph::resync`]) looks at everything.
pub struct Graph {
    builder: u64,
    defs: Vec<SlotDef>,
    order: Vec<SlotId>,
    ownership: Ownership,
    state: State,
}

impl Graph {
    pub(crate) fn new(builder: u64, defs: Vec<SlotDef>, order: Vec<SlotId>, ownership: Ownership) -> Self {
        let state = State::new(&defs);
        Self {
            builder,
            defs,
            order,
            ownership,
            state,
        }
    }

    /// Forgets every memo, desired object and requested effect: the next evaluation is a first
    /// one. Use it to evaluate a graph against a new World (e.g. for a replay).
    pub fn reset(&mut self) {
        self.state = State::new(&self.defs);
    }

    /// Makes the next evaluation look at every object and instance (memos still skip what did
    /// not change) and diff every desired and owned object: a periodic safety net against
    /// lost writes.
    pub fn resync(&mut self) {
        self.state.resync = true;
    }

    /// Which observed objects this graph owns.
    pub fn ownership(&self) -> &Ownership {
        &self.ownership
    }

    /// Evaluates the graph against the World's changes since the last evaluation.
    pub fn evaluate(&mut self, world: &mut World) -> Evaluation {
        let started = Instant::now();
        let pending = world.take_pending();
        let world: &World = world;
        let full = !self.state.initialized || self.state.resync;
        let Graph {
            defs,
            order,
            ownership,
            state,
            ..
        } = self;
        let State {
            slots,
            desired,
            effects,
            deadlines,
            ..
        } = state;
        let sinks = Sinks {
            desired,
            effects,
            deadlines,
        };
        let mut pass = Pass::new(world, pending, full, defs.len(), sinks);
        for &slot in order.iter() {
            pass.evaluate_slot(defs, slots, slot);
        }
        let (actions, conflicts) = pass.actions(defs, slots, ownership);
        let Pass { ctx, mut stats, .. } = pass;
        state.initialized = true;
        state.resync = false;
        let next_deadline = self.next_deadline(world.now());
        stats.elapsed = started.elapsed();
        Evaluation {
            actions,
            next_deadline,
            failures: ctx.failures,
            conflicts,
            stats,
            builder: self.builder,
            changed: ctx.changed_keys,
        }
    }

    /// The earliest deadline strictly after `now` (or the earliest at all without `now`).
    pub fn next_deadline(&self, now: Option<Timestamp>) -> Option<Timestamp> {
        match now {
            None => self.state.deadlines.iter().next().map(|(t, _)| *t),
            Some(now) => self.state.deadlines.iter().map(|(t, _)| *t).find(|t| *t > now),
        }
    }

    /// The last output of a singleton node computed by this graph (`None` for sources, nodes
    /// not yet computed, and handles of another graph).
    pub fn output<T: DeserializeOwned>(&self, node: &Node<T>) -> Option<T> {
        if node.builder != self.builder {
            return None;
        }
        match self.state.slots.get(node.slot)? {
            SlotState::Node(Some(i)) => T::deserialize(&*i.output.as_ref()?.0.json().ok()?).ok(),
            _ => None,
        }
    }

    /// The last output of one instance of a family node computed by this graph.
    pub fn instance<T: DeserializeOwned>(&self, family: &Family<T>, key: &ObjectKey) -> Option<T> {
        if family.builder != self.builder {
            return None;
        }
        match self.state.slots.get(family.slot)? {
            SlotState::Family(FamilyMemo { instances, .. }) => {
                T::deserialize(&*instances.get(key)?.output.as_ref()?.0.json().ok()?).ok()
            }
            _ => None,
        }
    }

    /// The digest of the last output of one instance of a family node (equal digests mean
    /// equal outputs): lets a caller skip decoding an output it has already seen.
    pub fn instance_digest<T>(&self, family: &Family<T>, key: &ObjectKey) -> Option<Digest> {
        if family.builder != self.builder {
            return None;
        }
        match self.state.slots.get(family.slot)? {
            SlotState::Family(FamilyMemo { instances, .. }) => {
                instances.get(key)?.output.as_ref().map(|(_, d)| *d)
            }
            _ => None,
        }
    }

    /// How many entries the memo holds: node instances, join-index entries, entries of the
    /// whole-family digests, observed-object digests, desired objects, requested effects and
    /// deadlines. It is bounded by the live objects and instances, never by the number of
    /// events evaluated: a metric for the runtime, and what the tests hold the engine to.
    pub fn memo_entries(&self) -> usize {
        self.state.entries()
    }

    /// Every object currently desired (the winning node's version), in key order.
    pub fn desired(&self) -> impl Iterator<Item = &Object> + '_ {
        let slots = &self.state.slots;
        self.state
            .desired
            .values()
            .filter_map(|m| m.iter().next())
            .filter_map(|(o, i)| emitted_object(slots, o, *i))
    }

    /// Every effect currently requested, in id order. An effect stays requested until the
    /// graph observes its result.
    pub fn requested_effects(&self) -> impl Iterator<Item = &EffectRequest> + '_ {
        self.state.effects.values().filter_map(|m| m.values().next())
    }
}
