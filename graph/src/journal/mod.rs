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
//! values, only their sha256 — neither in `data`/`stringData` nor in an annotation (such as
//! `kubectl`'s last-applied configuration) nor in the managed fields, which are left out. The reader bounds line length and reports every defect with its
//! line number; it never panics on any input.

mod error;
mod read_ahead;
mod reader;
mod redaction;
mod writer;

pub use error::JournalError;
pub use read_ahead::{PreparedEntry, Recycler};
pub use reader::{DEFAULT_MAX_LINE, JournalReader};
pub use redaction::Redaction;
pub use writer::JournalWriter;
