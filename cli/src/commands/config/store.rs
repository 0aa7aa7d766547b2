//! Where the progress of `ichor config apply` is kept: a `TalosOperation` of kind `config`,
//! behind [`OperationStore`] so a Kubernetes-backed store (the object in the cluster, which the
//! controller and the cluster page read too) can replace the local file later.
//!
//! [`FileOperationStore`] keeps one YAML file per cluster, `<dir>/.ichor/operations/<cluster>.yaml`
//! below the manifests directory. The directory starts with `.` because `ichor render` (and
//! `manifest_files::load_dir`) skips such entries but refuses any kind it does not read: a
//! `TalosOperation` in `<dir>/operations/` would break the next render of the same directory.
//! The record is written mode 0600 through a temporary file of a random name, never a fixed one
//! (see [`FileOperationStore::save`]).

use std::path::{Path, PathBuf};

use ichor_renderers::crd::TalosOperation;

use ichor_server::atomic_file::write_atomic;

/// The annotation holding the sha256 of the rendered document the operation applies, so a
/// re-run knows whether the stored operation is for the same render.
pub use ichor_renderers::contract::RENDERED_SHA_ANNOTATION;

/// A failure reading or writing the operation record.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The record could not be read or written.
    #[error("operation record {path}: {action} failed: {reason}")]
    Io {
        /// The file.
        path: String,
        /// `read`, `write` or `create directory`.
        action: &'static str,
        /// The I/O error.
        reason: String,
    },
    /// The record is not a TalosOperation.
    #[error(
        "operation record {path}: not a TalosOperation ({reason}); move it away to start a new operation"
    )]
    Parse {
        /// The file.
        path: String,
        /// The parser's message.
        reason: String,
    },
}

/// Loads and saves the `config` operation of a cluster.
pub trait OperationStore {
    /// The stored operation of `cluster`, if any.
    ///
    /// # Errors
    /// [`StoreError`] when it exists but cannot be read.
    fn load(&self, cluster: &str) -> Result<Option<TalosOperation>, StoreError>;
    /// Stores `operation` (replacing the previous one of its cluster), durably before returning.
    ///
    /// # Errors
    /// [`StoreError`] when it cannot be written.
    fn save(&self, operation: &TalosOperation) -> Result<(), StoreError>;
    /// Where the operation is kept, for messages.
    fn location(&self, cluster: &str) -> String;
}

/// The local-file store (see the module documentation).
#[derive(Debug, Clone)]
pub struct FileOperationStore {
    dir: PathBuf,
}

impl FileOperationStore {
    /// The store below the manifests directory `manifests_dir`.
    pub fn new(manifests_dir: &Path) -> Self {
        Self {
            dir: manifests_dir.join(".ichor").join("operations"),
        }
    }

    fn path(&self, cluster: &str) -> PathBuf {
        self.dir.join(format!("{cluster}.yaml"))
    }
}

/// Refuses a state directory (`DIR/.ichor` and the directory below it that is about to be
/// written) that is a symbolic link: the manifests tree may come from a repository others commit
/// to, and a link planted there would turn this command's writes into writes elsewhere.
///
/// # Errors
/// [`StoreError::Io`] naming the link.
pub fn refuse_linked_state_dir(sub: &Path) -> Result<(), StoreError> {
    for dir in [sub.parent(), Some(sub)].into_iter().flatten() {
        match std::fs::symlink_metadata(dir) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(StoreError::Io {
                    path: dir.display().to_string(),
                    action: "use",
                    reason:
                        "it is a symbolic link; remove it (this command keeps its state in a real directory)"
                            .to_owned(),
                });
            }
            _ => {}
        }
    }
    Ok(())
}

impl OperationStore for FileOperationStore {
    fn load(&self, cluster: &str) -> Result<Option<TalosOperation>, StoreError> {
        let path = self.path(cluster);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(StoreError::Io {
                    path: path.display().to_string(),
                    action: "read",
                    reason: e.to_string(),
                });
            }
        };
        serde_yaml::from_str(&text)
            .map(Some)
            .map_err(|e| StoreError::Parse {
                path: path.display().to_string(),
                reason: e.to_string(),
            })
    }

    fn save(&self, operation: &TalosOperation) -> Result<(), StoreError> {
        let cluster = &operation.spec.cluster;
        let path = self.path(cluster);
        let io = |action: &'static str, e: std::io::Error| StoreError::Io {
            path: path.display().to_string(),
            action,
            reason: e.to_string(),
        };
        refuse_linked_state_dir(&self.dir)?;
        std::fs::create_dir_all(&self.dir).map_err(|e| io("create directory", e))?;
        let text = serde_yaml::to_string(operation).map_err(|e| StoreError::Parse {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        // A fresh sibling of a random name (exclusive create, 0600) renamed over the record: an
        // interrupted write never leaves a half record, and in a shared checkout a name someone
        // else planted (a symlink to one of the writer's files) is never opened.
        write_atomic(&path, text.as_bytes()).map_err(|e| io("write", e))
    }

    fn location(&self, cluster: &str) -> String {
        self.path(cluster).display().to_string()
    }
}
