//! Generic objects: what the World holds and what the graph desires.
//!
//! The engine knows nothing of Kubernetes kinds: an object is a kind, a namespace, a name, an
//! optional resource version and a JSON value. Objects are identified by [`ObjectKey`].

use std::fmt;

use serde::{Deserialize, Serialize};

/// The identity of an object: `(kind, namespace, name)`.
///
/// Ordered by kind first, so a sorted set of keys groups objects of one kind together. The
/// namespace is empty for cluster-scoped objects.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectKey {
    /// The object's kind, e.g. `"IchorUser"`.
    pub kind: String,
    /// The object's namespace; empty for cluster-scoped objects.
    #[serde(default)]
    pub namespace: String,
    /// The object's name, unique within its kind and namespace.
    pub name: String,
}

impl ObjectKey {
    /// Builds a key from its three parts.
    pub fn new(kind: impl Into<String>, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }
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
        ObjectKey::new(self.kind.clone(), self.namespace.clone(), self.name.clone())
    }

    /// Whether this object has the given key, without allocating one.
    pub fn has_key(&self, key: &ObjectKey) -> bool {
        self.kind == key.kind && self.namespace == key.namespace && self.name == key.name
    }
}
