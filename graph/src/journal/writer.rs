//! The journal writer: one JSON line per event, redacted, with increasing sequence numbers.

use std::io::Write;

use super::{JournalError, Redaction};
use crate::event::{Entry, Event, LineRef};

/// Writes a journal as JSON lines, redacting secrets and enforcing increasing sequence numbers.
pub struct JournalWriter<W: Write> {
    out: W,
    last_seq: Option<u64>,
    redaction: Redaction,
}

impl<W: Write> JournalWriter<W> {
    /// A writer with the default [`Redaction`] (a Secret's `data`, `stringData`, annotations
    /// and managed fields).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::digest_bytes;
    use crate::journal::JournalReader;
    use crate::object::{Object, ObjectKey};
    use jiff::Timestamp;
    use serde_json::json;

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
}
