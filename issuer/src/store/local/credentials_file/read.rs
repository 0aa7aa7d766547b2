//! Reading the credentials file: without the lock (the file is only ever replaced by `rename`),
//! and served from the last document this process parsed or wrote while the file on disk is
//! still that file (see [`FileStamp`]).

use std::{
    fs::{File, Metadata},
    io::{self, Read},
    os::unix::fs::MetadataExt as _,
    sync::Arc,
};

use super::{
    CredentialsFile, MAX_CREDENTIALS_FILE_BYTES,
    document::{Document, Snapshot},
};
use crate::store::{StoreError, redact::redact_quoted};

/// The last document parsed or written, the file it is the content of (kept open, so its inode
/// number stays taken), and that file's stamp.
#[derive(Debug)]
pub(super) struct Cached {
    pub(super) stamp: FileStamp,
    pub(super) _file: File,
    pub(super) snapshot: Arc<Snapshot>,
}

/// What identifies one version of the file on disk. The file is only ever replaced by `rename`
/// of a new file, so a new version is a new inode (the cache holds the old one open, so it is
/// not reused); size and times also catch an edit in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FileStamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileStamp {
    pub(super) fn of(meta: &Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

impl CredentialsFile {
    /// The cached document when the file on disk is still the cached file: one `stat` of the
    /// path, cheap enough for an async thread. `None` when [`CredentialsFile::read`] must parse.
    pub(crate) fn read_cached(&self) -> Option<Arc<Snapshot>> {
        let stamp = FileStamp::of(&std::fs::metadata(&self.path).ok()?);
        self.cached()
            .as_ref()
            .filter(|cached| cached.stamp == stamp)
            .map(|cached| Arc::clone(&cached.snapshot))
    }

    /// Reads the document without locking (the file is only ever replaced by `rename`), from the
    /// cache while the file is unchanged. `user` names the caller's user in a corruption error.
    pub(crate) fn read(&self, user: &str) -> Result<Arc<Snapshot>, StoreError> {
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Arc::default()),
            Err(e) => return Err(self.unavailable("read", &e)),
        };
        // The stamp of the open handle describes exactly the bytes read below.
        let stamp = FileStamp::of(&file.metadata().map_err(|e| self.unavailable("read", &e))?);
        if let Some(cached) = self.cached().as_ref()
            && cached.stamp == stamp
        {
            return Ok(Arc::clone(&cached.snapshot));
        }
        let snapshot = Arc::new(self.parse(&mut file, user)?);
        let mut cached = self.cached();
        // A reader that opened the file just before a commit replaced it parses the older file:
        // it must not evict the newer document (generations only grow under the lock).
        if cached
            .as_ref()
            .is_none_or(|c| c.snapshot.generation <= snapshot.generation)
        {
            *cached = Some(Cached {
                stamp,
                _file: file,
                snapshot: Arc::clone(&snapshot),
            });
        }
        Ok(snapshot)
    }

    fn parse(&self, file: &mut File, user: &str) -> Result<Snapshot, StoreError> {
        let bytes = match read_bounded(file).map_err(|e| self.unavailable("read", &e))? {
            Some(bytes) => bytes,
            None => {
                return Err(StoreError::Corrupt {
                    user: user.to_owned(),
                    reason: format!(
                        "the credentials file {} is larger than {MAX_CREDENTIALS_FILE_BYTES} bytes",
                        self.path.display()
                    ),
                });
            }
        };
        let doc: Document = serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
            user: user.to_owned(),
            reason: format!(
                "the credentials file {} is not a valid credentials document: {}",
                self.path.display(),
                redact_quoted(&e.to_string())
            ),
        })?;
        Ok(Snapshot::of(&doc))
    }

    /// The document under the lock: the cached one while the file is still the cached file,
    /// else parsed afresh (and cached).
    pub(super) fn read_locked(&self) -> Result<Snapshot, StoreError> {
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Snapshot::default()),
            Err(e) => return Err(self.unavailable("read", &e)),
        };
        let stamp = FileStamp::of(&file.metadata().map_err(|e| self.unavailable("read", &e))?);
        if let Some(cached) = self.cached().as_ref()
            && cached.stamp == stamp
        {
            return Ok(Snapshot::clone(&cached.snapshot));
        }
        let snapshot = self.parse(&mut file, "")?;
        *self.cached() = Some(Cached {
            stamp,
            _file: file,
            snapshot: Arc::new(snapshot.clone()),
        });
        Ok(snapshot)
    }
}

/// The file's bytes, or `None` when it is larger than [`MAX_CREDENTIALS_FILE_BYTES`].
fn read_bounded(file: &mut File) -> io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    file.by_ref()
        .take(MAX_CREDENTIALS_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    Ok((bytes.len() <= MAX_CREDENTIALS_FILE_BYTES).then_some(bytes))
}
