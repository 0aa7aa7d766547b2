//! What a [`Graph`](super::Graph) keeps between evaluations: per slot the digests of sources and
//! the memo of every node instance, and the desired objects, requested effects and deadlines
//! of the emitters.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;

use crate::builder::{Output, SlotDef, SlotKind};
use crate::canonical::Digest;
use crate::diff::{Cause, EffectRequest};
use crate::inputs::{InputKind, SlotId};
use crate::object::{Object, ObjectKey};
use crate::set_digest::SetDigest;

/// A node instance: `(node, instance key)`; the key is `None` for singleton nodes.
pub(super) type Origin = (SlotId, Option<ObjectKey>);

/// The memo of one node instance.
#[derive(Debug, Clone)]
pub(super) struct Instance {
    /// Per input digest, the primary first for family instances.
    pub(super) input_digests: Vec<Digest>,
    /// The digest over `input_digests` the output was computed from; `None` to force a
    /// recomputation (after a failure).
    pub(super) input_digest: Option<Digest>,
    /// The last successful output and its digest.
    pub(super) output: Option<(Output, Digest)>,
    pub(super) deadline: Option<Timestamp>,
    pub(super) cause: Cause,
    /// Join targets per input (`None` for inputs that are not joined), and the primary digest
    /// they were computed from.
    pub(super) joins: Vec<Option<ObjectKey>>,
    pub(super) joins_for: Option<Digest>,
    /// What this instance emitted, for emitters.
    pub(super) emitted: Vec<ObjectKey>,
    pub(super) requested: Vec<String>,
}

impl Instance {
    pub(super) fn empty(inputs: usize) -> Self {
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

/// One joined input's reverse index: per join target, the family instances joined to it.
pub(super) type Joiners = BTreeMap<ObjectKey, BTreeSet<ObjectKey>>;

#[derive(Debug, Default)]
pub(super) enum SlotState {
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
    Family(FamilyMemo),
}

/// The memo of a family node: its instances and what is kept to read them fast.
#[derive(Debug)]
pub(super) struct FamilyMemo {
    pub(super) instances: BTreeMap<ObjectKey, Instance>,
    /// Per input, its reverse index (empty for inputs that are not joined).
    pub(super) reverse: Vec<Joiners>,
    /// The digest of the whole family, kept only when an `All` input reads it.
    pub(super) set: Option<SetDigest>,
    /// How many instances have an output (what a `Count` input reads).
    pub(super) outputs: usize,
}

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) slots: Vec<SlotState>,
    /// Per desired key, the emitting instances and the index of the object in their stored
    /// output (the objects are not copied: [`emitted_object`] finds them).
    pub(super) desired: BTreeMap<ObjectKey, BTreeMap<Origin, usize>>,
    pub(super) effects: BTreeMap<String, BTreeMap<Origin, EffectRequest>>,
    pub(super) deadlines: BTreeSet<(Timestamp, Origin)>,
    pub(super) initialized: bool,
    pub(super) resync: bool,
}

impl State {
    /// An empty memo for the slots `defs`: nothing evaluated yet.
    pub(super) fn new(defs: &[SlotDef]) -> Self {
        // The slots some `All` input reads keep a digest of all their instances.
        let mut read_whole = vec![false; defs.len()];
        for spec in defs.iter().flat_map(SlotDef::inputs) {
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
        let slots = defs
            .iter()
            .enumerate()
            .map(|(slot, d)| match &d.kind {
                SlotKind::Now | SlotKind::Object(_) => SlotState::Single(None),
                SlotKind::Kind(_) => SlotState::Kind {
                    digests: BTreeMap::new(),
                    set: set(slot),
                },
                SlotKind::Node { .. } => SlotState::Node(None),
                SlotKind::Family { inputs, .. } => SlotState::Family(FamilyMemo {
                    instances: BTreeMap::new(),
                    reverse: vec![BTreeMap::new(); inputs.len()],
                    set: set(slot),
                    outputs: 0,
                }),
            })
            .collect();
        State {
            slots,
            ..State::default()
        }
    }

    /// How many entries the memo holds (see [`Graph::memo_entries`](super::Graph::memo_entries)).
    pub(super) fn entries(&self) -> usize {
        let slots: usize = self
            .slots
            .iter()
            .map(|s| match s {
                SlotState::Taken => 0,
                SlotState::Single(d) => usize::from(d.is_some()),
                SlotState::Kind { digests, set } => digests.len() + set.as_ref().map_or(0, SetDigest::len),
                SlotState::Node(i) => usize::from(i.is_some()),
                SlotState::Family(FamilyMemo {
                    instances,
                    reverse,
                    set,
                    ..
                }) => {
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
        let desired: usize = self.desired.values().map(BTreeMap::len).sum();
        let effects: usize = self.effects.values().map(BTreeMap::len).sum();
        slots + desired + effects + self.deadlines.len()
    }
}

/// The `index`th object of the stored output of the emitter instance `origin`.
pub(super) fn emitted_object<'a>(
    slots: &'a [SlotState],
    origin: &Origin,
    index: usize,
) -> Option<&'a Object> {
    let output = match (slots.get(origin.0)?, &origin.1) {
        (SlotState::Node(Some(inst)), None) => inst.output.as_ref(),
        (SlotState::Family(FamilyMemo { instances, .. }), Some(k)) => instances.get(k)?.output.as_ref(),
        _ => None,
    };
    match output {
        Some((Output::Desired(d), _)) => d.objects.get(index),
        _ => None,
    }
}
