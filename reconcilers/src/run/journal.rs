//! The `--journal FILE` writer: every event as a JSON line, a Secret's `data`/`stringData` and
//! annotation values redacted to per-key sha256 and its managed fields left out
//! ([`ichor_graph::Redaction`]'s default), continued across restarts.
//!
//! An existing journal is read to its end and continued after its last sequence number. One
//! with a defect (a line cut by a crash, say) is renamed aside to `FILE.bad-<unix seconds>` and
//! a new journal started: a damaged history must not keep the controller down.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use ichor_graph::{JournalReader, JournalWriter};

use super::Journal;

/// Why the journal could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The file could not be read, renamed or created.
    #[error("--journal {path}: {error}")]
    Io {
        /// The journal.
        path: PathBuf,
        /// The operating system's reason.
        error: std::io::Error,
    },
}

/// Why the journal at a path cannot be continued (it is then kept aside and a new one started).
#[derive(Debug, thiserror::Error)]
pub enum JournalDefect {
    /// The file exists but could not be opened.
    #[error("cannot open the journal: {0}")]
    Open(#[source] std::io::Error),
    /// A line could not be read or is not a journal entry.
    #[error(transparent)]
    Entry(#[from] ichor_graph::JournalError),
}

/// The last sequence number of the journal at `path`: `Ok(None)` for no file or an empty one.
///
/// # Errors
/// The journal has a defect: it could not be opened, or a line is not an entry in sequence.
pub fn last_seq(path: &Path) -> Result<Option<u64>, JournalDefect> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(JournalDefect::Open(e)),
    };
    let mut last = None;
    for entry in JournalReader::new(BufReader::new(file)) {
        last = Some(entry?.seq);
    }
    Ok(last)
}

/// Opens (or continues) the journal at `path`, mode 0600: the journal holds no Secret value but
/// does hold every input object.
///
/// # Errors
/// [`OpenError::Io`].
pub fn open(path: &Path) -> Result<Journal, OpenError> {
    let io = |error| OpenError::Io {
        path: path.to_owned(),
        error,
    };
    let last = match last_seq(path) {
        Ok(last) => last,
        Err(reason) => {
            let aside = PathBuf::from(format!(
                "{}.bad-{}",
                path.display(),
                jiff::Timestamp::now().as_second()
            ));
            tracing::warn!(journal = %path.display(), aside = %aside.display(), reason = %reason,
                "the journal has a defect; it is kept aside and a new one started");
            std::fs::rename(path, &aside).map_err(io)?;
            None
        }
    };
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(io)?;
    let out: Box<dyn Write + Send> = Box::new(BufWriter::new(file));
    let writer = JournalWriter::new(out);
    Ok(match last {
        Some(seq) => writer.resume(seq),
        None => writer,
    })
}
