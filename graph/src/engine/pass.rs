//! One evaluation in progress: what it reads (the World and what changed in it) and what it
//! records as each slot is brought up to date, in graph order.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use jiff::Timestamp;

use super::NodeFailure;
use super::memo::{Origin, SlotState};
use super::upstream::Upstream;
use crate::builder::{SlotDef, SlotKind};
use crate::diff::{EffectRequest, Reason};
use crate::inputs::SlotId;
use crate::object::{Object, ObjectKey};
use crate::stats::{EvalStats, NodeStats};
use crate::world::{Pending, World};

/// Per-evaluation bookkeeping.
pub(super) struct Ctx {
    pub(super) changed_single: Vec<bool>,
    pub(super) changed_keys: Vec<BTreeSet<ObjectKey>>,
    /// Emitter instances that recomputed or went away, with their reason.
    pub(super) touched: BTreeMap<Origin, Reason>,
    /// Keys an emitter stopped desiring, with the reason.
    pub(super) dropped: BTreeMap<ObjectKey, Reason>,
    pub(super) new_effects: Vec<(String, Origin)>,
    pub(super) diff_keys: BTreeSet<ObjectKey>,
    pub(super) failures: Vec<NodeFailure>,
}

/// The mutable sinks of emitted objects, effects and deadlines.
pub(super) struct Sinks<'a> {
    pub(super) desired: &'a mut BTreeMap<ObjectKey, BTreeMap<Origin, usize>>,
    pub(super) effects: &'a mut BTreeMap<String, BTreeMap<Origin, EffectRequest>>,
    pub(super) deadlines: &'a mut BTreeSet<(Timestamp, Origin)>,
}

/// One evaluation of a graph against a World.
pub(super) struct Pass<'a> {
    pub(super) world: &'a World,
    /// What changed in the World since the previous evaluation.
    pub(super) pending: Pending,
    /// Every object and instance is looked at, and every desired and observed object diffed
    /// (the first evaluation, or one after a resync).
    pub(super) full: bool,
    pub(super) ctx: Ctx,
    pub(super) sinks: Sinks<'a>,
    pub(super) stats: EvalStats,
}

impl<'a> Pass<'a> {
    /// An evaluation of `slots` slots starting.
    pub(super) fn new(
        world: &'a World,
        pending: Pending,
        full: bool,
        slots: usize,
        sinks: Sinks<'a>,
    ) -> Self {
        let ctx = Ctx {
            changed_single: vec![false; slots],
            changed_keys: vec![BTreeSet::new(); slots],
            touched: BTreeMap::new(),
            dropped: BTreeMap::new(),
            new_effects: Vec::new(),
            // The pending keys join these before the diff.
            diff_keys: if full {
                world
                    .iter()
                    .map(Object::key)
                    .chain(sinks.desired.keys().cloned())
                    .collect()
            } else {
                BTreeSet::new()
            },
            failures: Vec::new(),
        };
        let stats = EvalStats {
            nodes: Vec::with_capacity(slots),
            ..EvalStats::default()
        };
        Self {
            world,
            pending,
            full,
            ctx,
            sinks,
            stats,
        }
    }

    /// Brings one slot up to date: a source's digests follow the World, a computed node
    /// recomputes the instances whose inputs changed. The slots upstream of it are up to date.
    pub(super) fn evaluate_slot(&mut self, defs: &[SlotDef], slots: &mut [SlotState], slot: SlotId) {
        let Some(def) = defs.get(slot) else { return };
        // Only computed nodes report their time and counters; sources are not timed.
        let computed = matches!(def.kind, SlotKind::Node { .. } | SlotKind::Family { .. });
        let mut st = slots.get_mut(slot).map(std::mem::take).unwrap_or_default();
        let mut node = NodeStats {
            name: if computed {
                def.shared_name.clone()
            } else {
                Arc::default()
            },
            ..NodeStats::default()
        };
        // Timed only when it does work: reading the clock for every idle node of every
        // evaluation costs more than most recomputations.
        let t0: Option<Instant> = {
            let up = Upstream {
                defs,
                slots,
                world: self.world,
            };
            match (&def.kind, &mut st) {
                (SlotKind::Now, SlotState::Single(d)) if self.full || self.pending.now_changed => {
                    self.refresh_now(slot, d);
                    None
                }
                (SlotKind::Object(key), SlotState::Single(d))
                    if self.full || self.pending.keys.contains(key) =>
                {
                    self.refresh_object(slot, key, d);
                    None
                }
                (SlotKind::Kind(kind), SlotState::Kind { digests, set }) => {
                    self.refresh_kind(slot, kind, digests, set);
                    None
                }
                (SlotKind::Node { inputs, .. }, SlotState::Node(inst)) => {
                    self.evaluate_node(&up, slot, inputs, inst, &mut node)
                }
                (SlotKind::Family { .. }, SlotState::Family(memo)) => {
                    self.evaluate_family(&up, slot, def, memo, &mut node)
                }
                _ => None,
            }
        };
        if let Some(s) = slots.get_mut(slot) {
            *s = st;
        }
        if computed {
            node.skipped = node.instances.saturating_sub(node.recomputed + node.failed);
            node.elapsed = t0.map(|t| t.elapsed()).unwrap_or_default();
            self.stats.recomputed += node.recomputed;
            self.stats.skipped += node.skipped;
            self.stats.failed += node.failed;
            self.stats.nodes.push(node);
        }
    }
}
