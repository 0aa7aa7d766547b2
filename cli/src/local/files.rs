//! The produced Secrets of `ichor dev` as files: one directory per Secret and one file per key
//! (`<secrets dir>/<name>/<key>`, files 0600 in 0700 directories), exactly what a Kubernetes
//! Secret volume looks like, so the issuer reads `keys.json` and `tls.crt`/`tls.key` from the
//! paths its flags point to in a cluster. Each file is written atomically (a synced temporary
//! file renamed over it).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, DirBuilder};
use std::io;
use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use ichor_controller_core::identity::{TLS_CERT_KEY, TLS_KEY_KEY};
use ichor_controller_core::perform::{OPAQUE, SecretData, TLS_TYPE};
use ichor_renderers::trust::{CA_SECRET, TLS_SECRET};
use ichor_server::atomic_file::write_atomic;

use super::LocalError;

pub(super) fn io_error(path: &Path, source: io::Error) -> LocalError {
    LocalError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Secrets kept as files: `<dir>/<name>/<key>`.
#[derive(Debug, Clone)]
pub struct SecretFiles {
    dir: PathBuf,
}

fn valid_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Creates `dir` (and parents) mode 0700, and makes an existing `dir` 0700.
fn private_dir(dir: &Path) -> Result<(), LocalError> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| io_error(dir, e))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(|e| io_error(dir, e))
}

impl SecretFiles {
    /// Secrets under `dir` (created 0700 on the first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        SecretFiles { dir: dir.into() }
    }

    /// The directory of Secret `name`.
    pub fn dir_of(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes `secret` whole: every key as a file (private key material before certificates, so
    /// a reader sees a new certificate only with its key), then removes keys it no longer has.
    ///
    /// # Errors
    /// [`LocalError::BadKey`] for a name that cannot be a file; [`LocalError::Io`].
    pub fn write(&self, secret: &SecretData) -> Result<(), LocalError> {
        let bad = |key: &str| LocalError::BadKey {
            secret: secret.name.clone(),
            key: key.to_owned(),
        };
        if !valid_file_name(&secret.name) {
            return Err(bad(""));
        }
        if let Some(k) = secret.data.keys().find(|k| !valid_file_name(k)) {
            return Err(bad(k));
        }
        private_dir(&self.dir)?;
        let dir = self.dir_of(&secret.name);
        private_dir(&dir)?;
        let mut keys: Vec<&String> = secret.data.keys().collect();
        keys.sort_by_key(|k| (k.as_str() != TLS_KEY_KEY, k.as_str() == TLS_CERT_KEY));
        for key in keys {
            let path = dir.join(key);
            let bytes = secret.data.get(key).map(Vec::as_slice).unwrap_or_default();
            write_atomic(&path, bytes).map_err(|e| io_error(&path, e))?;
        }
        for entry in fs::read_dir(&dir).map_err(|e| io_error(&dir, e))? {
            let entry = entry.map_err(|e| io_error(&dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if valid_file_name(&name) && !secret.data.contains_key(&name) {
                fs::remove_file(entry.path()).map_err(|e| io_error(&entry.path(), e))?;
            }
        }
        Ok(())
    }

    /// Every Secret stored (directories with valid names; hidden and temporary files skipped).
    ///
    /// # Errors
    /// [`LocalError::Io`] (a missing directory is no Secret, not an error).
    pub fn read_all(&self) -> Result<Vec<SecretData>, LocalError> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error(&self.dir, e)),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_error(&self.dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !valid_file_name(&name) || !entry.path().is_dir() {
                continue;
            }
            let mut data = BTreeMap::new();
            let dir = entry.path();
            for file in fs::read_dir(&dir).map_err(|e| io_error(&dir, e))? {
                let file = file.map_err(|e| io_error(&dir, e))?;
                let key = file.file_name().to_string_lossy().into_owned();
                if valid_file_name(&key) && file.path().is_file() {
                    data.insert(key, fs::read(file.path()).map_err(|e| io_error(&file.path(), e))?);
                }
            }
            let type_ = if name == CA_SECRET || name == TLS_SECRET {
                TLS_TYPE
            } else {
                OPAQUE
            };
            out.push(SecretData {
                name,
                type_: type_.to_owned(),
                data,
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

/// The set of Secret names a settled local controller has written (tests, start-up checks).
pub fn stored_secret_names(dir: &Path) -> BTreeSet<String> {
    SecretFiles::new(dir)
        .read_all()
        .map(|all| all.into_iter().map(|s| s.name).collect())
        .unwrap_or_default()
}
