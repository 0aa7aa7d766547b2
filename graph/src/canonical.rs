//! Canonical JSON encoding and the sha256 digests the memo is keyed by.
//!
//! The encoding is serde_json's compact form with every object's keys sorted, written by hand
//! so it stays canonical whatever serde_json features other crates of the build enable (its
//! `preserve_order` feature would otherwise keep insertion order).

use std::io::{self, Write};

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::diff::Desired;
use crate::object::Object;

/// A sha256 digest.
pub type Digest = [u8; 32];

/// An `io::Write` that feeds a sha256 hasher, gathering the many small writes of an encoding
/// into blocks first (each hasher update has a fixed cost).
pub(crate) struct HashWriter {
    hasher: Sha256,
    buf: [u8; 512],
    len: usize,
}

impl HashWriter {
    pub(crate) fn new() -> Self {
        Self {
            hasher: Sha256::new(),
            buf: [0; 512],
            len: 0,
        }
    }

    fn drain(&mut self) {
        if let Some(pending) = self.buf.get(..self.len) {
            self.hasher.update(pending);
        }
        self.len = 0;
    }

    pub(crate) fn finish(mut self) -> Digest {
        self.drain();
        self.hasher.finalize().into()
    }
}

impl Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let end = self.len + buf.len();
        match self.buf.get_mut(self.len..end) {
            Some(room) => {
                room.copy_from_slice(buf);
                self.len = end;
            }
            None => {
                self.drain();
                self.hasher.update(buf);
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes the canonical encoding of `value` (sorted keys, no whitespace) to `out`.
///
/// # Errors
/// Only the writer's own errors.
pub fn write_canonical<W: Write>(value: &Value, out: &mut W) -> io::Result<()> {
    match value {
        Value::Null => out.write_all(b"null"),
        Value::Bool(true) => out.write_all(b"true"),
        Value::Bool(false) => out.write_all(b"false"),
        Value::Number(n) => write!(out, "{n}"),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.write_all(b"[")?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                write_canonical(item, out)?;
            }
            out.write_all(b"]")
        }
        Value::Object(map) => {
            // Already sorted unless serde_json's `preserve_order` is on: then sort a copy.
            if map.keys().is_sorted() {
                write_entries(map.iter(), out)
            } else if map.len() <= SMALL_MAP {
                // Most objects are small: sort them on the stack, not in a new Vec.
                let mut entries: [Option<(&String, &Value)>; SMALL_MAP] = [None; SMALL_MAP];
                for (slot, entry) in entries.iter_mut().zip(map.iter()) {
                    *slot = Some(entry);
                }
                let filled = entries.get_mut(..map.len()).unwrap_or_default();
                filled.sort_unstable_by(|a, b| a.map(|e| e.0).cmp(&b.map(|e| e.0)));
                write_entries(filled.iter().flatten().copied(), out)
            } else {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                write_entries(entries.into_iter(), out)
            }
        }
    }
}

/// Maps of at most this many entries are sorted without allocating.
const SMALL_MAP: usize = 16;

fn write_entries<'a, W: Write>(
    entries: impl Iterator<Item = (&'a String, &'a Value)>,
    out: &mut W,
) -> io::Result<()> {
    out.write_all(b"{")?;
    for (i, (k, v)) in entries.enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write_string(k, out)?;
        out.write_all(b":")?;
        write_canonical(v, out)?;
    }
    out.write_all(b"}")
}

fn write_string<W: Write>(s: &str, out: &mut W) -> io::Result<()> {
    // serde_json escapes only `"`, `\\` and control characters: a string without them is
    // written as it is (the common case, and much cheaper than the serializer).
    // A fold, not `any`: without the early exit it compiles to a vector loop.
    let plain = !s.bytes().fold(false, |escape, b| {
        escape | (b == b'"') | (b == b'\\') | (b < 0x20)
    });
    if plain {
        out.write_all(b"\"")?;
        out.write_all(s.as_bytes())?;
        return out.write_all(b"\"");
    }
    serde_json::to_writer(&mut *out, s).map_err(io::Error::other)
}

/// The canonical encoding of `value` as bytes.
pub fn to_canonical_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = write_canonical(value, &mut out);
    out
}

/// The sha256 of the canonical encoding of `value`.
pub fn digest_value(value: &Value) -> Digest {
    let mut w = HashWriter::new();
    // HashWriter never fails.
    let _ = write_canonical(value, &mut w);
    w.finish()
}

/// The sha256 of the canonical encoding of `object` (as if serialized: its kind, name,
/// namespace, resourceVersion and value, keys sorted), without cloning it.
pub fn digest_object(object: &Object) -> Digest {
    let mut w = HashWriter::new();
    let _ = write_object(object, &mut w);
    w.finish()
}

fn write_object<W: Write>(o: &Object, out: &mut W) -> io::Result<()> {
    out.write_all(b"{\"kind\":")?;
    write_string(&o.kind, out)?;
    out.write_all(b",\"name\":")?;
    write_string(&o.name, out)?;
    out.write_all(b",\"namespace\":")?;
    write_string(&o.namespace, out)?;
    if let Some(rv) = &o.resource_version {
        out.write_all(b",\"resourceVersion\":")?;
        write_string(rv, out)?;
    }
    out.write_all(b",\"value\":")?;
    write_canonical(&o.value, out)?;
    out.write_all(b"}")
}

/// The sha256 of the canonical encoding of `desired` as if serialized
/// (`{"effects":[{"id":…,"request":…}],"objects":[…]}`), without converting it to JSON.
pub fn digest_desired(desired: &Desired) -> Digest {
    let mut w = HashWriter::new();
    let _ = write_desired(desired, &mut w);
    w.finish()
}

fn write_desired<W: Write>(d: &Desired, out: &mut W) -> io::Result<()> {
    out.write_all(b"{\"effects\":[")?;
    for (i, e) in d.effects.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        out.write_all(b"{\"id\":")?;
        write_string(&e.id, out)?;
        out.write_all(b",\"request\":")?;
        write_canonical(&e.request, out)?;
        out.write_all(b"}")?;
    }
    out.write_all(b"],\"objects\":[")?;
    for (i, o) in d.objects.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write_object(o, out)?;
    }
    out.write_all(b"]}")
}

/// The sha256 of raw bytes.
pub fn digest_bytes(bytes: &[u8]) -> Digest {
    Sha256::digest(bytes).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorts_object_keys_at_every_depth() {
        let v = json!({"b": 1, "a": {"z": [true, null], "y": "x\"q"}});
        assert_eq!(
            String::from_utf8(to_canonical_vec(&v)).unwrap(),
            r#"{"a":{"y":"x\"q","z":[true,null]},"b":1}"#
        );
    }

    #[test]
    fn digests_an_object_as_its_canonical_serialization() {
        let mut o = Object::new("K", "ns", "n", json!({"b": 2, "a": 1}));
        o.resource_version = Some("7".into());
        let as_value = serde_json::to_value(&o).unwrap();
        assert_eq!(digest_object(&o), digest_value(&as_value));
        o.resource_version = None;
        let as_value = serde_json::to_value(&o).unwrap();
        assert_eq!(digest_object(&o), digest_value(&as_value));
    }

    #[test]
    fn digests_a_desired_as_its_canonical_serialization() {
        let mut o = Object::new("K", "ns", "n", json!({"b": 2, "a": {"z": 1, "y": [null]}}));
        let mut desired = Desired::default();
        assert_eq!(
            digest_desired(&desired),
            digest_value(&serde_json::to_value(&desired).unwrap())
        );
        desired.objects.push(o.clone());
        o.resource_version = Some("3".into());
        desired.objects.push(o);
        desired
            .effects
            .push(crate::EffectRequest::new("e1", &json!({"k": [1, 2]})).unwrap());
        desired
            .effects
            .push(crate::EffectRequest::new("e\"2", &json!("x")).unwrap());
        assert_eq!(
            digest_desired(&desired),
            digest_value(&serde_json::to_value(&desired).unwrap())
        );
    }

    proptest::proptest! {
        #[test]
        fn writes_every_string_as_serde_json_does(s in "(\\PC|[\\x00-\\x1f\\x7f\"\\\\])*") {
            let mut out = Vec::new();
            write_string(&s, &mut out).unwrap();
            proptest::prop_assert_eq!(out, serde_json::to_vec(&s).unwrap());
        }
    }
}
