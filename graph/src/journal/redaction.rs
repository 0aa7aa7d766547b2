//! The redaction of secret material before an object is written to a journal.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::canonical::{digest_bytes, digest_value};
use crate::object::Object;

/// The prefix of an annotation value replaced by its sha256 (`sha256:<hex>`, still a string).
const ANNOTATION_DIGEST_PREFIX: &str = "sha256:";

/// Which values are replaced by their sha256 when a journal is written out.
///
/// The default redacts every place a Secret's material can be found in an object of kind
/// `Secret`:
/// - each value of `data` and `stringData` becomes `{"sha256": "<hex of the value's bytes as
///   they appear>"}` (for `data`, the base64 text);
/// - any other top-level field but `apiVersion`, `kind`, `metadata`, `type` and `immutable`
///   becomes the digest of its whole value;
/// - each value of `metadata.annotations` becomes the string `sha256:<hex>` (an annotation such
///   as `kubectl.kubernetes.io/last-applied-configuration` repeats the whole Secret, data
///   included);
/// - `metadata.managedFields` is left out (it names every key, and no node reads it).
///
/// Values that are already such a digest are kept, so redacting is idempotent. The key names
/// of `data`, `stringData` and the annotations, the labels and the rest of `metadata` are kept:
/// they carry no secret and the nodes read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redaction {
    /// The object kinds whose fields are redacted.
    pub kinds: Vec<String>,
    /// The top-level fields of `value` whose every entry is redacted.
    pub fields: Vec<String>,
    /// The top-level fields of `value` kept as they are (`metadata` is always kept, its
    /// annotations redacted); every other top-level field is replaced by its digest.
    pub kept: Vec<String>,
}

impl Default for Redaction {
    fn default() -> Self {
        Self {
            kinds: vec!["Secret".into()],
            fields: vec!["data".into(), "stringData".into()],
            kept: ["apiVersion", "kind", "type", "immutable"]
                .map(str::to_owned)
                .to_vec(),
        }
    }
}

impl Redaction {
    /// Redacts nothing (for journals that never carry secrets, e.g. in tests).
    pub fn none() -> Self {
        Self {
            kinds: Vec::new(),
            fields: Vec::new(),
            kept: Vec::new(),
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
        let mut value = map.clone();
        for (field, v) in &mut value {
            if field == "metadata" {
                redact_metadata(v);
            } else if self.fields.contains(field) {
                redact_field(v);
            } else if !self.kept.contains(field) && !is_digest(v) {
                *v = digest_of(v);
            }
        }
        if value == *map {
            return Cow::Borrowed(object);
        }
        let mut redacted = object.clone();
        redacted.value = Value::Object(value);
        Cow::Owned(redacted)
    }
}

/// Leaves out `managedFields` and replaces every annotation value by `sha256:<hex>`.
fn redact_metadata(metadata: &mut Value) {
    let Value::Object(meta) = metadata else {
        return;
    };
    meta.remove("managedFields");
    match meta.get_mut("annotations") {
        None | Some(Value::Null) => {}
        Some(Value::Object(annotations)) => {
            for v in annotations.values_mut() {
                redact_annotation(v);
            }
        }
        // Annotations that are not a map (a hand-written fixture): digested whole.
        Some(other) => redact_annotation(other),
    }
}

fn redact_annotation(v: &mut Value) {
    if is_annotation_digest(v) {
        return;
    }
    let digest = match &*v {
        Value::String(s) => digest_bytes(s.as_bytes()),
        other => digest_value(other),
    };
    *v = Value::String(format!("{ANNOTATION_DIGEST_PREFIX}{}", hex::encode(digest)));
}

fn is_annotation_digest(v: &Value) -> bool {
    v.as_str()
        .and_then(|s| s.strip_prefix(ANNOTATION_DIGEST_PREFIX))
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
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

    #[test]
    fn a_secrets_annotations_managed_fields_and_unknown_fields_keep_no_value() {
        let last_applied = r#"{"apiVersion":"v1","kind":"Secret","stringData":{"pw":"hunter2-hunter2"}}"#;
        let secret = Object::new(
            "Secret",
            "ns",
            "s",
            json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                   "metadata": {"name": "s", "labels": {"app": "x"},
                                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": last_applied},
                                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:data": {"f:pw": {}}}}]},
                   "data": {"pw": "aHVudGVyMi1odW50ZXIy"},
                   "extra": {"hidden": "hunter2-hunter2"}}),
        );
        let once = Redaction::default().redact(&secret).into_owned();
        let text = serde_json::to_string(&once.value).unwrap();
        for clear in ["hunter2", "aHVudGVyMi1odW50ZXIy", "managedFields", "f:pw"] {
            assert!(!text.contains(clear), "{clear} in {text}");
        }
        let annotation =
            &once.value["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"];
        assert_eq!(
            annotation.as_str().unwrap(),
            format!("sha256:{}", hex::encode(digest_bytes(last_applied.as_bytes())))
        );
        // What the nodes read stays: the kind, the type, the labels, the key names.
        assert_eq!(once.value["type"], "Opaque");
        assert_eq!(once.value["metadata"]["labels"]["app"], "x");
        assert!(once.value["data"].get("pw").is_some());
        // Redacting again changes nothing.
        assert!(matches!(Redaction::default().redact(&once), Cow::Borrowed(_)));
    }
}
