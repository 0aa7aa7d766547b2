//! Generic objects: what the World holds and what the graph desires.
//!
//! The engine knows nothing of Kubernetes kinds: an object is a kind, a namespace, a name, an
//! optional resource version and a JSON value. Objects are identified by [`ObjectKey`].

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use serde::ser::SerializeStruct as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The identity of an object: `(kind, namespace, name)`.
///
/// Ordered by kind first, so a sorted set of keys groups objects of one kind together. The
/// namespace is empty for cluster-scoped objects.
///
/// The parts are shared strings: the engine keeps each key in several indexes (memo, join
/// index, desired objects, pending changes), and cloning a key only counts references instead
/// of copying three strings. Two keys sharing their parts compare equal without reading them.
#[derive(Debug, Clone)]
pub struct ObjectKey {
    /// The object's kind, e.g. `"IchorUser"`.
    pub kind: Arc<str>,
    /// The object's namespace; empty for cluster-scoped objects.
    pub namespace: Arc<str>,
    /// The object's name, unique within its kind and namespace.
    pub name: Arc<str>,
}

/// Compares two shared strings, without reading them when they are one allocation.
fn cmp_part(a: &Arc<str>, b: &Arc<str>) -> Ordering {
    if Arc::ptr_eq(a, b) {
        Ordering::Equal
    } else {
        a.as_ref().cmp(b.as_ref())
    }
}

/// Whether two shared strings are equal, without reading them when they are one allocation.
fn eq_part(a: &Arc<str>, b: &Arc<str>) -> bool {
    Arc::ptr_eq(a, b) || a.as_ref() == b.as_ref()
}

impl PartialEq for ObjectKey {
    fn eq(&self, other: &Self) -> bool {
        eq_part(&self.name, &other.name)
            && eq_part(&self.kind, &other.kind)
            && eq_part(&self.namespace, &other.namespace)
    }
}

impl Eq for ObjectKey {}

impl Hash for ObjectKey {
    /// Hashes the parts' contents (as equality compares them), never their addresses.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.kind.as_ref().hash(state);
        self.namespace.as_ref().hash(state);
        self.name.as_ref().hash(state);
    }
}

impl PartialOrd for ObjectKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ObjectKey {
    /// Kind, then namespace, then name: the order of the `(kind, namespace, name)` tuple.
    fn cmp(&self, other: &Self) -> Ordering {
        cmp_part(&self.kind, &other.kind)
            .then_with(|| cmp_part(&self.namespace, &other.namespace))
            .then_with(|| cmp_part(&self.name, &other.name))
    }
}

impl Serialize for ObjectKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("ObjectKey", 3)?;
        s.serialize_field("kind", &*self.kind)?;
        s.serialize_field("namespace", &*self.namespace)?;
        s.serialize_field("name", &*self.name)?;
        s.end()
    }
}

/// The serialized form of [`ObjectKey`]: a missing namespace is the empty one.
#[derive(Deserialize)]
struct KeyRepr {
    kind: String,
    #[serde(default)]
    namespace: String,
    name: String,
}

impl<'de> Deserialize<'de> for ObjectKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let r = KeyRepr::deserialize(deserializer)?;
        Ok(ObjectKey::new(r.kind, r.namespace, r.name))
    }
}

impl ObjectKey {
    /// Builds a key from its three parts.
    ///
    /// The kind and the namespace come from a small per-thread pool (see [`shared_part`]), so
    /// keys of one kind and namespace share those parts and compare them without reading them.
    pub fn new(kind: impl AsRef<str>, namespace: impl AsRef<str>, name: impl AsRef<str>) -> Self {
        Self {
            kind: shared_part(kind.as_ref()),
            namespace: shared_part(namespace.as_ref()),
            name: Arc::from(name.as_ref()),
        }
    }
}

/// The most kind and namespace strings one thread's pool keeps; beyond, parts are not shared
/// (still correct, only slower to compare), so hostile input cannot grow the pool without bound.
const POOL_LIMIT: usize = 1024;

thread_local! {
    /// Kinds and namespaces seen by this thread: few distinct values, in every key.
    static POOL: RefCell<HashSet<Arc<str>>> = RefCell::new(HashSet::new());
}

/// The pooled copy of a kind or namespace string: one allocation per distinct value and thread.
fn shared_part(part: &str) -> Arc<str> {
    POOL.with(|pool| {
        let Ok(mut pool) = pool.try_borrow_mut() else {
            return Arc::from(part);
        };
        if let Some(shared) = pool.get(part) {
            return Arc::clone(shared);
        }
        let shared: Arc<str> = Arc::from(part);
        if pool.len() < POOL_LIMIT {
            pool.insert(Arc::clone(&shared));
        }
        shared
    })
}

impl fmt::Display for ObjectKey {
    /// `Kind ns/name`, or `Kind name` for a cluster-scoped object.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.kind, self.name)
        } else {
            write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// One object, observed (in the World) or desired (produced by the graph).
///
/// A desired object is *partial*: its `value` holds only the fields this controller owns, and
/// the diff compares only those (see [`crate::owned_fields_match`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Object {
    /// The object's kind.
    pub kind: String,
    /// The object's namespace; empty for cluster-scoped objects.
    #[serde(default)]
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// The version the store reported for this object, used for optimistic concurrency by the
    /// applier. `None` for desired objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// The object's content.
    #[serde(default)]
    pub value: serde_json::Value,
}

impl Object {
    /// Builds an object without a resource version.
    pub fn new(
        kind: impl Into<String>,
        namespace: impl Into<String>,
        name: impl Into<String>,
        value: serde_json::Value,
    ) -> Self {
        Self {
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            resource_version: None,
            value,
        }
    }

    /// The object's identity.
    pub fn key(&self) -> ObjectKey {
        ObjectKey::new(&self.kind, &self.namespace, &self.name)
    }

    /// Whether this object has the given key, without allocating one.
    pub fn has_key(&self, key: &ObjectKey) -> bool {
        self.name == *key.name && self.kind == *key.kind && self.namespace == *key.namespace
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::hash_map::DefaultHasher;

    fn hash_of(key: &ObjectKey) -> u64 {
        let mut h = DefaultHasher::new();
        key.hash(&mut h);
        h.finish()
    }

    #[test]
    fn keys_order_by_kind_then_namespace_then_name_whether_or_not_they_share_parts() {
        let pooled = ObjectKey::new("User", "ns", "b");
        // Parts built outside the pool: same contents, other allocations.
        let unpooled = ObjectKey {
            kind: Arc::from("User"),
            namespace: Arc::from("ns"),
            name: Arc::from("b"),
        };
        assert!(!Arc::ptr_eq(&pooled.kind, &unpooled.kind));
        assert_eq!(pooled, unpooled);
        assert_eq!(pooled.cmp(&unpooled), Ordering::Equal);
        assert_eq!(hash_of(&pooled), hash_of(&unpooled));
        let mut keys = [
            ObjectKey::new("User", "ns", "c"),
            ObjectKey::new("Cluster", "zz", "a"),
            unpooled,
            ObjectKey::new("User", "a", "z"),
        ];
        keys.sort();
        let shown: Vec<String> = keys.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["Cluster zz/a", "User a/z", "User ns/b", "User ns/c"]);
    }

    #[test]
    fn keys_of_one_kind_and_namespace_share_those_parts() {
        let a = ObjectKey::new("User", "ns", "a");
        let b = ObjectKey::new(String::from("User"), "ns", "b");
        assert!(Arc::ptr_eq(&a.kind, &b.kind));
        assert!(Arc::ptr_eq(&a.namespace, &b.namespace));
        assert_ne!(a, b);
    }

    #[test]
    fn a_key_reads_and_writes_the_same_json_as_before_a_missing_namespace_being_empty() {
        let key = ObjectKey::new("Cluster", "", "c");
        let json = serde_json::to_string(&key).unwrap();
        assert_eq!(json, r#"{"kind":"Cluster","namespace":"","name":"c"}"#);
        let back: ObjectKey = serde_json::from_str(r#"{"kind":"Cluster","name":"c"}"#).unwrap();
        assert_eq!(back, key);
    }
}
