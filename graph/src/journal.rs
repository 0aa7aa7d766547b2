//! The journal: append-only JSON lines, one numbered event per line.
//!
//! Line format (keys as written):
//!
//! ```text
//! {"type":"applied","seq":1,"object":{"kind":"User","namespace":"ns","name":"a","value":{…}}}
//! {"type":"deleted","seq":2,"key":{"kind":"User","namespace":"ns","name":"a"}}
//! {"type":"tick","seq":3,"now":"2027-01-01T00:00:00Z"}
//! ```
//!
//! The writer redacts secret material ([`Redaction`]): a journal line never holds a Secret's
//! values, only their sha256. The reader bounds line length and reports every defect with its
//! line number; it never panics on any input.

use std::borrow::Cow;
use std::io::{self, BufRead, Read as _, Write};

use serde_json::{Map, Value};

use crate::canonical::{digest_bytes, digest_value};
use crate::event::{EVENT_KINDS, Entry, Event, FlatLine, Line, LineRef};
use crate::keys_only::{self, KeysOnly};
use crate::object::Object;
use crate::world::Prepared;

/// The default longest accepted journal line: 4 MiB.
pub const DEFAULT_MAX_LINE: usize = 4 * 1024 * 1024;

/// A journal defect, reading or writing. Reading errors name the 1-based line number.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The underlying reader failed.
    #[error("journal line {line}: could not read: {source}")]
    Read {
        /// The line being read.
        line: u64,
        /// The I/O error.
        source: io::Error,
    },
    /// A line is longer than the configured limit (a corrupt or hostile journal).
    #[error("journal line {line}: longer than the limit of {limit} bytes; the journal is corrupt")]
    LineTooLong {
        /// The offending line.
        line: u64,
        /// The limit in bytes.
        limit: usize,
    },
    /// A line's JSON ends early, as after an interrupted write.
    #[error("journal line {line}: the JSON is truncated ({source}); the write was probably interrupted")]
    Truncated {
        /// The offending line.
        line: u64,
        /// The parser's description.
        source: serde_json::Error,
    },
    /// A line names an event kind this version does not know.
    #[error("journal line {line}: unknown event type {kind:?}; expected one of applied, deleted, tick")]
    UnknownEvent {
        /// The offending line.
        line: u64,
        /// The `type` found.
        kind: String,
    },
    /// A line is not a valid event (bad JSON, missing or mistyped field).
    #[error("journal line {line}: not a valid event: {source}")]
    Invalid {
        /// The offending line.
        line: u64,
        /// The parser's description.
        source: serde_json::Error,
    },
    /// A line repeats the previous line's sequence number.
    #[error("journal line {line}: duplicate seq {seq}; every event needs a new sequence number")]
    DuplicateSeq {
        /// The offending line.
        line: u64,
        /// The repeated number.
        seq: u64,
    },
    /// A line's sequence number is lower than the previous line's.
    #[error("journal line {line}: seq {seq} comes after seq {previous}; sequence numbers must increase")]
    OutOfOrder {
        /// The offending line.
        line: u64,
        /// The number found.
        seq: u64,
        /// The previous line's number.
        previous: u64,
    },
    /// The writer was asked to write a sequence number not above the last one written.
    #[error("cannot write seq {seq} after seq {previous}: sequence numbers must strictly increase")]
    WriteOutOfOrder {
        /// The number refused.
        seq: u64,
        /// The last number written.
        previous: u64,
    },
    /// The writer ran out of sequence numbers (u64::MAX was written).
    #[error("cannot append: the journal's sequence numbers are exhausted")]
    SeqExhausted,
    /// The underlying writer failed.
    #[error("could not write the journal: {0}")]
    Write(#[source] io::Error),
    /// An event could not be encoded as JSON.
    #[error("could not encode an event as JSON: {0}")]
    Encode(#[source] serde_json::Error),
}

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

/// Writes a journal as JSON lines, redacting secrets and enforcing increasing sequence numbers.
pub struct JournalWriter<W: Write> {
    out: W,
    last_seq: Option<u64>,
    redaction: Redaction,
}

impl<W: Write> JournalWriter<W> {
    /// A writer with the default [`Redaction`] (Secret `data`/`stringData`).
    pub fn new(out: W) -> Self {
        Self::with_redaction(out, Redaction::default())
    }

    /// A writer with a chosen redaction.
    pub fn with_redaction(out: W, redaction: Redaction) -> Self {
        Self {
            out,
            last_seq: None,
            redaction,
        }
    }

    /// Continues a journal whose last written sequence number is `last_seq`.
    pub fn resume(mut self, last_seq: u64) -> Self {
        self.last_seq = Some(last_seq);
        self
    }

    /// Appends an event with the next sequence number (1 for a new journal) and returns it.
    ///
    /// # Errors
    /// When the writer fails or the sequence numbers are exhausted.
    pub fn append(&mut self, event: &Event) -> Result<u64, JournalError> {
        let seq = match self.last_seq {
            None => 1,
            Some(s) => s.checked_add(1).ok_or(JournalError::SeqExhausted)?,
        };
        self.write_event(seq, event)?;
        Ok(seq)
    }

    /// Writes an entry with its own sequence number, which must exceed the last one written.
    ///
    /// # Errors
    /// When the number does not increase, or the writer fails.
    pub fn write(&mut self, entry: &Entry) -> Result<(), JournalError> {
        self.write_event(entry.seq, &entry.event)
    }

    fn write_event(&mut self, seq: u64, event: &Event) -> Result<(), JournalError> {
        if let Some(previous) = self.last_seq
            && seq <= previous
        {
            return Err(JournalError::WriteOutOfOrder { seq, previous });
        }
        let redacted;
        let line = match event {
            Event::Applied(object) => {
                redacted = self.redaction.redact(object);
                LineRef::Applied {
                    seq,
                    object: &redacted,
                }
            }
            Event::Deleted(key) => LineRef::Deleted { seq, key },
            Event::Tick(now) => LineRef::Tick { seq, now },
        };
        let mut bytes = serde_json::to_vec(&line).map_err(JournalError::Encode)?;
        bytes.push(b'\n');
        self.out.write_all(&bytes).map_err(JournalError::Write)?;
        self.last_seq = Some(seq);
        Ok(())
    }

    /// Flushes the underlying writer.
    ///
    /// # Errors
    /// When the writer fails.
    pub fn flush(&mut self) -> Result<(), JournalError> {
        self.out.flush().map_err(JournalError::Write)
    }

    /// The last sequence number written.
    pub fn last_seq(&self) -> Option<u64> {
        self.last_seq
    }

    /// Returns the underlying writer.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Reads a journal line by line, as an iterator of entries.
///
/// Blank lines are skipped. The first defect is returned as an error naming its line, after
/// which the iterator ends: a journal is trusted up to its first bad line only.
pub struct JournalReader<R: BufRead> {
    input: R,
    line: u64,
    last_seq: Option<u64>,
    max_line: usize,
    buf: Vec<u8>,
    done: bool,
    keys_only: Vec<KeysOnly>,
}

impl<R: BufRead> JournalReader<R> {
    /// A reader with the default line limit ([`DEFAULT_MAX_LINE`]).
    pub fn new(input: R) -> Self {
        Self::with_max_line(input, DEFAULT_MAX_LINE)
    }

    /// A reader refusing lines longer than `max_line` bytes.
    pub fn with_max_line(input: R, max_line: usize) -> Self {
        Self {
            input,
            line: 0,
            last_seq: None,
            max_line,
            buf: Vec::new(),
            done: false,
            keys_only: Vec::new(),
        }
    }

    /// Reads the named object's listed fields with their key names only, each value `null`
    /// (see [`KeysOnly`]): for a consumer that needs which keys exist, never their values, this
    /// spares decoding large maps. Errors and every other object read as without it.
    pub fn keys_only(mut self, projection: KeysOnly) -> Self {
        self.keys_only.push(projection);
        self
    }

    /// The number of the last line read (1-based; 0 before the first).
    pub fn line(&self) -> u64 {
        self.line
    }

    fn next_entry(&mut self) -> Option<Result<Entry, JournalError>> {
        loop {
            self.buf.clear();
            let limit = u64::try_from(self.max_line).unwrap_or(u64::MAX).saturating_add(1);
            let read = (&mut self.input).take(limit).read_until(b'\n', &mut self.buf);
            self.line += 1;
            let line = self.line;
            match read {
                Ok(0) => return None,
                Ok(_) => {}
                Err(source) => return Some(Err(JournalError::Read { line, source })),
            }
            if self.buf.last() == Some(&b'\n') {
                self.buf.pop();
            } else if self.buf.len() > self.max_line {
                return Some(Err(JournalError::LineTooLong {
                    line,
                    limit: self.max_line,
                }));
            }
            if self.buf.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Some(self.parse(line));
        }
    }

    fn parse(&mut self, line: u64) -> Result<Entry, JournalError> {
        let fast = if self.keys_only.is_empty() {
            serde_json::from_slice::<FlatLine>(&self.buf)
                .ok()
                .and_then(FlatLine::into_entry)
        } else {
            keys_only::read_line(&self.buf, &self.keys_only)
        };
        let entry: Entry = match fast {
            Some(e) => e,
            None => match serde_json::from_slice::<Line>(&self.buf) {
                Ok(l) => {
                    let mut entry = l.into();
                    keys_only::project(&self.keys_only, &mut entry);
                    entry
                }
                Err(source) => return Err(classify(line, &self.buf, source)),
            },
        };
        if let Some(previous) = self.last_seq {
            if entry.seq == previous {
                return Err(JournalError::DuplicateSeq { line, seq: entry.seq });
            }
            if entry.seq < previous {
                return Err(JournalError::OutOfOrder {
                    line,
                    seq: entry.seq,
                    previous,
                });
            }
        }
        self.last_seq = Some(entry.seq);
        Ok(entry)
    }
}

fn classify(line: u64, bytes: &[u8], source: serde_json::Error) -> JournalError {
    if source.is_eof() {
        return JournalError::Truncated { line, source };
    }
    if let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(bytes)
        && let Some(Value::String(kind)) = map.get("type")
        && !EVENT_KINDS.contains(&kind.as_str())
    {
        return JournalError::UnknownEvent {
            line,
            kind: kind.clone(),
        };
    }
    JournalError::Invalid { line, source }
}

/// An entry read ahead: parsed, checked and its object hashed by the reading thread.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedEntry {
    /// The entry's sequence number.
    pub seq: u64,
    /// The event with its object's digest.
    pub prepared: Prepared,
}

/// Entries handed from the reading thread to the folding thread at a time: large enough that
/// the channel costs nothing per entry, small enough that the first evaluation starts at once.
const READ_AHEAD_CHUNK: usize = 256;
/// Chunks in flight between the threads: bounds the memory read ahead.
const READ_AHEAD_CHUNKS: usize = 4;

/// Objects the folding thread is done with (replaced or removed from its World), handed back
/// to the reading thread that allocated them, which frees them between chunks: freeing is then
/// local to the allocating thread and off the folding thread's path.
pub struct Recycler {
    batch: Vec<Object>,
    back: Option<std::sync::mpsc::SyncSender<Vec<Object>>>,
}

impl Recycler {
    /// Hands `object` back to be freed on the reading thread (or here, when that thread is gone
    /// or behind).
    pub fn recycle(&mut self, object: Object) {
        if self.back.is_none() {
            return;
        }
        self.batch.push(object);
        if self.batch.len() == READ_AHEAD_CHUNK {
            let full = std::mem::replace(&mut self.batch, Vec::with_capacity(READ_AHEAD_CHUNK));
            if let Some(back) = &self.back {
                // Full or gone: the batch comes back in the error and is freed here.
                drop(back.try_send(full));
            }
        }
    }
}

impl<R: BufRead + Send> JournalReader<R> {
    /// Runs `consume` over the journal's entries while a second thread reads, parses and hashes
    /// them ahead ([`Prepared`]), so folding and evaluating (one thread) overlaps with decoding
    /// (the other). The entries and the error, if any, arrive in the same order and are the
    /// same as from iterating the reader; at most a few hundred entries are read ahead. When
    /// `consume` stops early the reading thread stops too. Without a second thread (spawning
    /// failed) the entries are read on this one. Objects given to the [`Recycler`] are freed on
    /// the reading thread.
    pub fn read_ahead<T>(
        self,
        consume: impl FnOnce(&mut dyn Iterator<Item = Result<PreparedEntry, JournalError>>, &mut Recycler) -> T,
    ) -> T {
        // Borrowed by the reading thread, so the reader is still here if it cannot be spawned.
        let slot = std::sync::Mutex::new(Some(self));
        let take = || slot.lock().ok().and_then(|mut r| r.take());
        std::thread::scope(|scope| {
            let (tx, rx) =
                std::sync::mpsc::sync_channel::<Vec<Result<PreparedEntry, JournalError>>>(READ_AHEAD_CHUNKS);
            let (back, garbage) = std::sync::mpsc::sync_channel::<Vec<Object>>(READ_AHEAD_CHUNKS);
            let spawned = std::thread::Builder::new()
                .name("journal-reader".into())
                .spawn_scoped(scope, move || {
                    let Some(journal) = take() else { return };
                    let mut chunk = Vec::with_capacity(READ_AHEAD_CHUNK);
                    for item in journal.map(prepare) {
                        chunk.push(item);
                        if chunk.len() == READ_AHEAD_CHUNK {
                            let full = std::mem::replace(&mut chunk, Vec::with_capacity(READ_AHEAD_CHUNK));
                            if tx.send(full).is_err() {
                                return;
                            }
                            garbage.try_iter().for_each(drop);
                        }
                    }
                    if !chunk.is_empty() {
                        let _ = tx.send(chunk);
                    }
                });
            let mut recycler = Recycler {
                batch: Vec::new(),
                back: spawned.is_ok().then_some(back),
            };
            if spawned.is_err() {
                drop(rx);
                let mut local = take().into_iter().flatten().map(prepare);
                return consume(&mut local, &mut recycler);
            }
            let mut entries = rx.into_iter().flatten();
            let result = consume(&mut entries, &mut recycler);
            // Dropping the receiver ends a reading thread still running, before the scope joins it.
            drop(entries);
            drop(recycler);
            result
        })
    }
}

fn prepare(item: Result<Entry, JournalError>) -> Result<PreparedEntry, JournalError> {
    item.map(|Entry { seq, event }| PreparedEntry {
        seq,
        prepared: Prepared::new(event),
    })
}

impl<R: BufRead> Iterator for JournalReader<R> {
    type Item = Result<Entry, JournalError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.next_entry();
        if !matches!(item, Some(Ok(_))) {
            self.done = true;
        }
        item
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::ObjectKey;
    use jiff::Timestamp;
    use serde_json::json;

    fn read_all(text: &str) -> Vec<Result<Entry, JournalError>> {
        JournalReader::new(text.as_bytes()).collect()
    }

    fn first_error(text: &str) -> JournalError {
        read_all(text)
            .into_iter()
            .find_map(Result::err)
            .expect("an error")
    }

    #[test]
    fn round_trips_every_event_kind() {
        let events = vec![
            Event::Applied(Object::new("User", "ns", "a", json!({"spec": {"x": 1}}))),
            Event::Deleted(ObjectKey::new("User", "ns", "a")),
            Event::Tick(Timestamp::from_second(1_800_000_000).unwrap()),
        ];
        let mut w = JournalWriter::new(Vec::new());
        for e in &events {
            w.append(e).unwrap();
        }
        let text = String::from_utf8(w.into_inner()).unwrap();
        let back: Vec<Entry> = JournalReader::new(text.as_bytes()).map(Result::unwrap).collect();
        assert_eq!(back.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(back.into_iter().map(|e| e.event).collect::<Vec<_>>(), events);
    }

    #[test]
    fn never_writes_secret_values_only_their_sha256() {
        let key_material = "-----BEGIN PRIVATE KEY-----MIIEvQIBADANBgkqhkiG9w0BAQEFAASC";
        let secret = Object::new(
            "Secret",
            "ichor-system",
            "ichor-oidc-signing",
            json!({"data": {"keys.json": key_material}, "stringData": {"pw": "hunter2-hunter2"},
                   "metadata": {"name": "ichor-oidc-signing"}}),
        );
        let mut w = JournalWriter::new(Vec::new());
        w.append(&Event::Applied(secret)).unwrap();
        let text = String::from_utf8(w.into_inner()).unwrap();
        assert!(!text.contains("BEGIN PRIVATE KEY"), "{text}");
        assert!(!text.contains("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains(&hex::encode(digest_bytes(key_material.as_bytes()))));
        // The redacted journal reads back, and redacting again changes nothing.
        let entry = JournalReader::new(text.as_bytes()).next().unwrap().unwrap();
        let Event::Applied(o) = entry.event else {
            panic!("applied expected")
        };
        assert_eq!(Redaction::default().redact(&o).into_owned(), o);
    }

    #[test]
    fn leaves_objects_of_other_kinds_untouched() {
        let cm = Object::new("ConfigMap", "ns", "c", json!({"data": {"ca.crt": "PUBLIC"}}));
        assert!(matches!(Redaction::default().redact(&cm), Cow::Borrowed(_)));
    }

    #[test]
    fn names_the_line_of_truncated_json() {
        let text = "{\"type\":\"tick\",\"seq\":1,\"now\":\"2027-01-01T00:00:00Z\"}\n{\"type\":\"tick\",\"se";
        let err = first_error(text);
        assert!(matches!(err, JournalError::Truncated { line: 2, .. }), "{err}");
        assert!(err.to_string().starts_with("journal line 2:"), "{err}");
    }

    #[test]
    fn names_the_line_and_kind_of_an_unknown_event() {
        let text = "\n{\"type\":\"exploded\",\"seq\":1}\n";
        let err = first_error(text);
        assert!(
            matches!(&err, JournalError::UnknownEvent { line: 2, kind } if kind == "exploded"),
            "{err}"
        );
    }

    #[test]
    fn refuses_duplicate_and_decreasing_sequence_numbers() {
        let tick = |s: u64| format!("{{\"type\":\"tick\",\"seq\":{s},\"now\":\"2027-01-01T00:00:00Z\"}}\n");
        let dup = format!("{}{}{}", tick(1), tick(2), tick(2));
        assert!(matches!(
            first_error(&dup),
            JournalError::DuplicateSeq { line: 3, seq: 2 }
        ));
        let back = format!("{}{}{}", tick(5), tick(7), tick(6));
        assert!(matches!(
            first_error(&back),
            JournalError::OutOfOrder {
                line: 3,
                seq: 6,
                previous: 7
            }
        ));
    }

    #[test]
    fn refuses_a_line_over_the_limit_and_stops() {
        let text = format!("{}\n{{}}\n", "x".repeat(100));
        let items: Vec<_> = JournalReader::with_max_line(text.as_bytes(), 64).collect();
        assert_eq!(items.len(), 1);
        assert!(matches!(
            items[0],
            Err(JournalError::LineTooLong { line: 1, limit: 64 })
        ));
    }

    #[test]
    fn refuses_a_missing_field_as_invalid_with_its_line() {
        let err = first_error("{\"type\":\"deleted\",\"seq\":1}\n");
        assert!(matches!(err, JournalError::Invalid { line: 1, .. }), "{err}");
        assert!(err.to_string().contains("key"), "{err}");
    }

    #[test]
    fn the_writer_refuses_a_sequence_number_that_does_not_increase() {
        let mut w = JournalWriter::new(Vec::new());
        let tick = Event::Tick(Timestamp::from_second(0).unwrap());
        w.write(&Entry {
            seq: 4,
            event: tick.clone(),
        })
        .unwrap();
        let err = w
            .write(&Entry {
                seq: 4,
                event: tick.clone(),
            })
            .unwrap_err();
        assert!(matches!(
            err,
            JournalError::WriteOutOfOrder { seq: 4, previous: 4 }
        ));
        assert_eq!(w.append(&tick).unwrap(), 5);
    }

    /// What the reference parser (the tagged [`Line`]) makes of a line: the entry, or `None`.
    fn reference(line: &str) -> Option<Entry> {
        serde_json::from_str::<Line>(line).ok().map(Entry::from)
    }

    fn fast(line: &str) -> Option<Entry> {
        serde_json::from_str::<FlatLine>(line)
            .ok()
            .and_then(FlatLine::into_entry)
    }

    #[test]
    fn the_fast_reading_path_accepts_exactly_what_the_tagged_format_accepts() {
        let lines = [
            r#"{"type":"applied","seq":1,"object":{"kind":"K","namespace":"n","name":"a","value":{"b":[1,2.5,"x\"y"],"a":null}}}"#,
            r#"{"seq":2,"object":{"name":"a","kind":"K","resourceVersion":"9"},"type":"applied"}"#,
            r#"{"type":"deleted","seq":3,"key":{"kind":"K","name":"a"}}"#,
            r#"{"type":"tick","seq":4,"now":"2027-01-01T00:00:00Z"}"#,
            // Extra fields of another kind, even null ones, are refused by both.
            r#"{"type":"applied","seq":5,"object":{"kind":"K","name":"a"},"key":null}"#,
            r#"{"type":"tick","seq":6,"now":"2027-01-01T00:00:00Z","object":null}"#,
            r#"{"type":"applied","seq":7,"object":null}"#,
            r#"{"type":"applied","seq":8}"#,
            r#"{"type":"deleted","seq":9,"key":{"kind":"K","name":"a"},"extra":1}"#,
            r#"{"type":"boom","seq":10}"#,
            r#"{"type":"tick","seq":-1,"now":"2027-01-01T00:00:00Z"}"#,
            r#"{"type":"tick","seq":11,"seq":12,"now":"2027-01-01T00:00:00Z"}"#,
            r#"{"type":"tick","type":"tick","seq":13,"now":"2027-01-01T00:00:00Z"}"#,
        ];
        for line in lines {
            let reference = reference(line);
            // The fast path may refuse what the reference accepts (it then falls back), but it
            // never accepts anything else, nor reads it differently.
            if let Some(entry) = fast(line) {
                assert_eq!(Some(entry), reference, "{line}");
            }
        }
        assert!(fast(lines[0]).is_some() && fast(lines[1]).is_some());
        assert!(fast(lines[2]).is_some() && fast(lines[3]).is_some());
        // Through the reader, every line reads as the reference says.
        for line in lines {
            let read = JournalReader::new(line.as_bytes()).next().and_then(Result::ok);
            assert_eq!(read, reference(line), "{line}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_read_as_entries_or_errors_without_panicking(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)
        ) {
            let n = JournalReader::with_max_line(&bytes[..], 128).count();
            proptest::prop_assert!(n <= bytes.len() + 1);
        }

        #[test]
        fn any_lines_read_as_entries_or_errors_without_panicking(
            lines in proptest::collection::vec(
                proptest::prop_oneof![
                    "\\{\"type\":\"(tick|applied|deleted|boom)\",\"seq\":[0-9]{1,3}(,\"now\":\"2027-01-01T00:00:00Z\")?\\}",
                    "\\{\"type\":\"applied\",\"seq\":[0-9]{1,2},\"object\":\\{\"kind\":\"K\",\"name\":\"[a-z]\"(,\"value\":[0-9])?\\}\\}",
                    ".{0,40}",
                ],
                0..20,
            )
        ) {
            for line in &lines {
                if let Some(entry) = fast(line) {
                    proptest::prop_assert_eq!(Some(entry), reference(line));
                }
            }
            let text = lines.join("\n");
            let mut last = None;
            for e in JournalReader::new(text.as_bytes()).flatten() {
                proptest::prop_assert!(last.is_none_or(|l| e.seq > l));
                last = Some(e.seq);
            }
        }
    }

    fn numbered_journal(events: usize) -> Vec<u8> {
        let mut w = JournalWriter::new(Vec::new());
        for i in 0..events {
            let o = Object::new("User", "ns", format!("u{}", i % 7), json!({"v": i}));
            w.append(&Event::Applied(o)).unwrap();
        }
        w.into_inner()
    }

    #[test]
    fn reading_ahead_yields_the_same_entries_hashed_and_the_same_error_at_the_same_line() {
        let mut bytes = numbered_journal(1000);
        bytes.extend_from_slice(b"{\"type\":\"tick\",\"seq\":5,\"now\":\"2027-01-01T00:00:00Z\"}\n");
        bytes.extend_from_slice(&numbered_journal(3));
        let plain: Vec<_> = JournalReader::new(&bytes[..]).collect();
        let ahead: Vec<_> = JournalReader::new(&bytes[..]).read_ahead(|it, _| it.collect());
        assert_eq!(ahead.len(), plain.len());
        assert_eq!(ahead.len(), 1001, "1000 entries, then the error, then nothing");
        for (a, p) in ahead.iter().zip(&plain) {
            match (a, p) {
                (Ok(a), Ok(p)) => {
                    assert_eq!(a.seq, p.seq);
                    assert_eq!(a.prepared.event(), &p.event);
                    assert_eq!(a.prepared, Prepared::new(p.event.clone()));
                }
                (Err(a), Err(p)) => assert_eq!(a.to_string(), p.to_string()),
                _ => panic!("read ahead {a:?}, plainly {p:?}"),
            }
        }
        let last = ahead.last().unwrap().as_ref().unwrap_err().to_string();
        assert!(
            last.contains("line 1001") && last.contains("seq 5 comes after seq 1000"),
            "{last}"
        );
    }

    #[test]
    fn a_consumer_that_stops_early_ends_the_reading_thread() {
        // Far more than the chunks in flight: the reader must notice the consumer left.
        let bytes = numbered_journal(20 * READ_AHEAD_CHUNK * READ_AHEAD_CHUNKS);
        let first: Vec<u64> =
            JournalReader::new(&bytes[..]).read_ahead(|it, _| it.take(3).map(|e| e.unwrap().seq).collect());
        assert_eq!(first, vec![1, 2, 3]);
    }

    #[test]
    fn a_prepared_event_carries_the_digest_the_world_would_compute() {
        let o = Object::new("User", "ns", "a", json!({"spec": {"b": 1, "a": [true, null]}}));
        let mut world = crate::World::new();
        world.apply_prepared(Prepared::new(Event::Applied(o.clone())));
        let (_, held) = world.get_with_digest(&o.key()).unwrap();
        assert_eq!(*held, crate::canonical::digest_object(&o));
    }
}
