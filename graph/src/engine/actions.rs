//! The last step of an evaluation: the touched keys are diffed into applies and deletes, then
//! the newly requested effects follow, each with its reason.

use super::Conflict;
use super::instance::reason_of;
use super::memo::{Origin, SlotState, emitted_object};
use super::pass::Pass;
use crate::builder::SlotDef;
use crate::diff::{Action, Cause, Ownership, Reason, diff_one};

impl Pass<'_> {
    /// The actions of this evaluation (applies and deletes in key order, then newly requested
    /// effects) and the objects desired by more than one instance; counted in the stats.
    pub(super) fn actions(
        &mut self,
        defs: &[SlotDef],
        slots: &[SlotState],
        ownership: &Ownership,
    ) -> (Vec<Action>, Vec<Conflict>) {
        // Diff the touched keys only: desired by a recomputed emitter, or observed changed.
        if !self.full {
            self.ctx.diff_keys.extend(std::mem::take(&mut self.pending.keys));
        }
        let (mut actions, conflicts) = self.diff_touched(defs, slots, ownership);
        self.request_effects(defs, &mut actions);
        for a in &actions {
            match a {
                Action::Apply { .. } => self.stats.applies += 1,
                Action::Delete { .. } => self.stats.deletes += 1,
                Action::Effect { .. } => self.stats.effects += 1,
            }
        }
        (actions, conflicts)
    }

    /// Diffs each key to look at: the winning desired object (the first instance in graph
    /// order) against the observed one.
    fn diff_touched(
        &self,
        defs: &[SlotDef],
        slots: &[SlotState],
        ownership: &Ownership,
    ) -> (Vec<Action>, Vec<Conflict>) {
        let ctx = &self.ctx;
        let mut actions = Vec::new();
        let mut conflicts = Vec::new();
        let origin_name = |o: &Origin| {
            let name = defs.get(o.0).map(|d| d.name.as_str()).unwrap_or_default();
            match &o.1 {
                Some(k) => format!("{name}[{k}]"),
                None => name.to_owned(),
            }
        };
        for key in &ctx.diff_keys {
            let wanted = self.sinks.desired.get(key);
            if let Some(m) = wanted
                && m.len() > 1
            {
                conflicts.push(Conflict {
                    key: key.clone(),
                    nodes: m.keys().map(origin_name).collect(),
                });
            }
            let winner = wanted
                .and_then(|m| m.iter().next())
                .and_then(|(o, i)| Some((o, emitted_object(slots, o, *i)?)));
            let reason = winner.map(|(o, _)| {
                ctx.touched
                    .get(o)
                    .cloned()
                    .unwrap_or_else(|| reason_of(defs, o, Cause::Drift))
            });
            let desired = winner.zip(reason.as_ref()).map(|((_, obj), r)| (obj, r));
            if let Some(a) = diff_one(desired, self.world.get(key), key, ownership, || {
                ctx.dropped.get(key).cloned().unwrap_or(Reason {
                    node: None,
                    instance: None,
                    cause: Cause::Orphan,
                })
            }) {
                actions.push(a);
            }
        }
        (actions, conflicts)
    }

    /// Appends an effect action for each effect first requested in this evaluation.
    fn request_effects(&self, defs: &[SlotDef], actions: &mut Vec<Action>) {
        let ctx = &self.ctx;
        for (id, origin) in &ctx.new_effects {
            if let Some((_, request)) = self.sinks.effects.get(id).and_then(|m| m.iter().next()) {
                let reason = ctx
                    .touched
                    .get(origin)
                    .cloned()
                    .unwrap_or_else(|| reason_of(defs, origin, Cause::Drift));
                actions.push(Action::Effect {
                    request: request.clone(),
                    reason,
                });
            }
        }
    }
}
