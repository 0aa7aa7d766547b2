//! Read access to the outputs and digests of the slots upstream of the one being evaluated.

use std::borrow::Cow;

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use super::memo::{FamilyMemo, SlotState};
use crate::builder::{SlotDef, SlotKind};
use crate::canonical::Digest;
use crate::inputs::{InputKind, InputSpec, PrimaryRef, SlotId, ValueSource};
use crate::object::{Object, ObjectKey};
use crate::set_digest::SetDigest;
use crate::world::World;

/// The own object of a family instance while it is evaluated.
pub(super) enum Primary<'a> {
    Object(&'a Object),
    Json(Cow<'a, Value>),
}

impl Primary<'_> {
    pub(super) fn as_ref(&self) -> PrimaryRef<'_> {
        match self {
            Primary::Object(o) => PrimaryRef::Object(o),
            Primary::Json(v) => PrimaryRef::Json(v),
        }
    }
}

/// Read access to upstream outputs for node functions.
pub(super) struct Upstream<'a> {
    pub(super) defs: &'a [SlotDef],
    pub(super) slots: &'a [SlotState],
    pub(super) world: &'a World,
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
            (SlotKind::Family { .. }, Some(SlotState::Family(FamilyMemo { instances, .. })), Some(k)) => {
                instances
                    .get(k)
                    .and_then(|i| i.output.as_ref())
                    .map(|(o, _)| o.json())
                    .transpose()?
            }
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
            (_, Some(SlotState::Family(FamilyMemo { instances, .. }))) => {
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
            Some(SlotState::Family(FamilyMemo { outputs, .. })) => *outputs,
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
    pub(super) fn primary(
        &self,
        slot: SlotId,
        key: &ObjectKey,
    ) -> Result<Option<Primary<'_>>, serde_json::Error> {
        Ok(
            match (self.defs.get(slot).map(|d| &d.kind), self.slots.get(slot)) {
                (Some(SlotKind::Kind(kind)), _) if **kind == *key.kind => {
                    self.world.get(key).map(Primary::Object)
                }
                (_, Some(SlotState::Family(FamilyMemo { instances, .. }))) => {
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
    pub(super) fn instance_digest(&self, slot: SlotId, key: &ObjectKey) -> Option<Digest> {
        match self.slots.get(slot)? {
            SlotState::Kind { digests, .. } => digests.get(key).copied(),
            SlotState::Family(FamilyMemo { instances, .. }) => {
                instances.get(key)?.output.as_ref().map(|(_, d)| *d)
            }
            _ => None,
        }
    }

    /// The keys of a family slot's instances that have an output.
    pub(super) fn instance_keys(&self, slot: SlotId) -> Vec<ObjectKey> {
        match self.slots.get(slot) {
            Some(SlotState::Kind { digests, .. }) => digests.keys().cloned().collect(),
            Some(SlotState::Family(FamilyMemo { instances, .. })) => instances
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
            Some(
                SlotState::Kind { set: Some(s), .. } | SlotState::Family(FamilyMemo { set: Some(s), .. }),
            ) => s.digest(),
            // Not maintained (never the case for a slot an `All` input reads): build it.
            Some(SlotState::Kind { digests, .. }) => {
                let mut s = SetDigest::default();
                digests.iter().for_each(|(k, d)| s.insert(k, *d));
                s.refresh();
                s.digest()
            }
            Some(SlotState::Family(FamilyMemo { instances, .. })) => {
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

    /// The digest of one input of an instance as its node reads it (`join`: the instance's
    /// target for a joined input); `None` while an upstream singleton has no output.
    pub(super) fn input_digest(&self, spec: &InputSpec, join: Option<&ObjectKey>) -> Option<Digest> {
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
