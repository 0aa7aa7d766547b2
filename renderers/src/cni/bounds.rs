//! Size bounds of one values layer (spec `cilium-values.md` §7), checked before anything else
//! walks the values, so every later walk is bounded in depth and work.
//!
//! The walk here is iterative (an explicit stack), so a value nested far deeper than the cap
//! costs time linear in its size and never the call stack.

use std::io;

use serde_json::Value;

/// The largest values layer, as compact JSON: 64 KiB, about 130× the Talos-recommended layer
/// and about twice the chart's whole default values tree.
pub const MAX_VALUES_BYTES: usize = 64 * 1024;
/// The deepest nesting of objects and arrays (the values object itself is level 1); the
/// chart's schema is at most 8 property levels deep.
pub const MAX_DEPTH: usize = 16;
/// The most object keys in the whole layer; the chart's schema has 1,521 property paths.
pub const MAX_KEYS: usize = 2_000;

/// What [`measure`] found out of bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Breach {
    /// Nesting goes deeper than [`MAX_DEPTH`].
    TooDeep,
    /// More than [`MAX_KEYS`] object keys.
    TooManyKeys(usize),
    /// Compact JSON longer than [`MAX_VALUES_BYTES`] (at least this many bytes).
    TooLarge(usize),
}

/// Checks depth and key count without recursion, then (only when the depth is bounded, so the
/// recursive serializer is safe) the compact JSON size, stopping as soon as the cap is passed.
pub fn measure(values: &Value) -> Vec<Breach> {
    let mut breaches = Vec::new();
    let mut keys = 0usize;
    let mut stack: Vec<(&Value, usize)> = vec![(values, 1)];
    while let Some((value, depth)) = stack.pop() {
        match value {
            Value::Object(map) => {
                if depth > MAX_DEPTH {
                    breaches.push(Breach::TooDeep);
                    return breaches;
                }
                keys = keys.saturating_add(map.len());
                stack.extend(map.values().map(|child| (child, depth + 1)));
            }
            Value::Array(items) => {
                if depth > MAX_DEPTH {
                    breaches.push(Breach::TooDeep);
                    return breaches;
                }
                stack.extend(items.iter().map(|child| (child, depth + 1)));
            }
            _ => {}
        }
    }
    if keys > MAX_KEYS {
        breaches.push(Breach::TooManyKeys(keys));
    }
    let mut counter = CappedCounter { written: 0 };
    if serde_json::to_writer(&mut counter, values).is_err() || counter.written > MAX_VALUES_BYTES {
        breaches.push(Breach::TooLarge(counter.written));
    }
    breaches
}

/// An `io::Write` sink that only counts, and fails once the count passes the cap so a huge
/// value is not serialized to the end.
struct CappedCounter {
    written: usize,
}

impl io::Write for CappedCounter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.written = self.written.saturating_add(buf.len());
        if self.written > MAX_VALUES_BYTES {
            return Err(io::Error::other("values layer over the size cap"));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
