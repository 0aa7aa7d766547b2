//! What can go wrong reading or writing a journal.

use std::io;

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
