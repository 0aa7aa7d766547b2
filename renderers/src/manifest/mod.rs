//! Parsing a tree of manifests: the GitOps tree `ichor render --dir DIR` renders from and
//! `ichor dev` runs on. Reading the tree from the file system is the edge's (the walk in
//! `ichor-server`'s `manifest_files`); it hands every file's name and content to a
//! [`TreeParser`], with any problem it met reading them.
//!
//! # What is parsed
//! - Multi-document YAML (`---`); a file whose name ends in `.json` (any case) is one JSON
//!   document. Empty documents are skipped.
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
//! [`MAX_FILE_BYTES`] per file, [`MAX_DOCUMENTS`] documents in all, [`MAX_DEPTH`] levels of
//! nesting (the YAML parser also stops at 128 levels and on alias expansion bombs); a tree of at
//! most [`MAX_FILES`] files, [`MAX_DIR_DEPTH`] directories deep, which the reader of the tree
//! keeps to.
//!
//! # Guarantees
//! Never panics on any file content (a property test feeds arbitrary bytes), and reports every
//! problem of the tree at once rather than the first, so an operator fixes all in one pass.

mod error;
mod parse;

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
    let mut parser = TreeParser::new();
    for (name, bytes) in files {
        parser.add_file(name, bytes);
    }
    parser.finish()
}

/// The parser of a manifest tree, fed file by file by whoever reads the tree: objects and problems
/// accumulate over every file (duplicates are found across files, the bounds apply to the whole
/// set), and the problems the reader met (an unreadable entry, too many files) are reported with
/// them, in the order they were added.
#[derive(Default)]
pub struct TreeParser(parse::Collector);

impl TreeParser {
    /// A parser that has seen no file.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses one file's content; `name` is how errors name the file. A file over
    /// [`MAX_FILE_BYTES`] is refused as too large, unparsed.
    pub fn add_file(&mut self, name: &str, bytes: &[u8]) {
        self.0.add_file(name, bytes);
    }

    /// Reports a problem the reader of the tree met, such as [`ManifestError::Read`].
    pub fn add_error(&mut self, error: ManifestError) {
        self.0.error(error);
    }

    /// The objects of every file, each list sorted by namespace then name.
    ///
    /// # Errors
    /// Every problem added or found, in order.
    pub fn finish(self) -> Result<Manifests, ManifestErrors> {
        self.0.finish().map_err(ManifestErrors)
    }
}

#[cfg(test)]
mod tests;
