//! The journal reader: entries line by line, every defect named with its line, never a panic.

use std::io::{BufRead, Read as _};

use serde_json::Value;

use super::JournalError;
use crate::event::{EVENT_KINDS, Entry, FlatLine, Line};
use crate::keys_only::{self, KeysOnly};

/// The default longest accepted journal line: 4 MiB.
pub const DEFAULT_MAX_LINE: usize = 4 * 1024 * 1024;

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
}
