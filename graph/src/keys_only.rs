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

use std::fmt;

use jiff::Timestamp;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::event::{Entry, Event};
use crate::object::{Object, ObjectKey};

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

/// Reads one journal line with the projections applied while decoding; `None` when the line
/// is not in the exact shape this path accepts (the caller then reads it the ordinary way).
pub(crate) fn read_line(bytes: &[u8], projections: &[KeysOnly]) -> Option<Entry> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let entry = LineSeed(projections).deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(entry)
}

/// A whole journal line: `type`, `seq` and exactly the field of its kind.
struct LineSeed<'p>(&'p [KeysOnly]);

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Applied,
    Deleted,
    Tick,
}

fn duplicate<E: de::Error>(field: &'static str) -> E {
    E::duplicate_field(field)
}

impl<'de> DeserializeSeed<'de> for LineSeed<'_> {
    type Value = Entry;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Entry, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for LineSeed<'_> {
    type Value = Entry;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a journal line")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry, A::Error> {
        let mut kind: Option<Kind> = None;
        let mut seq: Option<u64> = None;
        let mut object: Option<Object> = None;
        let mut key: Option<ObjectKey> = None;
        let mut now: Option<Timestamp> = None;
        // Field names are borrowed from the line; one with an escape is refused.
        while let Some(field) = map.next_key::<&'de str>()? {
            match field {
                "type" if kind.is_none() => kind = Some(map.next_value()?),
                "seq" if seq.is_none() => seq = Some(map.next_value()?),
                "object" if object.is_none() => object = Some(map.next_value_seed(ObjectSeed(self.0))?),
                "key" if key.is_none() => key = Some(map.next_value()?),
                "now" if now.is_none() => now = Some(map.next_value()?),
                "type" => return Err(duplicate("type")),
                "seq" => return Err(duplicate("seq")),
                "object" => return Err(duplicate("object")),
                "key" => return Err(duplicate("key")),
                "now" => return Err(duplicate("now")),
                _ => return Err(de::Error::custom("unknown field")),
            }
        }
        let seq = seq.ok_or_else(|| de::Error::missing_field("seq"))?;
        let event = match (kind, object, key, now) {
            (Some(Kind::Applied), Some(object), None, None) => Event::Applied(object),
            (Some(Kind::Deleted), None, Some(key), None) => Event::Deleted(key),
            (Some(Kind::Tick), None, None, Some(now)) => Event::Tick(now),
            _ => return Err(de::Error::custom("not the fields of one event kind")),
        };
        Ok(Entry { seq, event })
    }
}

/// An [`Object`] as its derived `Deserialize` reads it, with a matching projection applied to
/// its `value` (which must then come after `kind`, `namespace` and `name`, as the writer puts
/// it; otherwise the line is refused here).
struct ObjectSeed<'p>(&'p [KeysOnly]);

impl<'de> DeserializeSeed<'de> for ObjectSeed<'_> {
    type Value = Object;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Object, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ObjectSeed<'_> {
    type Value = Object;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Object, A::Error> {
        let mut kind: Option<String> = None;
        let mut namespace: Option<String> = None;
        let mut name: Option<String> = None;
        let mut resource_version: Option<Option<String>> = None;
        let mut value: Option<Value> = None;
        while let Some(field) = map.next_key::<&'de str>()? {
            match field {
                "kind" if kind.is_none() => kind = Some(map.next_value()?),
                "namespace" if namespace.is_none() => namespace = Some(map.next_value()?),
                "name" if name.is_none() => name = Some(map.next_value()?),
                "resourceVersion" if resource_version.is_none() => {
                    resource_version = Some(map.next_value()?);
                }
                "value" if value.is_none() => {
                    let projection = match (&kind, &namespace, &name) {
                        (Some(k), Some(ns), Some(n)) => self.0.iter().find(|p| p.matches(k, ns, n)),
                        // The identity is not known yet: read in full only if no projection
                        // could apply; otherwise leave the line to the ordinary path.
                        _ if self.0.is_empty() => None,
                        _ => return Err(de::Error::custom("value before the object's identity")),
                    };
                    value = Some(match projection {
                        Some(p) => map.next_value_seed(ProjectedValue(p))?,
                        None => map.next_value_seed(Built(&mut Vec::new()))?,
                    });
                }
                "kind" => return Err(duplicate("kind")),
                "namespace" => return Err(duplicate("namespace")),
                "name" => return Err(duplicate("name")),
                "resourceVersion" => return Err(duplicate("resourceVersion")),
                "value" => return Err(duplicate("value")),
                _ => {
                    map.next_value::<Checked>()?;
                }
            }
        }
        Ok(Object {
            kind: kind.ok_or_else(|| de::Error::missing_field("kind"))?,
            namespace: namespace.unwrap_or_default(),
            name: name.ok_or_else(|| de::Error::missing_field("name"))?,
            resource_version: resource_version.flatten(),
            value: value.unwrap_or_default(),
        })
    }
}

/// The `value` of a projected object: a JSON object whose listed fields are read keys-only.
/// Anything but a JSON object is refused (the ordinary path then reads it).
struct ProjectedValue<'p>(&'p KeysOnly);

impl<'de> DeserializeSeed<'de> for ProjectedValue<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ProjectedValue<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(field) = map.next_key::<String>()? {
            refuse_raw_value_token::<A::Error>(&field)?;
            let v = if self.0.fields.contains(&field) {
                map.next_value_seed(KeysOnlyMap)?
            } else {
                map.next_value_seed(Built(&mut Vec::new()))?
            };
            out.insert(field, v);
        }
        Ok(Value::Object(out))
    }
}

/// A JSON object read as its keys with `null` values; anything else is refused.
struct KeysOnlyMap;

impl<'de> DeserializeSeed<'de> for KeysOnlyMap {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for KeysOnlyMap {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            refuse_raw_value_token::<A::Error>(&key)?;
            map.next_value::<Checked>()?;
            out.insert(key, Value::Null);
        }
        Ok(Value::Object(out))
    }
}

/// Any JSON value, read and checked exactly as a [`Value`] would be (strings decoded and their
/// escapes validated, numbers parsed), but not kept: no allocation beyond the parser's scratch.
struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Checked, D::Error> {
        d.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Checked;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_none<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        while map.next_key::<CheckedKey>()?.is_some() {
            map.next_value::<Checked>()?;
        }
        Ok(Checked)
    }
}

/// The key serde_json's `raw_value` feature (on in this build) reads a map of specially: a
/// [`Value`] would decode the map as embedded JSON. This path refuses it, leaving such a line
/// to the ordinary reader.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

fn refuse_raw_value_token<E: de::Error>(key: &str) -> Result<(), E> {
    if key == RAW_VALUE_TOKEN {
        return Err(E::custom("a raw-value map"));
    }
    Ok(())
}

/// A map key, checked as [`Checked`] does (and never the raw-value token).
struct CheckedKey;

impl<'de> Deserialize<'de> for CheckedKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<CheckedKey, D::Error> {
        d.deserialize_str(CheckedKeyVisitor)
    }
}

struct CheckedKeyVisitor;

impl<'de> Visitor<'de> for CheckedKeyVisitor {
    type Value = CheckedKey;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<CheckedKey, E> {
        refuse_raw_value_token(key).map(|()| CheckedKey)
    }
}

/// A [`Value`] built as its own `Deserialize` builds it (same numbers, strings, duplicate keys
/// and key order), but with every map sized once: entries gather on a scratch stack shared by
/// the whole value, and each map is built from its run of entries when it closes.
struct Built<'s>(&'s mut Vec<(String, Value)>);

impl<'de> DeserializeSeed<'de> for Built<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Built<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Built(&mut *self.0))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let base = self.0.len();
        while let Some(key) = map.next_key::<String>()? {
            // `Value` reads a map whose first key is the raw-value token as embedded JSON.
            if self.0.len() == base {
                refuse_raw_value_token::<A::Error>(&key)?;
            }
            let value = map.next_value_seed(Built(&mut *self.0))?;
            self.0.push((key, value));
        }
        // `Map::from_iter` inserts in order: a repeated key keeps its first place and its last
        // value, as `Value`'s own inserts do.
        Ok(Value::Object(
            self.0.drain(base..).collect::<Map<String, Value>>(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Line;
    use serde_json::json;

    fn creds() -> KeysOnly {
        KeysOnly::new("Secret", "ns", "creds", &["data", "stringData"])
    }

    /// The ordinary reading of a line, with the projection applied afterwards.
    fn reference(line: &str) -> Option<Entry> {
        let mut entry: Entry = serde_json::from_str::<Line>(line).ok()?.into();
        project(&[creds()], &mut entry);
        Some(entry)
    }

    #[test]
    fn reads_the_named_objects_fields_as_their_keys_with_null_values() {
        let line = r#"{"type":"applied","seq":3,"object":{"kind":"Secret","namespace":"ns","name":"creds","resourceVersion":"9","value":{"metadata":{"name":"creds"},"data":{"bob":"YQ==","alice":{"sha256":"00"}},"type":"Opaque"}}}"#;
        let entry = read_line(line.as_bytes(), &[creds()]).expect("fast path");
        let Event::Applied(o) = &entry.event else {
            panic!("applied expected")
        };
        assert_eq!(
            o.value,
            json!({"metadata": {"name": "creds"}, "data": {"bob": null, "alice": null}, "type": "Opaque"})
        );
        let keys: Vec<&String> = o.value["data"].as_object().expect("map").keys().collect();
        assert_eq!(keys, ["bob", "alice"], "key order is kept");
        assert_eq!(o.resource_version.as_deref(), Some("9"));
        assert_eq!(Some(entry), reference(line));
    }

    #[test]
    fn reads_every_other_object_in_full() {
        let line = r#"{"type":"applied","seq":3,"object":{"kind":"Secret","namespace":"ns","name":"other","value":{"data":{"k":"YQ=="}}}}"#;
        let entry = read_line(line.as_bytes(), &[creds()]).expect("fast path");
        assert_eq!(Some(entry), reference(line));
        let Some(Entry {
            event: Event::Applied(o),
            ..
        }) = reference(line)
        else {
            panic!("applied expected")
        };
        assert_eq!(o.value, json!({"data": {"k": "YQ=="}}));
    }

    #[test]
    fn reads_every_accepted_line_as_the_ordinary_path_then_the_projection_does() {
        let lines = [
            r#"{"type":"applied","seq":1,"object":{"kind":"Secret","namespace":"ns","name":"creds","value":{"data":{"a":"x","a":"y","b":1}}}}"#,
            r#"{"type":"applied","seq":1,"object":{"kind":"Secret","namespace":"ns","name":"creds","value":{"data":"x"}}}"#,
            r#"{"type":"applied","seq":1,"object":{"kind":"Secret","namespace":"ns","name":"creds","value":null}}"#,
            r#"{"type":"applied","seq":1,"object":{"value":{"data":{"a":"x"}},"kind":"Secret","namespace":"ns","name":"creds"}}"#,
            r#"{"type":"applied","seq":1,"object":{"kind":"Secret","name":"creds","namespace":"ns","value":{"data":{"a":"x"}},"extra":[1]}}"#,
            r#"{"type":"applied","seq":1,"object":{"kind":"Secret","kind":"Secret","namespace":"ns","name":"creds"}}"#,
            r#"{"type":"applied","seq":1,"object":{"kind":"Secret","namespace":null,"name":"creds"}}"#,
            r#"{"type":"applied","seq":1,"object":{"kind":"Secret","name":"creds","resourceVersion":null}}"#,
            r#"{"type":"applied","seq":1,"object":null}"#,
            r#"{"type":"applied","seq":1,"object":{"kind":"K","name":"a"},"now":"2027-01-01T00:00:00Z"}"#,
            r#"{"type":"deleted","seq":2,"key":{"kind":"K","name":"a"}}"#,
            r#"{"type":"deleted","seq":2,"key":{"kind":"K","name":"a"},"extra":1}"#,
            r#"{"type":"tick","seq":3,"now":"2027-01-01T00:00:00Z"}"#,
            r#"{"type":"tick","seq":3,"now":"2027-01-01T00:00:00Z"} x"#,
            r#"{"seq":4,"type":"tick","now":"2027-01-01T00:00:00Z","seq":5}"#,
            r#"{"type":"boom","seq":10}"#,
            r#"{"type":"applied","seq":1,"object":{"kind":"Secret","namespace":"ns","name":"creds","value":{"data":{"a":"\ud800"}}}}"#,
            r#"{"type":"applied","seq":1,"object":{"kind":"Secret","namespace":"ns","name":"creds","value":{"data":{"a":"\u00e9\n"}}}}"#,
            r#"{"type":"applied","seq":1,"object":{"kind":"Secret","namespace":"ns","name":"creds","value":{"data":{"a":{"$serde_json::private::RawValue":1}}}}}"#,
            r#"{"type":"applied","seq":1,"object":{"kind":"K","name":"a","value":{"$serde_json::private::RawValue":"[1]"}}}"#,
        ];
        for line in lines {
            if let Some(entry) = read_line(line.as_bytes(), &[creds()]) {
                assert_eq!(Some(entry), reference(line), "{line}");
            }
        }
        assert!(reference(lines[16]).is_none() && read_line(lines[16].as_bytes(), &[creds()]).is_none());
        for i in [0, 4, 7, 10, 12, 17] {
            assert!(
                read_line(lines[i].as_bytes(), &[creds()]).is_some(),
                "{}",
                lines[i]
            );
        }
    }

    #[test]
    fn refuses_a_line_with_invalid_utf8_in_a_skipped_value() {
        let mut line = br#"{"type":"applied","seq":1,"object":{"kind":"Secret","namespace":"ns","name":"creds","value":{"data":{"a":"x"}}}}"#.to_vec();
        let at = line.iter().rposition(|b| *b == b'x').expect("x");
        line[at] = 0xff;
        assert!(serde_json::from_slice::<Line>(&line).is_err());
        assert!(read_line(&line, &[creds()]).is_none());
    }

    /// A value read by [`Built`] over the whole text, or `None` where it refuses.
    fn built(text: &str) -> Option<Value> {
        let mut de = serde_json::Deserializer::from_str(text);
        let v = Built(&mut Vec::new()).deserialize(&mut de).ok()?;
        de.end().ok()?;
        Some(v)
    }

    #[test]
    fn builds_every_value_as_values_own_reader_does() {
        let texts = [
            r#"{"b":1,"a":{"z":[1,-2,3.5,1e300,18446744073709551615,-9223372036854775808],"y":null},"c":true}"#,
            r#"{"a":1,"b":2,"a":3,"c":{"x":"1","x":{"y":[{"k":"v","k":"w"}]}}}"#,
            r#"["\u00e9\n\"\\",{},[],[[[]]],"",false,0,-0,0.0,-0.0,1E-400]"#,
            r#"{"$serde_json::private::RawValue":"{\"a\":1}"}"#,
            r#"{"a":1,"$serde_json::private::RawValue":2}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":1e400}"#,
            r#"{"a":[1,2,}"#,
            r#"{"k":"a","m":{"n":{"o":{"p":{"q":{"r":[{"s":"t","u":[1,2,{"v":null}]}]}}}}}}"#,
        ];
        for text in texts {
            let reference = serde_json::from_str::<Value>(text).ok();
            match built(text) {
                Some(v) => {
                    assert_eq!(Some(&v), reference.as_ref(), "{text}");
                    // The same key order too (`==` on maps ignores it).
                    assert_eq!(
                        serde_json::to_string(&v).ok(),
                        reference.map(|r| r.to_string()),
                        "{text}"
                    );
                }
                None => assert!(
                    reference.is_none() || text.starts_with(r#"{"$serde_json"#),
                    "refused what Value reads: {text}"
                ),
            }
        }
        assert!(built(texts[0]).is_some() && built(texts[1]).is_some() && built(texts[2]).is_some());
        assert!(
            built(texts[4]).is_some(),
            "the token is special only as the first key"
        );
        assert!(
            built(texts[3]).is_none(),
            "a raw-value map is left to the ordinary reader"
        );
    }

    proptest::proptest! {
        #[test]
        fn builds_any_json_text_as_value_does(text in r#"[\[\]{}:,"a-c0-9.eE+\-\\ntu ]{0,40}"#) {
            if let Some(v) = built(&text) {
                let reference = serde_json::from_str::<Value>(&text);
                proptest::prop_assert!(reference.is_ok(), "{}", text);
                if let Ok(r) = reference {
                    proptest::prop_assert_eq!(serde_json::to_string(&v).ok(), Some(r.to_string()));
                }
            }
        }

        #[test]
        fn never_reads_a_line_otherwise_than_the_ordinary_path(
            line in proptest::prop_oneof![
                "\\{\"type\":\"(applied|tick)\",\"seq\":[0-9]{1,2},\"object\":\\{\"kind\":\"(Secret|K)\",(\"namespace\":\"ns\",)?\"name\":\"(creds|a)\"(,\"value\":(null|[0-9]|\\{\"data\":(\\{(\"[ab]\":(\"x\"|1|\\{\\}),?){0,3}\\}|\"s\")\\}))?\\}\\}",
                ".{0,40}",
            ]
        ) {
            if let Some(entry) = read_line(line.as_bytes(), &[creds()]) {
                proptest::prop_assert_eq!(Some(entry), reference(&line));
            }
        }
    }
}
