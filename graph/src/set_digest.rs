//! The digest of a whole family, maintained as its instances change: what an `All` input is
//! memoised by.
//!
//! Recomputing a digest over every instance on each change made filling a family O(n²). This
//! is a Merkle trie instead: each entry is `(sha256 of the key, digest of the value)`; a node
//! holding at most [`LEAF_MAX`] entries is a leaf hashing them in order, a larger one branches
//! 16 ways on the next nibble of the key hashes and hashes its children's digests. Whether a
//! node is a leaf depends only on how many entries lie under it, so the shape, and the digest,
//! are a function of the set alone (not of the order of changes), and a change costs one leaf
//! and one path of branches: O(log n). Being built from sha256 only, the digest stays collision
//! resistant, unlike a sum or xor of entry digests, which crafted objects could cancel out.

use sha2::{Digest as _, Sha256};

use crate::canonical::Digest;
use crate::object::ObjectKey;

/// The most entries a leaf holds before it branches.
const LEAF_MAX: usize = 16;
/// The deepest level: one per nibble of a sha256.
const MAX_DEPTH: usize = 64;

/// A set of `(key, value digest)` entries with its digest kept up to date.
#[derive(Debug, Clone)]
pub(crate) struct SetDigest {
    root: Trie,
    digest: Digest,
    dirty: bool,
}

/// A node of the trie with its digest, `None` when a change below invalidated it.
#[derive(Debug, Clone)]
struct Trie {
    shape: Shape,
    cached: Option<Digest>,
}

#[derive(Debug, Clone)]
enum Shape {
    Leaf(Vec<(Digest, Digest)>),
    Branch { children: Box<[Trie; 16]>, count: usize },
}

/// What an insertion did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inserted {
    Unchanged,
    Replaced,
    Added,
}

impl Default for SetDigest {
    fn default() -> Self {
        let mut root = Trie::leaf(Vec::new());
        let digest = root.digest();
        Self {
            root,
            digest,
            dirty: false,
        }
    }
}

impl SetDigest {
    /// Sets the value digest of `key`, adding the entry if it is new.
    pub(crate) fn insert(&mut self, key: &ObjectKey, value: Digest) {
        if self.root.insert(key_hash(key), value, 0) != Inserted::Unchanged {
            self.dirty = true;
        }
    }

    /// Removes the entry of `key`, if present.
    pub(crate) fn remove(&mut self, key: &ObjectKey) {
        if self.root.remove(&key_hash(key), 0) {
            self.dirty = true;
        }
    }

    /// Recomputes the digest after changes; cheap when nothing changed.
    pub(crate) fn refresh(&mut self) {
        if self.dirty {
            self.digest = self.root.digest();
            self.dirty = false;
        }
    }

    /// The digest as of the last [`SetDigest::refresh`].
    pub(crate) fn digest(&self) -> Digest {
        self.digest
    }

    /// How many entries the set holds.
    pub(crate) fn len(&self) -> usize {
        self.root.count()
    }
}

/// The sha256 of a key, its parts length-prefixed so no two keys share an encoding.
fn key_hash(k: &ObjectKey) -> Digest {
    let mut h = Sha256::new();
    for part in [&k.kind, &k.namespace, &k.name] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    h.finalize().into()
}

/// The nibble of `hash` that picks the child at `depth`.
fn nibble(hash: &Digest, depth: usize) -> usize {
    let byte = hash.get(depth / 2).copied().unwrap_or(0);
    usize::from(if depth.is_multiple_of(2) {
        byte >> 4
    } else {
        byte & 0x0f
    })
}

impl Trie {
    fn leaf(entries: Vec<(Digest, Digest)>) -> Self {
        Self {
            shape: Shape::Leaf(entries),
            cached: None,
        }
    }

    fn count(&self) -> usize {
        match &self.shape {
            Shape::Leaf(entries) => entries.len(),
            Shape::Branch { count, .. } => *count,
        }
    }

    /// The node's digest, recomputing only what changed since it was last asked.
    fn digest(&mut self) -> Digest {
        if let Some(d) = self.cached {
            return d;
        }
        let mut h = Sha256::new();
        match &mut self.shape {
            Shape::Leaf(entries) => {
                h.update(b"leaf");
                for (k, v) in entries.iter() {
                    h.update(k);
                    h.update(v);
                }
            }
            Shape::Branch { children, .. } => {
                h.update(b"branch");
                for child in children.iter_mut() {
                    h.update(child.digest());
                }
            }
        }
        let d: Digest = h.finalize().into();
        self.cached = Some(d);
        d
    }

    fn insert(&mut self, key: Digest, value: Digest, depth: usize) -> Inserted {
        let done = match &mut self.shape {
            Shape::Leaf(entries) => {
                let done = match entries.binary_search_by(|(k, _)| k.cmp(&key)) {
                    Ok(i) => match entries.get_mut(i) {
                        Some((_, v)) if *v == value => Inserted::Unchanged,
                        Some((_, v)) => {
                            *v = value;
                            Inserted::Replaced
                        }
                        None => Inserted::Unchanged,
                    },
                    Err(i) => {
                        entries.insert(i, (key, value));
                        Inserted::Added
                    }
                };
                if entries.len() > LEAF_MAX && depth < MAX_DEPTH {
                    let entries = std::mem::take(entries);
                    *self = Trie::branch_of(entries, depth);
                }
                done
            }
            Shape::Branch { children, count } => {
                let Some(child) = children.get_mut(nibble(&key, depth)) else {
                    return Inserted::Unchanged;
                };
                let done = child.insert(key, value, depth + 1);
                if done == Inserted::Added {
                    *count += 1;
                }
                done
            }
        };
        if done != Inserted::Unchanged {
            self.cached = None;
        }
        done
    }

    fn remove(&mut self, key: &Digest, depth: usize) -> bool {
        let removed = match &mut self.shape {
            Shape::Leaf(entries) => match entries.binary_search_by(|(k, _)| k.cmp(key)) {
                Ok(i) => {
                    entries.remove(i);
                    true
                }
                Err(_) => false,
            },
            Shape::Branch { children, count } => {
                let removed = children
                    .get_mut(nibble(key, depth))
                    .is_some_and(|c| c.remove(key, depth + 1));
                if removed {
                    *count -= 1;
                    if *count <= LEAF_MAX {
                        let mut entries = Vec::with_capacity(*count);
                        self.drain_into(&mut entries);
                        *self = Trie::leaf(entries);
                    }
                }
                removed
            }
        };
        if removed {
            self.cached = None;
        }
        removed
    }

    /// Splits sorted entries 16 ways at `depth`, branching again where a child is too large.
    fn branch_of(entries: Vec<(Digest, Digest)>, depth: usize) -> Trie {
        let count = entries.len();
        let mut parts: [Vec<(Digest, Digest)>; 16] = Default::default();
        for e in entries {
            if let Some(p) = parts.get_mut(nibble(&e.0, depth)) {
                p.push(e);
            }
        }
        let children = parts.map(|p| {
            if p.len() > LEAF_MAX && depth + 1 < MAX_DEPTH {
                Trie::branch_of(p, depth + 1)
            } else {
                Trie::leaf(p)
            }
        });
        Trie {
            shape: Shape::Branch {
                children: Box::new(children),
                count,
            },
            cached: None,
        }
    }

    /// Moves every entry under this node into `out`, in key-hash order.
    fn drain_into(&mut self, out: &mut Vec<(Digest, Digest)>) {
        match &mut self.shape {
            Shape::Leaf(entries) => out.append(entries),
            Shape::Branch { children, .. } => children.iter_mut().for_each(|c| c.drain_into(out)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: usize) -> ObjectKey {
        ObjectKey::new("K", "ns", format!("k{i}"))
    }

    fn value(i: usize) -> Digest {
        crate::canonical::digest_bytes(&i.to_le_bytes())
    }

    fn of(entries: impl IntoIterator<Item = (usize, usize)>) -> SetDigest {
        let mut s = SetDigest::default();
        for (k, v) in entries {
            s.insert(&key(k), value(v));
        }
        s.refresh();
        s
    }

    #[test]
    fn the_digest_depends_on_the_set_only_not_on_the_order_of_changes() {
        let forward = of((0..500).map(|i| (i, i)));
        let backward = of((0..500).rev().map(|i| (i, i)));
        assert_eq!(forward.digest(), backward.digest());
        assert_eq!(forward.len(), 500);

        // Grow to 2,000 entries, change some, then shrink back: the same set, the same digest.
        let mut s = of((0..2_000).map(|i| (i, i + 7)));
        for i in 0..500 {
            s.insert(&key(i), value(i));
        }
        for i in 500..2_000 {
            s.remove(&key(i));
        }
        s.refresh();
        assert_eq!(s.digest(), forward.digest());
        assert_eq!(s.len(), 500);

        // Emptying it gives the empty set's digest.
        for i in 0..500 {
            s.remove(&key(i));
        }
        s.refresh();
        assert_eq!(s.digest(), SetDigest::default().digest());
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn any_change_of_a_key_or_a_value_changes_the_digest() {
        let base = of((0..100).map(|i| (i, i)));
        let mut changed_value = base.clone();
        changed_value.insert(&key(42), value(1_000));
        changed_value.refresh();
        assert_ne!(changed_value.digest(), base.digest());

        let mut added = base.clone();
        added.insert(&key(100), value(100));
        added.refresh();
        assert_ne!(added.digest(), base.digest());

        let mut removed = base.clone();
        removed.remove(&key(7));
        removed.refresh();
        assert_ne!(removed.digest(), base.digest());

        // Same values under swapped keys is a different set.
        let swapped = of((0..100).map(|i| (i, if i < 2 { 1 - i } else { i })));
        assert_ne!(swapped.digest(), base.digest());

        let mut same = base.clone();
        same.insert(&key(3), value(3));
        same.remove(&key(1_000));
        same.refresh();
        assert_eq!(same.digest(), base.digest());
    }
}
