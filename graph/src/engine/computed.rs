//! The step for each computed slot: a singleton node, or a family with one instance per
//! instance of its primary. Only the instances whose inputs may have changed are looked at.

use std::collections::BTreeSet;
use std::time::Instant;

use super::instance::{Outcome, eval_instance, link_joins, remove_instance, unlink_joins};
use super::memo::{FamilyMemo, Instance, Joiners};
use super::pass::Pass;
use super::upstream::Upstream;
use crate::builder::{SlotDef, SlotKind};
use crate::inputs::{InputKind, InputSpec, SlotId};
use crate::object::ObjectKey;
use crate::stats::NodeStats;

impl Pass<'_> {
    /// Recomputes a singleton node when an input changed (or it has never succeeded); returns
    /// when it started working, `None` when it had nothing to do.
    pub(super) fn evaluate_node(
        &mut self,
        up: &Upstream<'_>,
        slot: SlotId,
        inputs: &[InputSpec],
        inst: &mut Option<Box<Instance>>,
        node: &mut NodeStats,
    ) -> Option<Instant> {
        let mut t0 = None;
        let any_changed = inputs.iter().any(|s| self.input_changed(s));
        if self.full || any_changed || inst.as_ref().is_none_or(|i| i.input_digest.is_none()) {
            t0 = Some(Instant::now());
            let instance = inst.get_or_insert_with(|| Box::new(Instance::empty(inputs.len())));
            let origin = (slot, None);
            tally(
                node,
                eval_instance(
                    up.defs,
                    &origin,
                    None,
                    instance,
                    up,
                    &mut self.ctx,
                    &mut self.sinks,
                ),
            );
        }
        node.instances = usize::from(inst.as_ref().is_some_and(|i| i.output.is_some()));
        t0
    }

    /// Recomputes the instances of a family whose primary or inputs changed, creates those of
    /// new primaries and drops those of primaries gone; returns when it started working, `None`
    /// when it had nothing to do.
    pub(super) fn evaluate_family(
        &mut self,
        up: &Upstream<'_>,
        slot: SlotId,
        def: &SlotDef,
        memo: &mut FamilyMemo,
        node: &mut NodeStats,
    ) -> Option<Instant> {
        let SlotKind::Family {
            primary,
            inputs,
            existence_only,
            ..
        } = &def.kind
        else {
            return None;
        };
        let FamilyMemo {
            instances,
            reverse,
            set,
            outputs,
        } = memo;
        let mut t0 = None;
        let joined = inputs.iter().any(|s| matches!(s.kind, InputKind::Joined(_)));
        let candidates = self.candidates(up, *primary, inputs, instances.keys(), reverse);
        if !candidates.is_empty() {
            t0 = Some(Instant::now());
        }
        for key in candidates {
            let Some(pdigest) = up.instance_digest(*primary, &key) else {
                if let Some(inst) = instances.remove(&key) {
                    if inst.output.is_some() {
                        *outputs = outputs.saturating_sub(1);
                        if let Some(s) = set.as_mut() {
                            s.remove(&key);
                        }
                    }
                    let origin = (slot, Some(key));
                    remove_instance(up.defs, &origin, inst, reverse, &mut self.ctx, &mut self.sinks);
                }
                continue;
            };
            // An existence-only instance that exists has nothing to recompute.
            if *existence_only && instances.get(&key).is_some_and(|i| i.output.is_some()) {
                continue;
            }
            if !instances.contains_key(&key) {
                instances.insert(key.clone(), Instance::empty(inputs.len()));
            }
            let Some(inst) = instances.get_mut(&key) else {
                continue;
            };
            let origin = (slot, Some(key));
            // Joins are recomputed only when the primary changed (see eval_instance).
            let old_joins = (joined && inst.joins_for != Some(pdigest)).then(|| inst.joins.clone());
            let before = inst.output.as_ref().map(|(_, d)| *d);
            let outcome = eval_instance(
                up.defs,
                &origin,
                Some((*primary, pdigest)),
                inst,
                up,
                &mut self.ctx,
                &mut self.sinks,
            );
            let Some(key) = &origin.1 else { continue };
            if let Some(old_joins) = old_joins
                && inst.joins != old_joins
            {
                unlink_joins(reverse, &old_joins, key);
                link_joins(reverse, &inst.joins, key);
            }
            let after = inst.output.as_ref().map(|(_, d)| *d);
            if before.is_none() && after.is_some() {
                *outputs += 1;
            }
            if after != before
                && let (Some(s), Some(d)) = (set.as_mut(), after)
            {
                s.insert(key, d);
            }
            tally(node, outcome);
        }
        if let Some(s) = set.as_mut() {
            s.refresh();
        }
        node.instances = instances.len();
        t0
    }

    /// The instances of a family to look at: every one (existing, or due to a primary) when the
    /// evaluation is full or a shared input changed; else those whose primary changed and those
    /// joined to a changed target.
    fn candidates<'k>(
        &self,
        up: &Upstream<'_>,
        primary: SlotId,
        inputs: &[InputSpec],
        existing: impl Iterator<Item = &'k ObjectKey>,
        reverse: &[Joiners],
    ) -> BTreeSet<ObjectKey> {
        let shared_changed = inputs.iter().any(|s| match s.kind {
            InputKind::Joined(_) => false,
            _ => self.input_changed(s),
        });
        if self.full || shared_changed {
            let mut c: BTreeSet<ObjectKey> = up.instance_keys(primary).into_iter().collect();
            c.extend(existing.cloned());
            return c;
        }
        let mut c = self.ctx.changed_keys.get(primary).cloned().unwrap_or_default();
        for (i, spec) in inputs.iter().enumerate() {
            if let (InputKind::Joined(_), Some(index), Some(changed)) =
                (&spec.kind, reverse.get(i), self.ctx.changed_keys.get(spec.slot))
            {
                for t in changed {
                    if let Some(set) = index.get(t) {
                        c.extend(set.iter().cloned());
                    }
                }
            }
        }
        c
    }

    /// Whether the slot an input reads changed in this evaluation.
    fn input_changed(&self, input: &InputSpec) -> bool {
        self.ctx.changed_single.get(input.slot).copied().unwrap_or(false)
            || self
                .ctx
                .changed_keys
                .get(input.slot)
                .is_some_and(|k| !k.is_empty())
    }
}

fn tally(node: &mut NodeStats, outcome: Outcome) {
    match outcome {
        Outcome::Skipped => {}
        Outcome::Recomputed => node.recomputed += 1,
        Outcome::Failed => node.failed += 1,
    }
}
