//! What emitter instances desire: their objects and effects, kept in the [`Sinks`] and
//! recorded in the [`Ctx`] for the diff.

use std::collections::{BTreeMap, BTreeSet};

use super::memo::Origin;
use super::pass::{Ctx, Sinks};
use crate::diff::{Desired, Reason};
use crate::object::ObjectKey;

/// What an emitting instance currently emits: desired object keys and effect ids.
pub(super) struct Emitted<'a> {
    pub(super) objects: &'a mut Vec<ObjectKey>,
    pub(super) effects: &'a mut Vec<String>,
}

/// Replaces what `origin` emits: objects and effects, recording what changed in `ctx`.
pub(super) fn update_emissions(
    origin: &Origin,
    emitted: Emitted<'_>,
    new: Option<&Desired>,
    reason: Reason,
    sinks: &mut Sinks<'_>,
    ctx: &mut Ctx,
) {
    let (objects, effects) = match new {
        Some(d) => (&d.objects[..], &d.effects[..]),
        None => (&[][..], &[][..]),
    };
    let mut new_keys = Vec::with_capacity(objects.len());
    for (index, object) in objects.iter().enumerate() {
        let key = object.key();
        match sinks.desired.get_mut(&key) {
            Some(by_origin) => match by_origin.get_mut(origin) {
                Some(i) => *i = index,
                None => {
                    by_origin.insert(origin.clone(), index);
                }
            },
            None => {
                sinks
                    .desired
                    .insert(key.clone(), BTreeMap::from([(origin.clone(), index)]));
            }
        }
        ctx.diff_keys.insert(key.clone());
        new_keys.push(key);
    }
    // A set to look old keys up in, for emitters of many objects.
    let lookup: Option<BTreeSet<&ObjectKey>> = (new_keys.len() > 16).then(|| new_keys.iter().collect());
    for old in std::mem::take(emitted.objects) {
        let kept = match &lookup {
            Some(set) => set.contains(&old),
            None => new_keys.contains(&old),
        };
        if kept {
            continue;
        }
        if let Some(m) = sinks.desired.get_mut(&old) {
            m.remove(origin);
            if m.is_empty() {
                sinks.desired.remove(&old);
            }
        }
        ctx.diff_keys.insert(old.clone());
        ctx.dropped.insert(old, reason.clone());
    }
    drop(lookup);
    *emitted.objects = new_keys;

    let mut new_ids = Vec::with_capacity(effects.len());
    for request in effects {
        let entry = match sinks.effects.get_mut(&request.id) {
            Some(e) => e,
            None => sinks.effects.entry(request.id.clone()).or_default(),
        };
        if entry.is_empty() {
            ctx.new_effects.push((request.id.clone(), origin.clone()));
        }
        match entry.get_mut(origin) {
            Some(r) => r.clone_from(request),
            None => {
                entry.insert(origin.clone(), request.clone());
            }
        }
        new_ids.push(request.id.clone());
    }
    for old in std::mem::take(emitted.effects) {
        if new_ids.contains(&old) {
            continue;
        }
        if let Some(m) = sinks.effects.get_mut(&old) {
            m.remove(origin);
            if m.is_empty() {
                sinks.effects.remove(&old);
            }
        }
    }
    *emitted.effects = new_ids;
    ctx.touched.insert(origin.clone(), reason);
}
