//! Reading a manifest tree from the file system: the GitOps directory `ichor render --dir`,
//! `ichor config apply` and `ichor dev` read, and the users directory of the issuer's local
//! store. This module lists and reads the files; parsing them is
//! [`ichor_renderers::manifest`]'s.
//!
//! # What is read
//! Every `*.yaml`, `*.yml` and `*.json` file (extension in any case) in the directory and,
//! recursively, its sub-directories (at most [`MAX_DIR_DEPTH`] deep), in sorted order. Entries
//! whose name starts with `.` (`.git`, the `..data` links of a mounted ConfigMap) are skipped;
//! symbolic links to files are followed, to directories not (no loops). `kustomization.yaml`
//! (and `.yml`, `Kustomization`) is kustomize's build file, not an object, and is skipped. At most
//! [`MAX_FILES`] files, each read up to [`MAX_FILE_BYTES`].

use std::{
    fs::{self, File},
    io::{self, Read},
    path::{Path, PathBuf},
};

use ichor_renderers::manifest::{
    MAX_DIR_DEPTH, MAX_FILE_BYTES, MAX_FILES, ManifestError, ManifestErrors, Manifests, TreeParser,
};

/// The manifest files of a tree, and what could not be read while listing it.
#[derive(Debug, Default)]
pub struct ManifestPaths {
    /// The manifest files, sorted; at most [`MAX_FILES`] + 1 (listing stops there, so the caller
    /// can tell that the tree has too many).
    pub files: Vec<PathBuf>,
    /// What could not be listed or inspected, in the order met.
    pub unreadable: Vec<Unreadable>,
}

/// A part of the tree that could not be read.
#[derive(Debug)]
pub enum Unreadable {
    /// A directory that could not be listed: nothing below it is read.
    Directory {
        /// The directory.
        path: PathBuf,
        /// The operating system's reason.
        error: io::Error,
    },
    /// An entry of a listed directory that could not be inspected (a failed read of the
    /// listing, named by its directory, or a manifest name whose target cannot be reached).
    Entry {
        /// The entry, or its directory.
        path: PathBuf,
        /// The operating system's reason.
        error: io::Error,
    },
}

impl Unreadable {
    /// As the manifest parser reports it: [`ManifestError::Read`] naming the path.
    fn to_manifest_error(&self) -> ManifestError {
        let (Self::Directory { path, error } | Self::Entry { path, error }) = self;
        ManifestError::Read {
            file: path.display().to_string(),
            message: error.to_string(),
        }
    }
}

/// Reads and parses the manifest directory `dir` (see the module documentation for what is read).
///
/// # Errors
/// Every problem found: unreadable entries, too many files, files too large, and everything
/// [`ichor_renderers::manifest::parse_files`] reports.
pub fn load_dir(dir: &Path) -> Result<Manifests, ManifestErrors> {
    let mut parser = TreeParser::new();
    let ManifestPaths { files, unreadable } = manifest_paths(dir);
    for problem in &unreadable {
        parser.add_error(problem.to_manifest_error());
    }
    if files.len() > MAX_FILES {
        parser.add_error(ManifestError::TooManyFiles {
            dir: dir.display().to_string(),
            max: MAX_FILES,
        });
        return parser.finish();
    }
    for path in files {
        let name = path.display().to_string();
        match read_bounded(&path) {
            Ok(Some(bytes)) => parser.add_file(&name, &bytes),
            Ok(None) => parser.add_error(ManifestError::FileTooLarge {
                file: name,
                max: MAX_FILE_BYTES,
            }),
            Err(e) => parser.add_error(ManifestError::Read {
                file: name,
                message: e.to_string(),
            }),
        }
    }
    parser.finish()
}

/// Lists the manifest files under `dir` (see the module documentation for which).
pub fn manifest_paths(dir: &Path) -> ManifestPaths {
    let mut paths = ManifestPaths::default();
    collect(dir, 0, &mut paths);
    paths.files.sort();
    paths
}

/// The file's bytes, or `None` when it is larger than [`MAX_FILE_BYTES`] (read no further).
///
/// # Errors
/// The file cannot be opened or read.
pub fn read_bounded(path: &Path) -> io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    File::open(path)?
        .take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    Ok((bytes.len() <= MAX_FILE_BYTES).then_some(bytes))
}

/// Whether a file name is a manifest of the tree.
fn is_manifest_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let is_kustomization =
        matches!(lower.as_str(), "kustomization.yaml" | "kustomization.yml") || name == "Kustomization";
    !is_kustomization && [".yaml", ".yml", ".json"].iter().any(|ext| lower.ends_with(ext))
}

fn collect(dir: &Path, depth: usize, out: &mut ManifestPaths) {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => {
            return out.unreadable.push(Unreadable::Directory {
                path: dir.to_path_buf(),
                error,
            });
        }
    };
    let mut listed = Vec::new();
    for entry in entries {
        match entry {
            Ok(entry) => listed.push(entry),
            Err(error) => out.unreadable.push(Unreadable::Entry {
                path: dir.to_path_buf(),
                error,
            }),
        }
    }
    listed.sort_by_key(fs::DirEntry::file_name);
    for entry in listed {
        // Stop listing once over the limit; the caller reports it.
        if out.files.len() > MAX_FILES {
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
                collect(&path, depth + 1, out);
            }
            continue;
        }
        if is_manifest_name(&name) {
            match fs::metadata(&path) {
                Ok(meta) if meta.is_file() => out.files.push(path),
                Ok(_) => {}
                Err(error) => out.unreadable.push(Unreadable::Entry { path, error }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLUSTER: &str = "apiVersion: ichor.maesh.dev/v1alpha1
kind: TalosCluster
metadata: {name: prod, namespace: ichor-system}
spec: {versionContract: v1.14, endpoint: 'https://prod.example.com:6443'}
";

    fn user(name: &str, spec: &str) -> String {
        format!(
            "apiVersion: ichor.maesh.dev/v1alpha1\nkind: IchorUser\nmetadata: {{name: {name}, namespace: ichor-system}}\nspec: {spec}\n"
        )
    }

    #[test]
    fn loads_a_directory_tree_skipping_hidden_entries_kustomize_files_and_other_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("users/team")).unwrap();
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::write(root.join("cluster.yaml"), CLUSTER).unwrap();
        let team = format!(
            "{}---\n{}",
            user("bob", "{roles: [viewer]}"),
            user("alice", "{roles: [admin]}")
        );
        fs::write(root.join("users/team/users.YML"), team).unwrap();
        let carol = serde_json::json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
            "metadata": {"name": "carol", "namespace": "ichor-system"}, "spec": {"roles": ["operator"]}});
        fs::write(root.join("users/carol.json"), carol.to_string()).unwrap();
        fs::write(root.join(".git/config.yaml"), "not: [valid").unwrap();
        fs::write(root.join("kustomization.yaml"), "resources: [cluster.yaml]\n").unwrap();
        fs::write(root.join("README.md"), "# manifests\n").unwrap();
        let m = load_dir(root).unwrap();
        let users: Vec<&str> = m
            .users
            .iter()
            .filter_map(|u| u.metadata.name.as_deref())
            .collect();
        assert_eq!(users, ["alice", "bob", "carol"]);
        assert_eq!(m.clusters.len(), 1);
    }

    #[test]
    fn load_errors_name_the_file_by_its_path() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("bad.yaml"), user("alice", "{disabled: 1}")).unwrap();
        let err = load_dir(dir.path()).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "{}: document 1: spec.disabled: invalid type: integer `1`, expected a boolean",
                dir.path().join("bad.yaml").display()
            )
        );
    }

    #[test]
    fn refuses_a_missing_directory() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let err = load_dir(&missing).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{}: cannot read: ", missing.display())),
            "{err}"
        );
    }

    #[test]
    fn refuses_a_file_over_one_mebibyte_without_reading_past_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.yaml");
        fs::write(&big, vec![b' '; MAX_FILE_BYTES + 1]).unwrap();
        assert_eq!(read_bounded(&big).unwrap(), None);
        assert_eq!(
            load_dir(dir.path()).unwrap_err().to_string(),
            format!(
                "{}: the file is larger than 1048576 bytes; split it into several files",
                big.display()
            )
        );
    }
}
