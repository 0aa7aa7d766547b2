//! The local credentials file: every user's credentials entry in one JSON document,
//! `{"generation": n, "entries": {"<user>": <entry>}}`, whose `generation` is the store's
//! [`Version`](super::super::Version).
//!
//! # Guarantees
//! - A write holds an exclusive lock on a separate lock file (`credentials.json.lock`, `flock`)
//!   for the whole read–compare–write, so two processes sharing the directory never lose each
//!   other's write: the second sees the generation moved and gets a conflict.
//! - The file is replaced atomically (a temporary file in the same directory, `fsync`, `rename`,
//!   `fsync` of the directory): a reader, which takes no lock, sees the old or the new file,
//!   never a mix, and a crash leaves one of the two.
//! - The file is created mode 0600 and its directory 0700; it is at most
//!   [`MAX_CREDENTIALS_FILE_BYTES`].
//! - A missing file is an empty store at generation 0. A file that cannot be parsed is reported
//!   as corrupt (without its content) and is never overwritten.

use std::{
    collections::BTreeMap,
    fs::File,
    io::{self, Read},
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use super::fsutil::{atomic_replace, ensure_private_dir, lock_exclusive};
use crate::store::{StoreError, redact::redact_quoted};

/// The file name of the credentials file inside the state directory.
pub const CREDENTIALS_FILE_NAME: &str = "credentials.json";
/// The file name of the lock file inside the state directory.
pub const LOCK_FILE_NAME: &str = "credentials.json.lock";
/// The largest credentials file read or written: 16 MiB.
pub const MAX_CREDENTIALS_FILE_BYTES: usize = 16 * 1024 * 1024;

/// The document on disk.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Document {
    /// Incremented by every write; 0 when the file does not exist.
    pub generation: u64,
    /// Each user's entry, as the entry's JSON object.
    #[serde(default)]
    pub entries: BTreeMap<String, serde_json::Value>,
}

/// The paths of the credentials file and its lock.
#[derive(Clone, Debug)]
pub(crate) struct CredentialsFile {
    dir: PathBuf,
    path: PathBuf,
    lock: PathBuf,
}

/// What a caller asked to change, already serialized and validated.
pub(crate) enum Edit {
    /// Set the user's entry to this JSON object.
    Put(serde_json::Value),
    /// Remove the user's entry.
    Remove,
}

impl CredentialsFile {
    /// The credentials file inside `dir`.
    pub(crate) fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_owned(),
            path: dir.join(CREDENTIALS_FILE_NAME),
            lock: dir.join(LOCK_FILE_NAME),
        }
    }

    /// The path of the credentials file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the document without locking (the file is only ever replaced by `rename`).
    /// `user` names the caller's user in a corruption error.
    pub(crate) fn read(&self, user: &str) -> Result<Document, StoreError> {
        let bytes = match read_bounded(&self.path) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                return Err(StoreError::Corrupt {
                    user: user.to_owned(),
                    reason: format!(
                        "the credentials file {} is larger than {MAX_CREDENTIALS_FILE_BYTES} bytes",
                        self.path.display()
                    ),
                });
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Document::default()),
            Err(e) => return Err(self.unavailable("read", &e)),
        };
        serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
            user: user.to_owned(),
            reason: format!(
                "the credentials file {} is not a valid credentials document: {}",
                self.path.display(),
                redact_quoted(&e.to_string())
            ),
        })
    }

    /// Applies `edit` to `user`'s entry if the document is still at `expected`, under the
    /// exclusive lock; returns the new generation (`expected` itself when nothing changed).
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the generation moved; [`StoreError::Corrupt`] when the file
    /// cannot be parsed (it is left as it is); [`StoreError::Unavailable`] on I/O failure, on a
    /// lock held for longer than [`LOCK_WAIT`](super::fsutil::LOCK_WAIT), or when the file would
    /// grow past its bound.
    pub(crate) fn write(&self, user: &str, expected: u64, edit: Edit) -> Result<u64, StoreError> {
        ensure_private_dir(&self.dir).map_err(|e| self.unavailable("create the directory of", &e))?;
        let _lock = lock_exclusive(&self.lock).map_err(|e| self.unavailable("lock", &e))?;
        let mut doc = self.read(user)?;
        if doc.generation != expected {
            return Err(StoreError::Conflict(user.to_owned()));
        }
        match edit {
            Edit::Put(value) => {
                doc.entries.insert(user.to_owned(), value);
            }
            Edit::Remove => {
                if doc.entries.remove(user).is_none() {
                    return Ok(expected);
                }
            }
        }
        doc.generation = expected.checked_add(1).ok_or_else(|| {
            StoreError::Unavailable(format!(
                "the credentials file {} has reached the largest generation",
                self.path.display()
            ))
        })?;
        let mut bytes = serde_json::to_vec_pretty(&doc)
            .map_err(|e| StoreError::Unavailable(format!("cannot serialize the credentials file: {e}")))?;
        bytes.push(b'\n');
        if bytes.len() > MAX_CREDENTIALS_FILE_BYTES {
            return Err(StoreError::Unavailable(format!(
                "the credentials file {} would be {} bytes, more than {MAX_CREDENTIALS_FILE_BYTES}; \
                 remove unused users",
                self.path.display(),
                bytes.len()
            )));
        }
        atomic_replace(&self.dir, &self.path, &bytes).map_err(|e| self.unavailable("write", &e))?;
        Ok(doc.generation)
    }

    fn unavailable(&self, what: &str, e: &io::Error) -> StoreError {
        StoreError::Unavailable(format!(
            "cannot {what} the credentials file {}: {e}",
            self.path.display()
        ))
    }
}

/// The file's bytes, or `None` when it is larger than [`MAX_CREDENTIALS_FILE_BYTES`].
fn read_bounded(path: &Path) -> io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    File::open(path)?
        .take(MAX_CREDENTIALS_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    Ok((bytes.len() <= MAX_CREDENTIALS_FILE_BYTES).then_some(bytes))
}
