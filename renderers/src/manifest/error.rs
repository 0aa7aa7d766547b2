//! What can be wrong with a directory of manifests, one variant per kind of mistake.

use std::fmt;

/// One problem in one manifest file. Every message starts with the file (and, inside a file,
/// `document <n>`, counted from 1 in the order the documents appear) so an operator can go
/// straight to it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The file or directory could not be read.
    #[error("{file}: cannot read: {message}")]
    Read {
        /// The path.
        file: String,
        /// The operating system's reason.
        message: String,
    },
    /// The file is larger than [`super::MAX_FILE_BYTES`].
    #[error("{file}: the file is larger than {max} bytes; split it into several files")]
    FileTooLarge {
        /// The path.
        file: String,
        /// The limit.
        max: usize,
    },
    /// The directory holds more manifest files than [`super::MAX_FILES`].
    #[error("{dir}: more than {max} manifest files; split the directory")]
    TooManyFiles {
        /// The directory.
        dir: String,
        /// The limit.
        max: usize,
    },
    /// The directory holds more documents than [`super::MAX_DOCUMENTS`]; reading stopped here.
    #[error("{file}: document {document}: more than {max} documents in all; reading stopped here")]
    TooManyDocuments {
        /// The file of the first document over the limit.
        file: String,
        /// Its number in the file.
        document: usize,
        /// The limit.
        max: usize,
    },
    /// The file is not well-formed YAML or JSON; the rest of the file is not read.
    #[error("{file}: document {document}: {position}: {message}")]
    Syntax {
        /// The path.
        file: String,
        /// The document the parser was in.
        document: usize,
        /// `line L column C`, or `unknown position`.
        position: String,
        /// The parser's message.
        message: String,
    },
    /// The document nests deeper than [`super::MAX_DEPTH`].
    #[error("{file}: document {document}: nested deeper than {max} levels")]
    TooDeep {
        /// The path.
        file: String,
        /// The document.
        document: usize,
        /// The limit.
        max: usize,
    },
    /// A field has the wrong type, is missing, or has a value the type refuses.
    #[error("{file}: document {document}: {path}: {message}")]
    Invalid {
        /// The path.
        file: String,
        /// The document.
        document: usize,
        /// The field path (`spec.roles[2]`).
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A field the type does not have, in a part of the object identity owns (probably a typo).
    #[error("{file}: document {document}: {path}: unknown field; check its spelling")]
    UnknownField {
        /// The path.
        file: String,
        /// The document.
        document: usize,
        /// The field path.
        path: String,
    },
    /// A kind this directory may not hold.
    #[error(
        "{file}: document {document}: kind: {kind} ({api_version}) is not read here: a manifest directory \
         holds TalosCluster, TalosMachine, IchorUser and IchorInstallation (ichor.maesh.dev/v1alpha1) and \
         ConfigMap (v1); move other objects out of it"
    )]
    UnsupportedKind {
        /// The path.
        file: String,
        /// The document.
        document: usize,
        /// `apiVersion` as written.
        api_version: String,
        /// `kind` as written.
        kind: String,
    },
    /// Two documents define the same object.
    #[error(
        "{file}: document {document}: {kind} {object} is already defined in {first_file}: document \
         {first_document}; keep only one"
    )]
    Duplicate {
        /// The path of the second definition.
        file: String,
        /// Its document.
        document: usize,
        /// The kind.
        kind: String,
        /// `namespace/name`, or `name` for a cluster-scoped object.
        object: String,
        /// The path of the first definition.
        first_file: String,
        /// Its document.
        first_document: usize,
    },
}

/// Every problem found in a directory (never empty when returned as an error).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestErrors(pub Vec<ManifestError>);

impl fmt::Display for ManifestErrors {
    /// One problem per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ManifestErrors {}
