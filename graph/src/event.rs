//! Events: what happened to the World, in journal order.

use jiff::Timestamp;
use serde::{Deserialize, Deserializer, Serialize};

use crate::object::{Object, ObjectKey};

/// One change to the World.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// An object was created or updated; it replaces any object with the same key.
    Applied(Object),
    /// An object was deleted.
    Deleted(ObjectKey),
    /// The clock advanced: `now` for every node that depends on time.
    Tick(Timestamp),
}

impl Event {
    /// The name of the event kind as written in the journal (`applied`, `deleted`, `tick`).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Event::Applied(_) => "applied",
            Event::Deleted(_) => "deleted",
            Event::Tick(_) => "tick",
        }
    }
}

/// An event with its journal sequence number (strictly increasing within a journal).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The sequence number, strictly greater than the previous entry's.
    pub seq: u64,
    /// What happened.
    pub event: Event,
}

/// The journal line format, borrowed for writing.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub(crate) enum LineRef<'a> {
    Applied { seq: u64, object: &'a Object },
    Deleted { seq: u64, key: &'a ObjectKey },
    Tick { seq: u64, now: &'a Timestamp },
}

/// The journal line format, owned for reading.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub(crate) enum Line {
    Applied { seq: u64, object: Object },
    Deleted { seq: u64, key: ObjectKey },
    Tick { seq: u64, now: Timestamp },
}

impl From<Line> for Entry {
    fn from(line: Line) -> Self {
        match line {
            Line::Applied { seq, object } => Entry {
                seq,
                event: Event::Applied(object),
            },
            Line::Deleted { seq, key } => Entry {
                seq,
                event: Event::Deleted(key),
            },
            Line::Tick { seq, now } => Entry {
                seq,
                event: Event::Tick(now),
            },
        }
    }
}

/// The journal line format as one flat record: the fast path of reading. serde decodes an
/// internally tagged enum ([`Line`]) by buffering the whole line first; this decodes it in one
/// pass. It accepts only the exact field sets [`Line`] accepts (each field is recorded as
/// present even when `null`), and anything it refuses is read again as a [`Line`], whose
/// answer (entry or error) stands.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FlatLine {
    #[serde(rename = "type")]
    kind: FlatKind,
    seq: u64,
    #[serde(default, deserialize_with = "present")]
    object: Option<Option<Object>>,
    #[serde(default, deserialize_with = "present")]
    key: Option<Option<ObjectKey>>,
    #[serde(default, deserialize_with = "present")]
    now: Option<Option<Timestamp>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum FlatKind {
    Applied,
    Deleted,
    Tick,
}

/// A field that is present (`Some`), holding its value or `None` for `null`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

impl FlatLine {
    /// The entry, when the line has exactly the fields of its event kind.
    pub(crate) fn into_entry(self) -> Option<Entry> {
        let seq = self.seq;
        let event = match (self.kind, self.object, self.key, self.now) {
            (FlatKind::Applied, Some(Some(object)), None, None) => Event::Applied(object),
            (FlatKind::Deleted, None, Some(Some(key)), None) => Event::Deleted(key),
            (FlatKind::Tick, None, None, Some(Some(now))) => Event::Tick(now),
            _ => return None,
        };
        Some(Entry { seq, event })
    }
}

/// The names of the event kinds a journal line may carry in its `type` field.
pub(crate) const EVENT_KINDS: [&str; 3] = ["applied", "deleted", "tick"];
