//! The fast reading of a journal line: one pass over the text, with the projections applied
//! to the named objects while decoding.

use std::fmt;

use jiff::Timestamp;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};

use super::KeysOnly;
use super::value::{Built, Checked, refuse_raw_value_token};
use crate::event::{Entry, Event};
use crate::object::{Object, ObjectKey};

/// Reads one journal line with the projections applied while decoding; `None` when the line
/// is not in the exact shape this path accepts (the caller then reads it the ordinary way).
pub(crate) fn read_line(bytes: &[u8], projections: &[KeysOnly]) -> Option<Entry> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let entry = MapSeed(LineSeed(projections)).deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(entry)
}

/// A reader of one JSON map, made a serde seed by [`MapSeed`].
trait ReadMap<'de> {
    /// What the map reads as.
    type Value;
    /// What is expected, for serde's messages.
    const EXPECTING: &'static str;

    /// Reads the map's entries.
    fn read<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error>;
}

/// Reads a JSON map with its [`ReadMap`]; anything but a map is refused.
struct MapSeed<R>(R);

impl<'de, R: ReadMap<'de>> DeserializeSeed<'de> for MapSeed<R> {
    type Value = R::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<R::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, R: ReadMap<'de>> Visitor<'de> for MapSeed<R> {
    type Value = R::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(R::EXPECTING)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<R::Value, A::Error> {
        self.0.read(map)
    }
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

impl<'de> ReadMap<'de> for LineSeed<'_> {
    type Value = Entry;
    const EXPECTING: &'static str = "a journal line";

    fn read<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry, A::Error> {
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
                "object" if object.is_none() => {
                    object = Some(map.next_value_seed(MapSeed(ObjectSeed(self.0)))?)
                }
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

impl<'de> ReadMap<'de> for ObjectSeed<'_> {
    type Value = Object;
    const EXPECTING: &'static str = "an object";

    fn read<A: MapAccess<'de>>(self, mut map: A) -> Result<Object, A::Error> {
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
                        Some(p) => map.next_value_seed(MapSeed(ProjectedValue(p)))?,
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

impl<'de> ReadMap<'de> for ProjectedValue<'_> {
    type Value = Value;
    const EXPECTING: &'static str = "a JSON object";

    fn read<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(field) = map.next_key::<String>()? {
            refuse_raw_value_token::<A::Error>(&field)?;
            let v = if self.0.fields.contains(&field) {
                map.next_value_seed(MapSeed(KeysOnlyMap))?
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

impl<'de> ReadMap<'de> for KeysOnlyMap {
    type Value = Value;
    const EXPECTING: &'static str = "a JSON object";

    fn read<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            refuse_raw_value_token::<A::Error>(&key)?;
            map.next_value::<Checked>()?;
            out.insert(key, Value::Null);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Line;
    use crate::keys_only::project;
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

    proptest::proptest! {
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
