//! JSON values read exactly as serde_json's [`Value`] reads them: checked without being kept
//! ([`Checked`]), or built with each map sized once ([`Built`]).

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Any JSON value, read and checked exactly as a [`Value`] would be (strings decoded and their
/// escapes validated, numbers parsed), but not kept: no allocation beyond the parser's scratch.
pub(super) struct Checked;

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

/// Refuses the raw-value token as a map key.
pub(super) fn refuse_raw_value_token<E: de::Error>(key: &str) -> Result<(), E> {
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
pub(super) struct Built<'s>(pub(super) &'s mut Vec<(String, Value)>);

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
    }
}
