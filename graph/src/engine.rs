//! The evaluation of a built [`Graph`] against a [`World`].

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use jiff::Timestamp;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::builder::{Output, SlotDef, SlotKind};
use crate::canonical::{Digest, digest_value};
use crate::diff::{Action, Cause, Desired, EffectRequest, Ownership, Reason, diff_one};
use crate::inputs::{Family, InputKind, InputSpec, Node, PrimaryRef, Reader, SlotId, ValueSource};
use crate::object::{Object, ObjectKey};
use crate::set_digest::SetDigest;
use crate::stats::{EvalStats, NodeStats};
use crate::world::{Pending, World};

/// A node instance: `(node, instance key)`; the key is `None` for singleton nodes.
type Origin = (SlotId, Option<ObjectKey>);

/// The memo of one node instance.
#[derive(Debug, Clone)]
struct Instance {
    /// Per input digest, the primary first for family instances.
    input_digests: Vec<Digest>,
    /// The digest over `input_digests` the output was computed from; `None` to force a
    /// recomputation (after a failure).
    input_digest: Option<Digest>,
    /// The last successful output and its digest.
    output: Option<(Output, Digest)>,
    deadline: Option<Timestamp>,
    cause: Cause,
    /// Join targets per input (`None` for inputs that are not joined), and the primary digest
    /// they were computed from.
    joins: Vec<Option<ObjectKey>>,
    joins_for: Option<Digest>,
    /// What this instance emitted, for emitters.
    emitted: Vec<ObjectKey>,
    requested: Vec<String>,
}

impl Instance {
    fn empty(inputs: usize) -> Self {
        Self {
            input_digests: Vec::new(),
            input_digest: None,
            output: None,
            deadline: None,
            cause: Cause::Initial,
            joins: vec![None; inputs],
            joins_for: None,
            emitted: Vec::new(),
            requested: Vec::new(),
        }
    }
}

#[derive(Debug, Default)]
enum SlotState {
    /// Placeholder while the slot is being evaluated.
    #[default]
    Taken,
    Single(Option<Digest>),
    Kind {
        digests: BTreeMap<ObjectKey, Digest>,
        /// The digest of the whole kind, kept only when an `All` input reads it.
        set: Option<SetDigest>,
    },
    Node(Option<Box<Instance>>),
    Family {
        instances: BTreeMap<ObjectKey, Instance>,
        reverse: Vec<BTreeMap<ObjectKey, BTreeSet<ObjectKey>>>,
        /// The digest of the whole family, kept only when an `All` input reads it.
        set: Option<SetDigest>,
        /// How many instances have an output (what a `Count` input reads).
        outputs: usize,
    },
}

/// The own object of a family instance while it is evaluated.
enum Primary<'a> {
    Object(&'a Object),
    Json(Cow<'a, Value>),
}

impl Primary<'_> {
    fn as_ref(&self) -> PrimaryRef<'_> {
        match self {
            Primary::Object(o) => PrimaryRef::Object(o),
            Primary::Json(v) => PrimaryRef::Json(v),
        }
    }
}

#[derive(Debug, Default)]
struct State {
    slots: Vec<SlotState>,
    /// Per desired key, the emitting instances and the index of the object in their stored
    /// output (the objects are not copied: [`emitted_object`] finds them).
    desired: BTreeMap<ObjectKey, BTreeMap<Origin, usize>>,
    effects: BTreeMap<String, BTreeMap<Origin, EffectRequest>>,
    deadlines: BTreeSet<(Timestamp, Origin)>,
    initialized: bool,
    resync: bool,
}

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

/// Read access to upstream outputs for node functions.
struct Upstream<'a> {
    defs: &'a [SlotDef],
    slots: &'a [SlotState],
    world: &'a World,
}

impl ValueSource for Upstream<'_> {
    fn value(
        &self,
        slot: SlotId,
        key: Option<&ObjectKey>,
    ) -> Result<Option<Cow<'_, Value>>, serde_json::Error> {
        let Some(def) = self.defs.get(slot) else {
            return Ok(None);
        };
        Ok(match (&def.kind, self.slots.get(slot), key) {
            (SlotKind::Now, _, _) => self
                .world
                .now()
                .map(serde_json::to_value)
                .transpose()?
                .map(Cow::Owned),
            (SlotKind::Object(k), _, _) => Some(Cow::Owned(serde_json::to_value(self.world.get(k))?)),
            (SlotKind::Kind(kind), _, Some(k)) if **kind == *k.kind => self
                .world
                .get(k)
                .map(serde_json::to_value)
                .transpose()?
                .map(Cow::Owned),
            (SlotKind::Node { .. }, Some(SlotState::Node(Some(inst))), None) => {
                inst.output.as_ref().map(|(o, _)| o.json()).transpose()?
            }
            (SlotKind::Family { .. }, Some(SlotState::Family { instances, .. }), Some(k)) => instances
                .get(k)
                .and_then(|i| i.output.as_ref())
                .map(|(o, _)| o.json())
                .transpose()?,
            _ => None,
        })
    }

    fn for_each_instance(
        &self,
        slot: SlotId,
        each: &mut dyn FnMut(&ObjectKey, &Value) -> Result<(), serde_json::Error>,
    ) -> Result<(), serde_json::Error> {
        match (self.defs.get(slot).map(|d| &d.kind), self.slots.get(slot)) {
            (Some(SlotKind::Kind(kind)), _) => {
                for (k, o) in self.world.entries(kind) {
                    each(k, &serde_json::to_value(o)?)?;
                }
            }
            (_, Some(SlotState::Family { instances, .. })) => {
                for (k, i) in instances {
                    if let Some((o, _)) = &i.output {
                        each(k, &*o.json()?)?;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn count(&self, slot: SlotId) -> usize {
        match self.slots.get(slot) {
            Some(SlotState::Kind { digests, .. }) => digests.len(),
            Some(SlotState::Family { outputs, .. }) => *outputs,
            _ => 0,
        }
    }

    fn object(&self, slot: SlotId, key: Option<&ObjectKey>) -> Option<Option<&Object>> {
        match (&self.defs.get(slot)?.kind, key) {
            (SlotKind::Object(k), None) => Some(self.world.get(k)),
            (SlotKind::Kind(kind), Some(k)) if **kind == *k.kind => Some(self.world.get(k)),
            _ => None,
        }
    }

    fn for_each_object(&self, slot: SlotId, each: &mut dyn FnMut(&ObjectKey, &Object)) -> bool {
        match self.defs.get(slot).map(|d| &d.kind) {
            Some(SlotKind::Kind(kind)) => {
                self.world.entries(kind).for_each(|(k, o)| each(k, o));
                true
            }
            _ => false,
        }
    }
}

impl Upstream<'_> {
    /// The digest of a singleton slot's output, `None` when it has none yet.
    fn single_digest(&self, slot: SlotId) -> Option<Digest> {
        match self.slots.get(slot)? {
            SlotState::Single(d) => *d,
            SlotState::Node(i) => i.as_ref()?.output.as_ref().map(|(_, d)| *d),
            _ => None,
        }
    }

    /// The own object of one instance of a family slot, `None` when it has none.
    fn primary(&self, slot: SlotId, key: &ObjectKey) -> Result<Option<Primary<'_>>, serde_json::Error> {
        Ok(
            match (self.defs.get(slot).map(|d| &d.kind), self.slots.get(slot)) {
                (Some(SlotKind::Kind(kind)), _) if **kind == *key.kind => {
                    self.world.get(key).map(Primary::Object)
                }
                (_, Some(SlotState::Family { instances, .. })) => {
                    match instances.get(key).and_then(|i| i.output.as_ref()) {
                        Some((o, _)) => Some(Primary::Json(o.json()?)),
                        None => None,
                    }
                }
                _ => None,
            },
        )
    }

    /// The digest of one instance of a family slot, `None` when it has no output.
    fn instance_digest(&self, slot: SlotId, key: &ObjectKey) -> Option<Digest> {
        match self.slots.get(slot)? {
            SlotState::Kind { digests, .. } => digests.get(key).copied(),
            SlotState::Family { instances, .. } => instances.get(key)?.output.as_ref().map(|(_, d)| *d),
            _ => None,
        }
    }

    /// The keys of a family slot's instances that have an output.
    fn instance_keys(&self, slot: SlotId) -> Vec<ObjectKey> {
        match self.slots.get(slot) {
            Some(SlotState::Kind { digests, .. }) => digests.keys().cloned().collect(),
            Some(SlotState::Family { instances, .. }) => instances
                .iter()
                .filter(|(_, i)| i.output.is_some())
                .map(|(k, _)| k.clone())
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The digest over every instance of a family (keys and output digests): kept up to date
    /// by the family's evaluation when an `All` input reads it, so reading it is O(1).
    fn all_digest(&self, slot: SlotId) -> Digest {
        match self.slots.get(slot) {
            Some(SlotState::Kind { set: Some(s), .. } | SlotState::Family { set: Some(s), .. }) => s.digest(),
            // Not maintained (never the case for a slot an `All` input reads): build it.
            Some(SlotState::Kind { digests, .. }) => {
                let mut s = SetDigest::default();
                digests.iter().for_each(|(k, d)| s.insert(k, *d));
                s.refresh();
                s.digest()
            }
            Some(SlotState::Family { instances, .. }) => {
                let mut s = SetDigest::default();
                for (k, i) in instances {
                    if let Some((_, d)) = &i.output {
                        s.insert(k, *d);
                    }
                }
                s.refresh();
                s.digest()
            }
            _ => SetDigest::default().digest(),
        }
    }

    fn input_digest(&self, spec: &InputSpec, join: Option<&ObjectKey>) -> Option<Digest> {
        match &spec.kind {
            InputKind::Single => self.single_digest(spec.slot),
            InputKind::All => Some(self.all_digest(spec.slot)),
            InputKind::Count => {
                let mut h = Sha256::new();
                h.update(b"count");
                h.update((self.count(spec.slot) as u64).to_le_bytes());
                Some(h.finalize().into())
            }
            InputKind::Joined(_) => {
                let mut h = Sha256::new();
                match join {
                    None => h.update(b"no-target"),
                    Some(k) => {
                        for part in [&k.kind, &k.namespace, &k.name] {
                            h.update((part.len() as u64).to_le_bytes());
                            h.update(part.as_bytes());
                        }
                        match self.instance_digest(spec.slot, k) {
                            Some(d) => h.update(d),
                            None => h.update(b"absent"),
                        }
                    }
                }
                Some(h.finalize().into())
            }
        }
    }
}

/// Per-evaluation bookkeeping.
struct Ctx {
    changed_single: Vec<bool>,
    changed_keys: Vec<BTreeSet<ObjectKey>>,
    /// Emitter instances that recomputed or went away, with their reason.
    touched: BTreeMap<Origin, Reason>,
    /// Keys an emitter stopped desiring, with the reason.
    dropped: BTreeMap<ObjectKey, Reason>,
    new_effects: Vec<(String, Origin)>,
    diff_keys: BTreeSet<ObjectKey>,
    failures: Vec<NodeFailure>,
}

/// The mutable sinks of emitted objects, effects and deadlines.
struct Sinks<'a> {
    desired: &'a mut BTreeMap<ObjectKey, BTreeMap<Origin, usize>>,
    effects: &'a mut BTreeMap<String, BTreeMap<Origin, EffectRequest>>,
    deadlines: &'a mut BTreeSet<(Timestamp, Origin)>,
}

enum Outcome {
    Skipped,
    Recomputed,
    Failed,
}

fn combine(digests: &[Digest]) -> Digest {
    let mut h = Sha256::new();
    for d in digests {
        h.update(d);
    }
    h.finalize().into()
}

fn reason_of(defs: &[SlotDef], origin: &Origin, cause: Cause) -> Reason {
    Reason {
        node: defs.get(origin.0).map(|d| d.name.clone()),
        instance: origin.1.clone(),
        cause,
    }
}

/// What an emitting instance currently emits: desired object keys and effect ids.
struct Emitted<'a> {
    objects: &'a mut Vec<ObjectKey>,
    effects: &'a mut Vec<String>,
}

/// Replaces what `origin` emits: objects and effects, recording what changed in `ctx`.
fn update_emissions(
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

/// Evaluates one node instance if its inputs' digest changed.
#[allow(clippy::too_many_arguments)]
fn eval_instance(
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

    let cause = if inst.input_digests.is_empty() {
        Cause::Initial
    } else {
        let mut names = Vec::new();
        let pslot = primary.map(|(s, _)| s);
        let slots = pslot.into_iter().chain(inputs.iter().map(|s| s.slot));
        for (i, slot) in slots.enumerate() {
            if inst.input_digests.get(i) != digests.get(i) {
                names.push(defs.get(slot).map(|d| d.name.clone()).unwrap_or_default());
            }
        }
        Cause::InputsChanged(names)
    };

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
        if let Some(k) = key {
            if let Some(set) = ctx.changed_keys.get_mut(origin.0) {
                set.insert(k.clone());
            }
        } else if let Some(c) = ctx.changed_single.get_mut(origin.0) {
            *c = true;
        }
        if def.emits {
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
    inst.cause = cause;
    Outcome::Recomputed
}

/// Drops a family instance whose primary went away: its output, emissions and deadline.
fn remove_instance(
    defs: &[SlotDef],
    origin: &Origin,
    mut inst: Instance,
    reverse: &mut [BTreeMap<ObjectKey, BTreeSet<ObjectKey>>],
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

fn unlink_joins(
    reverse: &mut [BTreeMap<ObjectKey, BTreeSet<ObjectKey>>],
    joins: &[Option<ObjectKey>],
    key: &ObjectKey,
) {
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

fn link_joins(
    reverse: &mut [BTreeMap<ObjectKey, BTreeSet<ObjectKey>>],
    joins: &[Option<ObjectKey>],
    key: &ObjectKey,
) {
    for (i, target) in joins.iter().enumerate() {
        if let (Some(t), Some(index)) = (target, reverse.get_mut(i)) {
            index.entry(t.clone()).or_default().insert(key.clone());
        }
    }
}

impl Graph {
    pub(crate) fn new(builder: u64, defs: Vec<SlotDef>, order: Vec<SlotId>, ownership: Ownership) -> Self {
        let mut g = Self {
            builder,
            defs,
            order,
            ownership,
            state: State::default(),
        };
        g.reset();
        g
    }

    /// Forgets every memo, desired object and requested effect: the next evaluation is a first
    /// one. Use it to evaluate a graph against a new World (e.g. for a replay).
    pub fn reset(&mut self) {
        // The slots some `All` input reads keep a digest of all their instances.
        let mut read_whole = vec![false; self.defs.len()];
        for spec in self.defs.iter().flat_map(SlotDef::inputs) {
            if let (InputKind::All, Some(r)) = (&spec.kind, read_whole.get_mut(spec.slot)) {
                *r = true;
            }
        }
        let set = |slot: SlotId| {
            read_whole
                .get(slot)
                .copied()
                .unwrap_or(false)
                .then(SetDigest::default)
        };
        let slots = self
            .defs
            .iter()
            .enumerate()
            .map(|(slot, d)| match &d.kind {
                SlotKind::Now | SlotKind::Object(_) => SlotState::Single(None),
                SlotKind::Kind(_) => SlotState::Kind {
                    digests: BTreeMap::new(),
                    set: set(slot),
                },
                SlotKind::Node { .. } => SlotState::Node(None),
                SlotKind::Family { inputs, .. } => SlotState::Family {
                    instances: BTreeMap::new(),
                    reverse: vec![BTreeMap::new(); inputs.len()],
                    set: set(slot),
                    outputs: 0,
                },
            })
            .collect();
        self.state = State {
            slots,
            ..State::default()
        };
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
        let n = self.defs.len();
        let mut ctx = Ctx {
            changed_single: vec![false; n],
            changed_keys: vec![BTreeSet::new(); n],
            touched: BTreeMap::new(),
            dropped: BTreeMap::new(),
            new_effects: Vec::new(),
            // The pending keys join these before the diff.
            diff_keys: if full {
                world
                    .iter()
                    .map(Object::key)
                    .chain(self.state.desired.keys().cloned())
                    .collect()
            } else {
                BTreeSet::new()
            },
            failures: Vec::new(),
        };
        let mut stats = EvalStats {
            nodes: Vec::with_capacity(n),
            ..EvalStats::default()
        };
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
        let mut sinks = Sinks {
            desired,
            effects,
            deadlines,
        };

        for &slot in order.iter() {
            let Some(def) = defs.get(slot) else { continue };
            // Only computed nodes report their time and counters; sources are not timed.
            let computed = matches!(def.kind, SlotKind::Node { .. } | SlotKind::Family { .. });
            // Timed only when it does work: reading the clock for every idle node of every
            // evaluation costs more than most recomputations.
            let mut t0: Option<Instant> = None;
            let mut st = slots.get_mut(slot).map(std::mem::take).unwrap_or_default();
            let mut node = NodeStats {
                name: if computed {
                    def.shared_name.clone()
                } else {
                    Arc::default()
                },
                ..NodeStats::default()
            };
            {
                let up = Upstream { defs, slots, world };
                match (&def.kind, &mut st) {
                    (SlotKind::Now, SlotState::Single(d)) if full || pending.now_changed => {
                        let new = world
                            .now()
                            .and_then(|t| serde_json::to_value(t).ok())
                            .map(|v| digest_value(&v));
                        if *d != new {
                            *d = new;
                            ctx.changed_single[slot] = true;
                        }
                    }
                    (SlotKind::Object(key), SlotState::Single(d)) if full || pending.keys.contains(key) => {
                        let new = Some(
                            world
                                .get_with_digest(key)
                                .map_or_else(|| digest_value(&Value::Null), |(_, d)| *d),
                        );
                        stats.objects_hashed += 1;
                        if *d != new {
                            *d = new;
                            ctx.changed_single[slot] = true;
                        }
                    }
                    (SlotKind::Kind(kind), SlotState::Kind { digests, set }) => {
                        let keys: Vec<ObjectKey> = if full {
                            let mut ks: BTreeSet<ObjectKey> = digests.keys().cloned().collect();
                            ks.extend(world.objects(kind).map(Object::key));
                            ks.into_iter().collect()
                        } else {
                            pending_of_kind(&pending, kind)
                        };
                        let changed = ctx.changed_keys.get_mut(slot);
                        let mut changed_here = Vec::new();
                        for k in keys {
                            match world.get_with_digest(&k) {
                                Some((_, &d)) => {
                                    stats.objects_hashed += 1;
                                    let is_new = match digests.get_mut(&k) {
                                        Some(old) if *old == d => continue,
                                        Some(old) => {
                                            *old = d;
                                            false
                                        }
                                        None => true,
                                    };
                                    if is_new {
                                        digests.insert(k.clone(), d);
                                    }
                                    if let Some(s) = set.as_mut() {
                                        s.insert(&k, d);
                                    }
                                    changed_here.push(k);
                                }
                                None => {
                                    if digests.remove(&k).is_some() {
                                        if let Some(s) = set.as_mut() {
                                            s.remove(&k);
                                        }
                                        changed_here.push(k);
                                    }
                                }
                            }
                        }
                        if let Some(c) = changed {
                            c.extend(changed_here);
                        }
                        if let Some(s) = set.as_mut() {
                            s.refresh();
                        }
                    }
                    (SlotKind::Node { inputs, .. }, SlotState::Node(inst)) => {
                        let any_changed = inputs.iter().any(|s| {
                            ctx.changed_single.get(s.slot).copied().unwrap_or(false)
                                || ctx.changed_keys.get(s.slot).is_some_and(|k| !k.is_empty())
                        });
                        if full || any_changed || inst.as_ref().is_none_or(|i| i.input_digest.is_none()) {
                            t0 = Some(Instant::now());
                            let instance =
                                inst.get_or_insert_with(|| Box::new(Instance::empty(inputs.len())));
                            let origin = (slot, None);
                            tally(
                                &mut node,
                                eval_instance(defs, &origin, None, instance, &up, &mut ctx, &mut sinks),
                            );
                        }
                        node.instances = usize::from(inst.as_ref().is_some_and(|i| i.output.is_some()));
                    }
                    (
                        SlotKind::Family {
                            primary,
                            inputs,
                            existence_only,
                            ..
                        },
                        SlotState::Family {
                            instances,
                            reverse,
                            set,
                            outputs,
                        },
                    ) => {
                        let shared_changed = inputs.iter().any(|s| match s.kind {
                            InputKind::Joined(_) => false,
                            _ => {
                                ctx.changed_single.get(s.slot).copied().unwrap_or(false)
                                    || ctx.changed_keys.get(s.slot).is_some_and(|k| !k.is_empty())
                            }
                        });
                        let joined = inputs.iter().any(|s| matches!(s.kind, InputKind::Joined(_)));
                        let candidates: BTreeSet<ObjectKey> = if full || shared_changed {
                            let mut c: BTreeSet<ObjectKey> = up.instance_keys(*primary).into_iter().collect();
                            c.extend(instances.keys().cloned());
                            c
                        } else {
                            let mut c = ctx.changed_keys.get(*primary).cloned().unwrap_or_default();
                            for (i, spec) in inputs.iter().enumerate() {
                                if let (InputKind::Joined(_), Some(index), Some(changed)) =
                                    (&spec.kind, reverse.get(i), ctx.changed_keys.get(spec.slot))
                                {
                                    for t in changed {
                                        if let Some(set) = index.get(t) {
                                            c.extend(set.iter().cloned());
                                        }
                                    }
                                }
                            }
                            c
                        };
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
                                    remove_instance(defs, &origin, inst, reverse, &mut ctx, &mut sinks);
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
                            let old_joins =
                                (joined && inst.joins_for != Some(pdigest)).then(|| inst.joins.clone());
                            let before = inst.output.as_ref().map(|(_, d)| *d);
                            let outcome = eval_instance(
                                defs,
                                &origin,
                                Some((*primary, pdigest)),
                                inst,
                                &up,
                                &mut ctx,
                                &mut sinks,
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
                            tally(&mut node, outcome);
                        }
                        if let Some(s) = set.as_mut() {
                            s.refresh();
                        }
                        node.instances = instances.len();
                    }
                    _ => {}
                }
            }
            if let Some(s) = slots.get_mut(slot) {
                *s = st;
            }
            if computed {
                node.skipped = node.instances.saturating_sub(node.recomputed + node.failed);
                node.elapsed = t0.map(|t| t.elapsed()).unwrap_or_default();
                stats.recomputed += node.recomputed;
                stats.skipped += node.skipped;
                stats.failed += node.failed;
                stats.nodes.push(node);
            }
        }

        // Diff the touched keys only: desired by a recomputed emitter, or observed changed.
        if !full {
            ctx.diff_keys.extend(pending.keys);
        }
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
            let wanted = sinks.desired.get(key);
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
            if let Some(a) = diff_one(desired, world.get(key), key, ownership, || {
                ctx.dropped.get(key).cloned().unwrap_or(Reason {
                    node: None,
                    instance: None,
                    cause: Cause::Orphan,
                })
            }) {
                actions.push(a);
            }
        }
        for (id, origin) in &ctx.new_effects {
            if let Some((_, request)) = sinks.effects.get(id).and_then(|m| m.iter().next()) {
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
        for a in &actions {
            match a {
                Action::Apply { .. } => stats.applies += 1,
                Action::Delete { .. } => stats.deletes += 1,
                Action::Effect { .. } => stats.effects += 1,
            }
        }
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
            SlotState::Family { instances, .. } => {
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
            SlotState::Family { instances, .. } => instances.get(key)?.output.as_ref().map(|(_, d)| *d),
            _ => None,
        }
    }

    /// How many entries the memo holds: node instances, join-index entries, entries of the
    /// whole-family digests, observed-object digests, desired objects, requested effects and
    /// deadlines. It is bounded by the live objects and instances, never by the number of
    /// events evaluated: a metric for the runtime, and what the tests hold the engine to.
    pub fn memo_entries(&self) -> usize {
        let slots: usize = self
            .state
            .slots
            .iter()
            .map(|s| match s {
                SlotState::Taken => 0,
                SlotState::Single(d) => usize::from(d.is_some()),
                SlotState::Kind { digests, set } => digests.len() + set.as_ref().map_or(0, SetDigest::len),
                SlotState::Node(i) => usize::from(i.is_some()),
                SlotState::Family {
                    instances,
                    reverse,
                    set,
                    ..
                } => {
                    instances.len()
                        + reverse
                            .iter()
                            .flat_map(BTreeMap::values)
                            .map(BTreeSet::len)
                            .sum::<usize>()
                        + set.as_ref().map_or(0, SetDigest::len)
                }
            })
            .sum();
        let desired: usize = self.state.desired.values().map(BTreeMap::len).sum();
        let effects: usize = self.state.effects.values().map(BTreeMap::len).sum();
        slots + desired + effects + self.state.deadlines.len()
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

/// The `index`th object of the stored output of the emitter instance `origin`.
fn emitted_object<'a>(slots: &'a [SlotState], origin: &Origin, index: usize) -> Option<&'a Object> {
    let output = match (slots.get(origin.0)?, &origin.1) {
        (SlotState::Node(Some(inst)), None) => inst.output.as_ref(),
        (SlotState::Family { instances, .. }, Some(k)) => instances.get(k)?.output.as_ref(),
        _ => None,
    };
    match output {
        Some((Output::Desired(d), _)) => d.objects.get(index),
        _ => None,
    }
}

/// The pending keys of one kind, in key order. An evaluation usually follows one event, so the
/// few pending keys are scanned rather than searched (a search would build a key to start at).
fn pending_of_kind(pending: &Pending, kind: &str) -> Vec<ObjectKey> {
    pending
        .keys
        .iter()
        .filter(|k| *k.kind == *kind)
        .cloned()
        .collect()
}

fn tally(node: &mut NodeStats, outcome: Outcome) {
    match outcome {
        Outcome::Skipped => {}
        Outcome::Recomputed => node.recomputed += 1,
        Outcome::Failed => node.failed += 1,
    }
}
