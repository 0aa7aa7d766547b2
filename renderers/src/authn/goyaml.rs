//! YAML to JSON as the kube-apiserver converts a YAML config file before its strict JSON
//! decoding (`sigs.k8s.io/yaml.YAMLToJSONStrict`, over `go.yaml.in/yaml/v2`): YAML 1.1 typing
//! of plain scalars (`yes`/`no`/`on`/`off`/`y`/`n` are booleans, `0755` is octal, `1_000` an
//! integer, `.inf` a float), quoted and block scalars and `!!str` always strings, only the first
//! document read, aliases expanded, and a key repeated in one mapping an error.
//!
//! The typing matters because the decoder is strict: `url: 123` or `enabled: "true"` is a
//! type error for the kube-apiserver (`url: yes` is too, a boolean), while `enabled: on` is
//! `true`.
//!
//! # Approximations
//! Merge keys (`<<`) are read as an ordinary key; the YAML syntax errors are granit-parser's,
//! not go-yaml's.

use std::collections::HashMap;

use granit_parser::{Event, Parser, ScalarStyle};
use serde_json::{Map, Number, Value};

/// Why a YAML text has no JSON value, in the words the kube-apiserver's conversion uses where
/// it has them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GoYamlError {
    /// The text is not YAML (the parser's message, with its position).
    #[error("{0}")]
    Syntax(String),
    /// The document ends inside a node.
    #[error("unexpected end of the YAML document")]
    UnexpectedEnd,
    /// An alias names no anchor defined before it.
    #[error("unknown anchor")]
    UnknownAnchor,
    /// A mapping repeats a key (an error for the strict conversion).
    #[error("key {0:?} already set in map")]
    DuplicateKey(String),
    /// An event that cannot start a node.
    #[error("unexpected YAML event {0}")]
    UnexpectedEvent(String),
    /// A value JSON cannot carry (`.inf`, `.nan`).
    #[error("json: unsupported value: {0}")]
    UnsupportedValue(String),
}

/// The first YAML document of `text` as the JSON value Go would decode.
///
/// # Errors
/// Why there is none: the text is not YAML, or it holds what the conversion refuses.
pub fn to_json(text: &str) -> Result<Value, GoYamlError> {
    let mut events = Vec::new();
    for next in Parser::new_from_str(text) {
        let (event, _) = next.map_err(|e| GoYamlError::Syntax(e.to_string()))?;
        match event {
            Event::Comment(..) | Event::StreamStart | Event::DocumentStart(..) => {}
            Event::DocumentEnd | Event::StreamEnd => break,
            e => events.push(e),
        }
    }
    if events.is_empty() {
        return Ok(Value::Null);
    }
    let mut b = Builder {
        events,
        pos: 0,
        anchors: HashMap::new(),
    };
    b.node()
}

struct Builder<'a> {
    events: Vec<Event<'a>>,
    pos: usize,
    anchors: HashMap<usize, Value>,
}

impl Builder<'_> {
    fn node(&mut self) -> Result<Value, GoYamlError> {
        let event = self
            .events
            .get(self.pos)
            .cloned()
            .ok_or(GoYamlError::UnexpectedEnd)?;
        self.pos += 1;
        let (value, anchor) = match event {
            Event::Scalar(text, style, anchor, tag) => {
                let tag = tag.map(|t| format!("{}{}", t.handle(), t.suffix()));
                (scalar(&text, style, tag.as_deref())?, anchor)
            }
            Event::Alias(id) => (
                self.anchors.get(&id).cloned().ok_or(GoYamlError::UnknownAnchor)?,
                0,
            ),
            Event::SequenceStart(_, anchor, _) => {
                let mut items = Vec::new();
                while !matches!(self.events.get(self.pos), Some(Event::SequenceEnd) | None) {
                    items.push(self.node()?);
                }
                self.pos += 1;
                (Value::Array(items), anchor)
            }
            Event::MappingStart(_, anchor, _) => {
                let mut map = Map::new();
                while !matches!(self.events.get(self.pos), Some(Event::MappingEnd) | None) {
                    let key = key_text(&self.node()?);
                    let value = self.node()?;
                    if map.contains_key(&key) {
                        return Err(GoYamlError::DuplicateKey(key));
                    }
                    map.insert(key, value);
                }
                self.pos += 1;
                (Value::Object(map), anchor)
            }
            other => return Err(GoYamlError::UnexpectedEvent(format!("{other:?}"))),
        };
        if anchor != 0 {
            self.anchors.insert(anchor, value.clone());
        }
        Ok(value)
    }
}

/// A mapping key as JSON's string key (sigs.k8s.io/yaml formats non-string keys).
fn key_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

fn scalar(text: &str, style: ScalarStyle, tag: Option<&str>) -> Result<Value, GoYamlError> {
    const CORE: &str = "tag:yaml.org,2002:";
    let tag = tag.map(|t| t.replace("!!", CORE));
    match tag.as_deref() {
        Some(t) if t == format!("{CORE}str") => Ok(Value::String(text.into())),
        Some(t) if !t.starts_with(CORE) => Ok(Value::String(text.into())),
        Some(_) => resolve(text),
        None if style == ScalarStyle::Plain => resolve(text),
        None => Ok(Value::String(text.into())),
    }
}

/// go-yaml v2's `resolve` of a plain scalar.
fn resolve(s: &str) -> Result<Value, GoYamlError> {
    match s {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Ok(Value::Bool(true));
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Ok(Value::Bool(false));
        }
        "" | "~" | "null" | "Null" | "NULL" => return Ok(Value::Null),
        ".nan" | ".NaN" | ".NAN" | ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf"
        | "-.Inf" | "-.INF" => return Err(GoYamlError::UnsupportedValue(s.to_owned())),
        _ => {}
    }
    let first = s.as_bytes()[0];
    if first == b'.' {
        return Ok(s
            .parse::<f64>()
            .ok()
            .and_then(float)
            .unwrap_or_else(|| Value::String(s.into())));
    }
    if !(first.is_ascii_digit() || first == b'-' || first == b'+') || is_timestamp(s) {
        return Ok(Value::String(s.into()));
    }
    let plain = s.replace('_', "");
    if let Some(v) = go_parse_int(&plain) {
        return Ok(v);
    }
    if is_yaml_float(&plain)
        && let Some(v) = plain.parse::<f64>().ok().and_then(float)
    {
        return Ok(v);
    }
    Ok(Value::String(s.into()))
}

fn float(f: f64) -> Option<Value> {
    Number::from_f64(f).map(Value::Number)
}

/// `strconv.ParseInt(s, 0, 64)`, then `ParseUint`, then the `0b`/`-0b` forms.
fn go_parse_int(s: &str) -> Option<Value> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let (radix, digits) = if let Some(d) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        (16, d)
    } else if let Some(d) = body.strip_prefix("0b").or_else(|| body.strip_prefix("0B")) {
        (2, d)
    } else if let Some(d) = body.strip_prefix("0o").or_else(|| body.strip_prefix("0O")) {
        (8, d)
    } else if body.len() > 1 && body.starts_with('0') {
        (8, &body[1..])
    } else {
        (10, body)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u64::from_str_radix(digits, radix).ok()?;
    if neg {
        let v = i64::try_from(magnitude)
            .ok()
            .map(|m| -m)
            .or((magnitude == 1 << 63).then_some(i64::MIN))?;
        Some(Value::from(v))
    } else {
        Some(Value::from(magnitude))
    }
}

/// go-yaml's `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_float(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => digits(frac),
        Some((int, frac)) => digits(int) && (frac.is_empty() || digits(frac)),
        None => digits(mantissa),
    };
    mantissa_ok && exponent.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e)))
}

/// go-yaml's timestamp test (a plain `YYYY-M-D...` scalar that `time.Parse` accepts in one of
/// four layouts), which for an untyped target leaves the scalar a string.
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 8 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return false;
    }
    let rest = &s[5..];
    let date_end = rest.find(['T', 't', ' ']).unwrap_or(rest.len());
    let mut parts = rest[..date_end].split('-');
    let ok = |p: Option<&str>, max: u32| {
        p.is_some_and(|p| {
            (1..=2).contains(&p.len()) && p.parse::<u32>().is_ok_and(|v| (1..=max).contains(&v))
        })
    };
    ok(parts.next(), 12) && ok(parts.next(), 31) && parts.next().is_none() && date_end == rest.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn types_plain_scalars_as_yaml_1_1() {
        let v = to_json("a: yes\nb: off\nc: y\nd: 0755\ne: 1_000\nf: 0x1F\ng: 1.5\nh: ~\ni: 2001-12-14\nj: +12\nk: 0b11\n").unwrap();
        assert_eq!(
            v,
            json!({"a": true, "b": false, "c": true, "d": 493, "e": 1000, "f": 31, "g": 1.5, "h": null,
                   "i": "2001-12-14", "j": 12, "k": 3})
        );
    }

    #[test]
    fn keeps_quoted_block_and_str_tagged_scalars_strings() {
        let v = to_json("a: 'yes'\nb: \"123\"\nc: !!str 1\nd: |\n  on\ne: https://x\nf: 1.2.3\n").unwrap();
        assert_eq!(
            v,
            json!({"a": "yes", "b": "123", "c": "1", "d": "on\n", "e": "https://x", "f": "1.2.3"})
        );
    }

    #[test]
    fn refuses_a_repeated_key_and_infinite_floats() {
        assert!(
            to_json("a: 1\na: 2\n")
                .unwrap_err()
                .to_string()
                .contains("already set")
        );
        assert!(to_json("a: .inf\n").is_err());
    }

    #[test]
    fn reads_the_first_document_and_expands_aliases() {
        assert_eq!(
            to_json("a: &x [1]\nb: *x\n---\nc: 1\n").unwrap(),
            json!({"a": [1], "b": [1]})
        );
        assert_eq!(to_json("# only a comment\n").unwrap(), Value::Null);
    }
}
