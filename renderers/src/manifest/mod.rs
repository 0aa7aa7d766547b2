//! Reading a directory of manifests: the GitOps tree `ichor render --dir DIR` renders from and
//! `ichor dev` runs on.
//!
//! # What is read
//! - Every `*.yaml`, `*.yml` and `*.json` file (extension in any case) in the directory and,
//!   recursively, its sub-directories (at most [`MAX_DIR_DEPTH`] deep), in sorted order. Entries
//!   whose name starts with `.` (`.git`, the `..data` links of a mounted ConfigMap) are skipped;
//!   symbolic links to files are followed, to directories not (no loops). `kustomization.yaml`
//!   (and `.yml`, `Kustomization`) is kustomize's build file, not an object, and is skipped.
//! - Multi-document YAML (`---`); a JSON file is one document. Empty documents are skipped.
//! - Kinds: `TalosCluster`, `TalosMachine`, `IchorUser`, `IchorInstallation`
//!   (`ichor.maesh.dev/v1alpha1`) and `ConfigMap` (`v1`, kept as the Kubernetes type: the trust
//!   ConfigMap `ichor-oidc-trust`). **Any other kind is an error**, not skipped: a misspelt kind or
//!   version (`IchorUsers`, `v1beta1`) must not silently drop a user from the tree.
//!
//! # Checks
//! - Wrong types and missing fields, with the field path.
//! - Unknown fields where identity owns the schema: all of `IchorUser` and `ConfigMap`;
//!   `spec.authentication` and `spec.cni` of `TalosCluster`; the modelled fields of `TalosMachine`
//!   (`spec.cluster|role|address`, `status.conditions`); `spec.users` of `IchorInstallation`.
//!   Unknown fields elsewhere in those kinds belong to other subsystems and are ignored.
//! - Duplicate YAML keys, and two documents defining the same kind + namespace + name (the
//!   namespace as written: an absent one differs from an explicit `ichor-system`).
//! - `metadata.name` present.
//!
//! # Bounds
//! [`MAX_FILE_BYTES`] per file, [`MAX_FILES`] files, [`MAX_DOCUMENTS`] documents in all,
//! [`MAX_DEPTH`] levels of nesting (the YAML parser also stops at 128 levels and on alias
//! expansion bombs).
//!
//! # Guarantees
//! Never panics on any file content (a property test feeds arbitrary bytes), and reports every
//! problem of the directory at once rather than the first, so an operator fixes all in one pass.

mod error;
mod parse;

use std::{
    fs,
    io::Read,
    path::{Path, PathBuf},
};

use k8s_openapi::api::core::v1::ConfigMap;

pub use error::{ManifestError, ManifestErrors};

use crate::crd::{IchorInstallation, IchorUser, TalosCluster, TalosMachine};

/// The largest manifest file read: 1 MiB.
pub const MAX_FILE_BYTES: usize = 1024 * 1024;
/// The most manifest files in one directory tree.
pub const MAX_FILES: usize = 1_000;
/// The most documents in all files of a directory tree.
pub const MAX_DOCUMENTS: usize = 10_000;
/// The deepest nesting of a document (objects and arrays).
pub const MAX_DEPTH: usize = 64;
/// The deepest sub-directory searched below the directory given.
pub const MAX_DIR_DEPTH: usize = 16;

/// The objects of a manifest directory, each list sorted by namespace then name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Manifests {
    /// `TalosCluster` objects.
    pub clusters: Vec<TalosCluster>,
    /// `TalosMachine` objects.
    pub machines: Vec<TalosMachine>,
    /// `IchorUser` objects.
    pub users: Vec<IchorUser>,
    /// `IchorInstallation` objects.
    pub installations: Vec<IchorInstallation>,
    /// `ConfigMap` objects.
    pub configmaps: Vec<ConfigMap>,
}

/// Parse one file's content; `name` is how errors name the file.
///
/// # Errors
/// Every problem found in the file.
pub fn parse_file(name: &str, bytes: &[u8]) -> Result<Manifests, ManifestErrors> {
    parse_files([(name, bytes)])
}

/// Parse several files (name, content) as one directory: duplicates are found across files and
/// the bounds apply to the whole set.
///
/// # Errors
/// Every problem found in every file.
pub fn parse_files<'a>(
    files: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> Result<Manifests, ManifestErrors> {
    let mut collector = parse::Collector::default();
    for (name, bytes) in files {
        collector.add_file(name, bytes);
    }
    collector.finish().map_err(ManifestErrors)
}

/// Read and parse the manifest directory `dir` (see the module documentation for what is read).
///
/// # Errors
/// Every problem found: unreadable entries, and everything [`parse_files`] reports.
pub fn load_dir(dir: &Path) -> Result<Manifests, ManifestErrors> {
    let mut collector = parse::Collector::default();
    let mut files = Vec::new();
    collect_files(dir, 0, &mut files, &mut collector);
    files.sort();
    if files.len() > MAX_FILES {
        collector.error(ManifestError::TooManyFiles {
            dir: dir.display().to_string(),
            max: MAX_FILES,
        });
        return collector.finish().map_err(ManifestErrors);
    }
    for path in files {
        let name = path.display().to_string();
        match read_bounded(&path) {
            Ok(Some(bytes)) => collector.add_file(&name, &bytes),
            Ok(None) => collector.error(ManifestError::FileTooLarge {
                file: name,
                max: MAX_FILE_BYTES,
            }),
            Err(e) => collector.error(ManifestError::Read {
                file: name,
                message: e.to_string(),
            }),
        }
    }
    collector.finish().map_err(ManifestErrors)
}

/// The file's bytes, or `None` when it is larger than [`MAX_FILE_BYTES`] (read no further).
fn read_bounded(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    fs::File::open(path)?
        .take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    Ok((bytes.len() <= MAX_FILE_BYTES).then_some(bytes))
}

/// Whether a file name is a manifest this module reads.
fn is_manifest_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let is_kustomization =
        matches!(lower.as_str(), "kustomization.yaml" | "kustomization.yml") || name == "Kustomization";
    !is_kustomization && [".yaml", ".yml", ".json"].iter().any(|ext| lower.ends_with(ext))
}

fn collect_files(dir: &Path, depth: usize, out: &mut Vec<PathBuf>, collector: &mut parse::Collector) {
    let read_error = |path: &Path, e: std::io::Error| ManifestError::Read {
        file: path.display().to_string(),
        message: e.to_string(),
    };
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => return collector.error(read_error(dir, e)),
    };
    let mut entries: Vec<_> = entries
        .filter_map(|e| e.map_err(|e| collector.error(read_error(dir, e))).ok())
        .collect();
    entries.sort_by_key(fs::DirEntry::file_name);
    for entry in entries {
        // Stop listing once over the limit; the caller reports it.
        if out.len() > MAX_FILES {
            return;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let Ok(link_meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if link_meta.is_dir() {
            if depth < MAX_DIR_DEPTH {
                collect_files(&path, depth + 1, out, collector);
            }
            continue;
        }
        if is_manifest_name(&name) {
            match fs::metadata(&path) {
                Ok(meta) if meta.is_file() => out.push(path),
                Ok(_) => {}
                Err(e) => collector.error(read_error(&path, e)),
            }
        }
    }
}

#[cfg(test)]
mod tests;
