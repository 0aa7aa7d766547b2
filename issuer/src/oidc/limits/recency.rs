//! [`RecencyMap`]: a hash map that knows which entry was touched least recently, so that a
//! bounded table can forget its stalest entry in O(1) amortised time instead of scanning.

use std::{
    collections::{HashMap, VecDeque},
    hash::Hash,
};

/// A map whose entries are ordered by when they were last inserted or touched.
///
/// The order is a queue of `(key, stamp)` pairs: touching an entry gives it a new stamp and
/// appends it, leaving the old pair behind as stale (an entry is live only under its latest
/// stamp). Stale pairs are skipped when they reach the front and the queue is compacted when they
/// outnumber the live entries, so every operation is O(1) amortised.
#[derive(Debug)]
pub struct RecencyMap<K, V> {
    entries: HashMap<K, (V, u64)>,
    order: VecDeque<(K, u64)>,
    next: u64,
}

impl<K, V> Default for RecencyMap<K, V> {
    fn default() -> Self {
        RecencyMap {
            entries: HashMap::new(),
            order: VecDeque::new(),
            next: 0,
        }
    }
}

impl<K: Hash + Eq + Clone, V> RecencyMap<K, V> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `key` has an entry.
    pub fn contains_key(&self, key: &K) -> bool {
        self.entries.contains_key(key)
    }

    /// The value of `key`, leaving its place in the order alone.
    pub fn get(&self, key: &K) -> Option<&V> {
        self.entries.get(key).map(|(v, _)| v)
    }

    /// The value of `key` to change, leaving its place in the order alone.
    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.entries.get_mut(key).map(|(v, _)| v)
    }

    /// Sets `key` to `value` and makes it the most recently touched entry.
    pub fn insert(&mut self, key: K, value: V) {
        let stamp = self.stamp(key.clone());
        self.entries.insert(key, (value, stamp));
    }

    /// Makes `key` the most recently touched entry; false when it has none.
    pub fn touch(&mut self, key: &K) -> bool {
        if !self.entries.contains_key(key) {
            return false;
        }
        let stamp = self.stamp(key.clone());
        if let Some((_, s)) = self.entries.get_mut(key) {
            *s = stamp;
        }
        true
    }

    /// Removes `key`'s entry (its place in the order goes stale).
    pub fn remove(&mut self, key: &K) -> Option<V> {
        self.entries.remove(key).map(|(v, _)| v)
    }

    /// The least recently touched entry.
    pub fn oldest(&mut self) -> Option<(&K, &V)> {
        self.skip_stale();
        let (key, _) = self.order.front()?;
        self.entries.get_key_value(key).map(|(k, (v, _))| (k, v))
    }

    /// Removes and returns the least recently touched entry.
    pub fn pop_oldest(&mut self) -> Option<(K, V)> {
        self.skip_stale();
        let (key, _) = self.order.pop_front()?;
        self.entries.remove(&key).map(|(v, _)| (key, v))
    }

    fn skip_stale(&mut self) {
        while let Some((key, stamp)) = self.order.front() {
            if self.entries.get(key).is_some_and(|(_, s)| s == stamp) {
                return;
            }
            self.order.pop_front();
        }
    }

    /// Appends `key` under a fresh stamp, compacting the queue when stale pairs outnumber the
    /// live entries (each compaction costs what the pushes and removals since the last one made
    /// stale, hence O(1) amortised).
    fn stamp(&mut self, key: K) -> u64 {
        let stamp = self.next;
        self.next += 1;
        self.order.push_back((key, stamp));
        if self.order.len() > 2 * self.entries.len() + 64 {
            let entries = &self.entries;
            self.order
                .retain(|(k, s)| entries.get(k).is_some_and(|(_, live)| live == s) || *s == stamp);
        }
        stamp
    }

    /// The length of the order queue, stale pairs included (for tests of its bound).
    #[cfg(test)]
    fn queue_len(&self) -> usize {
        self.order.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_touched_entry_is_the_oldest() {
        let mut m = RecencyMap::new();
        m.insert("a", 1);
        m.insert("b", 2);
        m.insert("c", 3);
        assert!(m.touch(&"a"));
        assert_eq!(m.oldest(), Some((&"b", &2)));
        m.insert("b", 20);
        assert_eq!(m.pop_oldest(), Some(("c", 3)));
        assert_eq!(m.pop_oldest(), Some(("a", 1)));
        assert_eq!(m.pop_oldest(), Some(("b", 20)));
        assert_eq!(m.pop_oldest(), None);
        assert!(!m.touch(&"a"), "a removed key is not brought back");
    }

    #[test]
    fn a_removed_entry_leaves_the_order() {
        let mut m = RecencyMap::new();
        m.insert(1, ());
        m.insert(2, ());
        assert_eq!(m.remove(&1), Some(()));
        assert_eq!(m.oldest(), Some((&2, &())));
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn the_queue_stays_proportional_to_the_entries_however_often_one_is_touched() {
        let mut m = RecencyMap::new();
        for k in 0..10 {
            m.insert(k, k);
        }
        for _ in 0..100_000 {
            m.touch(&3);
        }
        assert!(m.queue_len() <= 2 * m.len() + 65, "{} pairs", m.queue_len());
        assert_eq!(m.pop_oldest(), Some((0, 0)));
        let rest: Vec<_> = std::iter::from_fn(|| m.pop_oldest()).map(|(k, _)| k).collect();
        assert_eq!(rest, vec![1, 2, 4, 5, 6, 7, 8, 9, 3]);
    }
}
