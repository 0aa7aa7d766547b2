//! The redaction of secret material before an object is written to a journal.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::canonical::{digest_bytes, digest_value};
use crate::object::Object;

/// Which values are replaced by their sha256 when a journal is written out.
///
/// The default redacts every value of `data` and `stringData` of objects of kind `Secret`: each
/// value becomes `{"sha256": "<hex of the value's bytes as they appear>"}` (for `data`, the
/// base64 text). Values that are already such a digest are kept, so redacting is idempotent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redaction {
    /// The object kinds whose fields are redacted.
    pub kinds: Vec<String>,
    /// The top-level fields of `value` whose every entry is redacted.
    pub fields: Vec<String>,
}

impl Default for Redaction {
    fn default() -> Self {
        Self {
            kinds: vec!["Secret".into()],
            fields: vec!["data".into(), "stringData".into()],
        }
    }
}

impl Redaction {
    /// Redacts nothing (for journals that never carry secrets, e.g. in tests).
    pub fn none() -> Self {
        Self {
            kinds: Vec::new(),
            fields: Vec::new(),
        }
    }

    /// The object as it may be written out: borrowed when nothing needs redacting.
    pub fn redact<'a>(&self, object: &'a Object) -> Cow<'a, Object> {
        if !self.kinds.contains(&object.kind) {
            return Cow::Borrowed(object);
        }
        let Value::Object(map) = &object.value else {
            return Cow::Borrowed(object);
        };
        if !self.fields.iter().any(|f| map.contains_key(f)) {
            return Cow::Borrowed(object);
        }
        let mut redacted = object.clone();
        if let Value::Object(map) = &mut redacted.value {
            for field in &self.fields {
                if let Some(v) = map.get_mut(field) {
                    redact_field(v);
                }
            }
        }
        Cow::Owned(redacted)
    }
}

fn redact_field(field: &mut Value) {
    match field {
        Value::Object(entries) => {
            for v in entries.values_mut() {
                if !is_digest(v) {
                    *v = digest_of(v);
                }
            }
        }
        Value::Null => {}
        other => {
            if !is_digest(other) {
                *other = digest_of(other);
            }
        }
    }
}

fn is_digest(v: &Value) -> bool {
    matches!(v, Value::Object(m) if m.len() == 1 && m.get("sha256").is_some_and(Value::is_string))
}

fn digest_of(v: &Value) -> Value {
    let digest = match v {
        Value::String(s) => digest_bytes(s.as_bytes()),
        other => digest_value(other),
    };
    let mut m = Map::new();
    m.insert("sha256".into(), Value::String(hex::encode(digest)));
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn leaves_objects_of_other_kinds_untouched() {
        let cm = Object::new("ConfigMap", "ns", "c", json!({"data": {"ca.crt": "PUBLIC"}}));
        assert!(matches!(Redaction::default().redact(&cm), Cow::Borrowed(_)));
    }
}
