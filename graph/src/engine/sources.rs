//! The first step for each source slot (now, one object, every object of a kind): its digests
//! follow the World, and what changed is recorded for the nodes reading it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::pass::Pass;
use crate::canonical::{Digest, digest_value};
use crate::inputs::SlotId;
use crate::object::{Object, ObjectKey};
use crate::set_digest::SetDigest;
use crate::world::Pending;

impl Pass<'_> {
    /// The digest of the World's time.
    pub(super) fn refresh_now(&mut self, slot: SlotId, d: &mut Option<Digest>) {
        let new = self
            .world
            .now()
            .and_then(|t| serde_json::to_value(t).ok())
            .map(|v| digest_value(&v));
        if *d != new {
            *d = new;
            self.ctx.changed_single[slot] = true;
        }
    }

    /// The digest of one object (of `null` while it is absent).
    pub(super) fn refresh_object(&mut self, slot: SlotId, key: &ObjectKey, d: &mut Option<Digest>) {
        let new = Some(
            self.world
                .get_with_digest(key)
                .map_or_else(|| digest_value(&Value::Null), |(_, d)| *d),
        );
        self.stats.objects_hashed += 1;
        if *d != new {
            *d = new;
            self.ctx.changed_single[slot] = true;
        }
    }

    /// The digests of the objects of one kind: every one in a full evaluation, else the
    /// pending ones.
    pub(super) fn refresh_kind(
        &mut self,
        slot: SlotId,
        kind: &str,
        digests: &mut BTreeMap<ObjectKey, Digest>,
        set: &mut Option<SetDigest>,
    ) {
        let keys: Vec<ObjectKey> = if self.full {
            let mut ks: BTreeSet<ObjectKey> = digests.keys().cloned().collect();
            ks.extend(self.world.objects(kind).map(Object::key));
            ks.into_iter().collect()
        } else {
            pending_of_kind(&self.pending, kind)
        };
        let changed = self.ctx.changed_keys.get_mut(slot);
        let mut changed_here = Vec::new();
        for k in keys {
            match self.world.get_with_digest(&k) {
                Some((_, &d)) => {
                    self.stats.objects_hashed += 1;
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
