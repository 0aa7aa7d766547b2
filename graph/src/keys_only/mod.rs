//! Reading a journal that keeps only the key names of some objects' maps.
//!
//! Some objects are large maps whose values no consumer reads: the credentials Secret of the
//! identity graph holds one entry per user, and only which keys exist matters to it. Decoding
//! every value of every rewrite of such an object into a [`Value`] dominated replay. A
//! [`KeysOnly`] names such an object and its fields; a [`crate::JournalReader`] given it reads
//! each value of those fields as `null` (the key names and their order are kept), checking the
//! value text as a [`Value`] would but without materialising it.
//!
//! The fast path here decodes a line in one pass with the projection applied while reading. It
//! accepts only lines the ordinary reader accepts and reads them the same way up to the
//! projection; anything else (an unusual shape, a duplicate or unknown field, a raw-value map)
//! is refused, and the reader then parses the line the ordinary way and applies the projection
//! afterwards ([`KeysOnly::apply`]), so both paths give the same entry and the same errors.

mod line;
mod value;

use serde_json::Value;

use crate::event::{Entry, Event};
use crate::object::Object;

/// An object whose listed top-level fields of `value` are read with their key names only, each
/// value read as `null`. For consumers that need which keys exist, never what they hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeysOnly {
    /// The object's kind.
    pub kind: String,
    /// The object's namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// The top-level fields of the object's `value` whose entries are read as `null`. A field
    /// that is not a JSON object is read unchanged.
    pub fields: Vec<String>,
}

impl KeysOnly {
    /// Names one object and the fields of its value to read keys-only.
    pub fn new(
        kind: impl Into<String>,
        namespace: impl Into<String>,
        name: impl Into<String>,
        fields: &[&str],
    ) -> Self {
        Self {
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            fields: fields.iter().map(|f| (*f).to_owned()).collect(),
        }
    }

    fn matches(&self, kind: &str, namespace: &str, name: &str) -> bool {
        self.kind == kind && self.namespace == namespace && self.name == name
    }

    /// Applies the projection to an object read in full: every entry of the listed fields
    /// becomes `null` when the object is the one named.
    pub fn apply(&self, object: &mut Object) {
        if !self.matches(&object.kind, &object.namespace, &object.name) {
            return;
        }
        let Value::Object(map) = &mut object.value else {
            return;
        };
        for field in &self.fields {
            if let Some(Value::Object(entries)) = map.get_mut(field) {
                entries.values_mut().for_each(|v| *v = Value::Null);
            }
        }
    }
}

/// Applies the first matching projection to the object of an applied event.
pub(crate) fn project(projections: &[KeysOnly], entry: &mut Entry) {
    if let Event::Applied(object) = &mut entry.event
        && let Some(p) = projections
            .iter()
            .find(|p| p.matches(&object.kind, &object.namespace, &object.name))
    {
        p.apply(object);
    }
}

pub(crate) use line::read_line;
