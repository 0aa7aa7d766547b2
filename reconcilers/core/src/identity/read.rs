//! Reading observed objects: Secret values (base64 `data`, `stringData`, or a redacted digest)
//! and the parts of custom resources the nodes need, without requiring a whole typed object.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ichor_graph::Object;
use serde_json::Value;

/// One value of a Secret as the graph sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SecretValue {
    /// The Secret has no such key.
    Absent,
    /// The value was replaced by its sha256 when the journal was written: it exists, but its
    /// content is unknown. Nodes never act on such a value.
    Redacted,
    /// The value is neither valid base64 nor a string.
    Undecodable(String),
    /// The decoded bytes.
    Bytes(Vec<u8>),
}

/// Whether a JSON value is a redaction digest `{"sha256": "<hex>"}` written by the journal.
pub(crate) fn is_redacted(v: &Value) -> bool {
    matches!(v, Value::Object(m) if m.len() == 1 && m.get("sha256").is_some_and(Value::is_string))
}

/// The value of `key` in a Secret: `data` (base64) first, then `stringData` (plain text, as a
/// hand-written fixture may hold it).
pub(crate) fn secret_value(secret: &Object, key: &str) -> SecretValue {
    if let Some(v) = secret.value.get("data").and_then(|d| d.get(key)) {
        return match v {
            Value::String(s) => match STANDARD.decode(s.as_bytes()) {
                Ok(bytes) => SecretValue::Bytes(bytes),
                Err(e) => SecretValue::Undecodable(format!("data.{key} is not valid base64: {e}")),
            },
            v if is_redacted(v) => SecretValue::Redacted,
            _ => SecretValue::Undecodable(format!("data.{key} is not a string")),
        };
    }
    match secret.value.get("stringData").and_then(|d| d.get(key)) {
        Some(Value::String(s)) => SecretValue::Bytes(s.as_bytes().to_vec()),
        Some(v) if is_redacted(v) => SecretValue::Redacted,
        Some(_) => SecretValue::Undecodable(format!("stringData.{key} is not a string")),
        None => SecretValue::Absent,
    }
}

/// The key names of a Secret (`data`, then `stringData`; a name in both comes twice), borrowed
/// from it. Key names are never redacted, so this works on redacted journals too.
pub(crate) fn secret_key_names(secret: &Object) -> impl Iterator<Item = &str> + '_ {
    ["data", "stringData"]
        .into_iter()
        .filter_map(|f| secret.value.get(f).and_then(Value::as_object))
        .flat_map(|m| m.keys().map(String::as_str))
}

/// Whether a Secret has the key `name` (in `data` or `stringData`).
pub(crate) fn has_secret_key(secret: &Object, name: &str) -> bool {
    ["data", "stringData"]
        .into_iter()
        .any(|f| secret.value.get(f).and_then(|m| m.get(name)).is_some())
}

/// Base64 (standard alphabet, padded) of `bytes`, as a Secret's `data` holds it.
pub(crate) fn base64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// `metadata.generation`, when the object has one.
pub(crate) fn generation(object: &Object) -> Option<i64> {
    object.value.get("metadata")?.get("generation")?.as_i64()
}

/// `status.conditions` as raw JSON (empty when absent or not a list).
pub(crate) fn conditions(object: &Object) -> &[Value] {
    object
        .value
        .get("status")
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// A label of the object, when set.
pub(crate) fn label<'a>(object: &'a Object, name: &str) -> Option<&'a str> {
    object.value.get("metadata")?.get("labels")?.get(name)?.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secret(value: Value) -> Object {
        Object::new("Secret", "ichor-system", "s", value)
    }

    #[test]
    fn decodes_data_as_base64_and_string_data_as_text() {
        let s = secret(json!({"data": {"a": "aGk="}, "stringData": {"b": "yo"}}));
        assert_eq!(secret_value(&s, "a"), SecretValue::Bytes(b"hi".to_vec()));
        assert_eq!(secret_value(&s, "b"), SecretValue::Bytes(b"yo".to_vec()));
        assert_eq!(secret_value(&s, "c"), SecretValue::Absent);
        assert_eq!(secret_key_names(&s).collect::<Vec<_>>(), vec!["a", "b"]);
        assert!(has_secret_key(&s, "b") && !has_secret_key(&s, "c"));
    }

    #[test]
    fn a_redacted_value_is_present_but_unreadable() {
        let s = secret(json!({"data": {"a": {"sha256": "00ff"}}}));
        assert_eq!(secret_value(&s, "a"), SecretValue::Redacted);
        assert_eq!(secret_key_names(&s).collect::<Vec<_>>(), vec!["a"]);
    }

    #[test]
    fn bad_base64_is_reported_with_the_key() {
        let s = secret(json!({"data": {"a": "!!"}}));
        assert!(matches!(secret_value(&s, "a"), SecretValue::Undecodable(m) if m.starts_with("data.a")));
    }
}
