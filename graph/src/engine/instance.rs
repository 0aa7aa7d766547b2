//! One node instance: recomputed when the digest of its inputs changed, or dropped when its
//! primary went away; and the reverse index of the join targets of family instances.

use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use super::NodeFailure;
use super::emissions::{Emitted, update_emissions};
use super::memo::{Instance, Joiners, Origin};
use super::pass::{Ctx, Sinks};
use super::upstream::{Primary, Upstream};
use crate::builder::{Output, SlotDef, SlotKind};
use crate::canonical::Digest;
use crate::diff::{Cause, Desired, Reason};
use crate::inputs::{InputKind, Reader, SlotId};
use crate::object::ObjectKey;

/// What evaluating one instance did.
pub(super) enum Outcome {
    Skipped,
    Recomputed,
    Failed,
}

/// The digest over the digests of an instance's inputs, in order.
fn combine(digests: &[Digest]) -> Digest {
    let mut h = Sha256::new();
    for d in digests {
        h.update(d);
    }
    h.finalize().into()
}

/// The reason of what the instance `origin` emits or stops emitting.
pub(super) fn reason_of(defs: &[SlotDef], origin: &Origin, cause: Cause) -> Reason {
    Reason {
        node: defs.get(origin.0).map(|d| d.name.clone()),
        instance: origin.1.clone(),
        cause,
    }
}

/// Evaluates one node instance if its inputs' digest changed.
pub(super) fn eval_instance(
    defs: &[SlotDef],
    origin: &Origin,
    primary: Option<(SlotId, Digest)>,
    inst: &mut Instance,
    up: &Upstream<'_>,
    ctx: &mut Ctx,
    sinks: &mut Sinks<'_>,
) -> Outcome {
    let Some(def) = defs.get(origin.0) else {
        return Outcome::Skipped;
    };
    let inputs = def.inputs();
    let key = origin.1.as_ref();
    let mut primary_value: Option<Primary<'_>> = None;
    let fail = |ctx: &mut Ctx, error: String| {
        ctx.failures.push(NodeFailure {
            node: def.name.clone(),
            instance: key.cloned(),
            error,
        });
        Outcome::Failed
    };
    let load_primary = |pslot: SlotId| match key.map(|k| up.primary(pslot, k)) {
        Some(Ok(Some(v))) => Ok(v),
        Some(Ok(None)) | None => Err(None),
        Some(Err(e)) => Err(Some(format!("its own object could not be encoded: {e}"))),
    };

    // Join targets follow the primary object; recompute them only when it changed.
    if let Some((pslot, pdigest)) = primary
        && inst.joins_for != Some(pdigest)
    {
        if inputs.iter().any(|s| matches!(s.kind, InputKind::Joined(_))) {
            let pv = match load_primary(pslot) {
                Ok(v) => v,
                Err(None) => return Outcome::Skipped,
                Err(Some(e)) => return fail(ctx, e),
            };
            for (i, spec) in inputs.iter().enumerate() {
                if let InputKind::Joined(join) = &spec.kind {
                    match join(pv.as_ref()) {
                        Ok(t) => {
                            if let Some(j) = inst.joins.get_mut(i) {
                                *j = t;
                            }
                        }
                        Err(e) => return fail(ctx, format!("the join of input {i} failed: {e}")),
                    }
                }
            }
            primary_value = Some(pv);
        }
        inst.joins_for = Some(pdigest);
    }

    let mut digests = Vec::with_capacity(inputs.len() + 1);
    if let Some((_, d)) = primary {
        digests.push(d);
    }
    for (i, spec) in inputs.iter().enumerate() {
        match up.input_digest(spec, inst.joins.get(i).and_then(Option::as_ref)) {
            Some(d) => digests.push(d),
            // An upstream singleton has no output yet (no tick, or it failed): wait.
            None => return Outcome::Skipped,
        }
    }
    let combined = combine(&digests);
    if inst.input_digest == Some(combined) {
        return Outcome::Skipped;
    }

    let pslot = primary.map(|(s, _)| s);
    let slots = pslot.into_iter().chain(inputs.iter().map(|s| s.slot));
    let cause = cause_of(defs, &inst.input_digests, slots, &digests);

    let reader = Reader {
        source: up,
        specs: inputs,
        joins: &inst.joins,
    };
    let computed = match (&def.kind, primary) {
        (SlotKind::Node { compute, .. }, None) => compute(&reader),
        (SlotKind::Family { compute, .. }, Some((pslot, _))) => {
            let pv = match primary_value.take() {
                Some(v) => v,
                None => match load_primary(pslot) {
                    Ok(v) => v,
                    Err(None) => return Outcome::Skipped,
                    Err(Some(e)) => return fail(ctx, e),
                },
            };
            match key {
                Some(k) => compute(k, pv.as_ref(), &reader),
                None => return Outcome::Skipped,
            }
        }
        _ => return Outcome::Skipped,
    };
    let (output, deadline) = match computed {
        Ok(c) => c,
        Err(e) => {
            inst.input_digest = None;
            return fail(ctx, e.to_string());
        }
    };
    // An emitter's output is a Desired by construction; decode it if it ever arrives as JSON.
    let output = match (def.emits, output) {
        (true, Output::Json(v)) => match Desired::deserialize(&v) {
            Ok(d) => Output::Desired(d),
            Err(e) => {
                inst.input_digest = None;
                return fail(ctx, format!("its output is not a Desired: {e}"));
            }
        },
        (_, o) => o,
    };
    let out_digest = output.digest();
    let output_changed = inst.output.as_ref().map(|(_, d)| *d) != Some(out_digest);

    if inst.deadline != deadline {
        if let Some(old) = inst.deadline {
            sinks.deadlines.remove(&(old, origin.clone()));
        }
        if let Some(new) = deadline {
            sinks.deadlines.insert((new, origin.clone()));
        }
    }
    inst.input_digests = digests;
    inst.input_digest = Some(combined);
    inst.deadline = deadline;
    // Only a changed output replaces the stored one: an equal digest means an equal value.
    if output_changed {
        inst.output = Some((output, out_digest));
        publish(defs, origin, inst, &cause, ctx, sinks);
    }
    inst.cause = cause;
    Outcome::Recomputed
}

/// Why an instance recomputes: its first computation, or the names of the inputs (the
/// primary first) whose digests differ from the previous computation's.
fn cause_of(
    defs: &[SlotDef],
    previous: &[Digest],
    slots: impl Iterator<Item = SlotId>,
    digests: &[Digest],
) -> Cause {
    if previous.is_empty() {
        return Cause::Initial;
    }
    let mut names = Vec::new();
    for (i, slot) in slots.enumerate() {
        if previous.get(i) != digests.get(i) {
            names.push(defs.get(slot).map(|d| d.name.clone()).unwrap_or_default());
        }
    }
    Cause::InputsChanged(names)
}

/// Tells the downstream nodes that the instance's output changed and, for an emitter, makes
/// its new output what it desires.
fn publish(
    defs: &[SlotDef],
    origin: &Origin,
    inst: &mut Instance,
    cause: &Cause,
    ctx: &mut Ctx,
    sinks: &mut Sinks<'_>,
) {
    if let Some(k) = &origin.1 {
        if let Some(set) = ctx.changed_keys.get_mut(origin.0) {
            set.insert(k.clone());
        }
    } else if let Some(c) = ctx.changed_single.get_mut(origin.0) {
        *c = true;
    }
    if defs.get(origin.0).is_some_and(|d| d.emits) {
        let reason = reason_of(defs, origin, cause.clone());
        let Instance {
            output,
            emitted,
            requested,
            ..
        } = inst;
        let desired = match output {
            Some((Output::Desired(d), _)) => Some(&*d),
            _ => None,
        };
        let emitted = Emitted {
            objects: emitted,
            effects: requested,
        };
        update_emissions(origin, emitted, desired, reason, sinks, ctx);
    }
}

/// Drops a family instance whose primary went away: its output, emissions and deadline.
pub(super) fn remove_instance(
    defs: &[SlotDef],
    origin: &Origin,
    mut inst: Instance,
    reverse: &mut [Joiners],
    ctx: &mut Ctx,
    sinks: &mut Sinks<'_>,
) {
    if let Some(key) = &origin.1 {
        unlink_joins(reverse, &inst.joins, key);
        if let Some(set) = ctx.changed_keys.get_mut(origin.0) {
            set.insert(key.clone());
        }
    }
    if let Some(d) = inst.deadline {
        sinks.deadlines.remove(&(d, origin.clone()));
    }
    if defs.get(origin.0).is_some_and(|d| d.emits) {
        let reason = reason_of(defs, origin, Cause::Removed);
        let emitted = Emitted {
            objects: &mut inst.emitted,
            effects: &mut inst.requested,
        };
        update_emissions(origin, emitted, None, reason, sinks, ctx);
    }
}

/// Removes `key` from the reverse index of each of its join targets.
pub(super) fn unlink_joins(reverse: &mut [Joiners], joins: &[Option<ObjectKey>], key: &ObjectKey) {
    for (i, target) in joins.iter().enumerate() {
        if let (Some(t), Some(index)) = (target, reverse.get_mut(i))
            && let Some(set) = index.get_mut(t)
        {
            set.remove(key);
            if set.is_empty() {
                index.remove(t);
            }
        }
    }
}

/// Adds `key` to the reverse index of each of its join targets.
pub(super) fn link_joins(reverse: &mut [Joiners], joins: &[Option<ObjectKey>], key: &ObjectKey) {
    for (i, target) in joins.iter().enumerate() {
        if let (Some(t), Some(index)) = (target, reverse.get_mut(i)) {
            index.entry(t.clone()).or_default().insert(key.clone());
        }
    }
}
