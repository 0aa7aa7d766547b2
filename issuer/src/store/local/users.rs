//! The users of the local store: the `IchorUser` objects of a manifest directory (the GitOps tree
//! `ichor dev` runs on), read file by file so one bad file costs only its own users.
//!
//! # What is read
//! The same files as [`ichor_server::manifest_files::load_dir`], listed by the same walk
//! ([`manifest_paths`]): `*.yaml`, `*.yml`, `*.json` (any case) in the directory and its
//! sub-directories (at most [`MAX_DIR_DEPTH`](ichor_renderers::manifest::MAX_DIR_DEPTH) deep),
//! skipping names that start with `.` and kustomize's build file. Objects of other kinds in the
//! tree are ignored here. A file is parsed again only when its size, modification time or inode
//! changed.
//!
//! # What is refused (logged as a warning naming the file, never fatal)
//! A file that does not parse (every user in it is skipped), a file over
//! [`MAX_FILE_BYTES`], a user whose name is not a DNS label or whose roles are invalid, a user in
//! a namespace other than `ichor-system`, and a user defined in two files (both are skipped: which
//! one is meant, say a disabled or an enabled copy, is not guessable).

use std::{
    collections::{BTreeMap, HashMap},
    fs, io,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    sync::Arc,
    time::SystemTime,
};

use ichor_renderers::{
    crd::NAMESPACE,
    manifest::{MAX_FILE_BYTES, MAX_FILES, parse_file},
};
use ichor_server::manifest_files::{ManifestPaths, Unreadable, manifest_paths, read_bounded};

use crate::store::{StoreError, StoredUser, convert::stored_user};

/// What identifies one version of a file without reading it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FileKey {
    len: u64,
    modified: Option<SystemTime>,
    dev: u64,
    ino: u64,
}

impl FileKey {
    fn of(meta: &fs::Metadata) -> Self {
        Self {
            len: meta.len(),
            modified: meta.modified().ok(),
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }
}

/// One parsed file.
#[derive(Debug)]
pub(crate) struct ParsedFile {
    key: FileKey,
    /// The valid users the file defines.
    users: Vec<StoredUser>,
    /// How many objects (of any kind) the file holds; 0 when it could not be parsed.
    objects: usize,
}

/// The users of the directory at one moment, and the parsed files they came from.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    files: HashMap<PathBuf, Arc<ParsedFile>>,
    /// Valid, unambiguous users, with the file each comes from.
    users: BTreeMap<String, (StoredUser, PathBuf)>,
    /// Users defined in more than one file, with those files (skipped).
    duplicates: BTreeMap<String, Vec<PathBuf>>,
}

/// Where a user is defined.
pub(crate) enum Location<'a> {
    /// Nowhere.
    Absent,
    /// In this file, which holds this many objects.
    File(&'a Path, usize),
    /// In several files (the user is skipped).
    Duplicate(&'a [PathBuf]),
}

impl Scan {
    /// The user, if defined once and valid.
    pub(crate) fn user(&self, name: &str) -> Option<&StoredUser> {
        self.users.get(name).map(|(user, _)| user)
    }

    /// Every valid user, sorted by name.
    pub(crate) fn all_users(&self) -> Vec<StoredUser> {
        self.users.values().map(|(user, _)| user.clone()).collect()
    }

    /// Where the user is defined.
    pub(crate) fn locate(&self, name: &str) -> Location<'_> {
        if let Some(files) = self.duplicates.get(name) {
            return Location::Duplicate(files);
        }
        match self.users.get(name) {
            Some((_, path)) => {
                let objects = self.files.get(path).map_or(0, |f| f.objects);
                Location::File(path, objects)
            }
            None => Location::Absent,
        }
    }

    /// Reads the directory again, reusing every parsed file whose key did not change.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when `dir` exists but cannot be listed. A missing `dir` is an
    /// empty directory.
    pub(crate) fn rescan(&self, dir: &Path) -> Result<Scan, StoreError> {
        match fs::read_dir(dir) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                tracing::debug!(dir = %dir.display(), "the users directory does not exist; no users");
                return Ok(Scan::default());
            }
            Err(e) => {
                return Err(StoreError::Unavailable(format!(
                    "cannot list the users directory {}: {e}",
                    dir.display()
                )));
            }
        }
        let ManifestPaths {
            files: mut paths,
            unreadable,
        } = manifest_paths(dir);
        for problem in &unreadable {
            // An entry that cannot be inspected is skipped, as if it were not there.
            if let Unreadable::Directory { path, error } = problem {
                tracing::warn!(dir = %path.display(), error = %error, "cannot list directory; its users are ignored");
            }
        }
        if paths.len() > MAX_FILES {
            tracing::warn!(
                dir = %dir.display(),
                max = MAX_FILES,
                "the users directory has too many manifest files; only the first are read"
            );
            paths.truncate(MAX_FILES);
        }
        let mut changed = paths.len() != self.files.len();
        let mut files = HashMap::with_capacity(paths.len());
        for path in paths {
            let meta = match fs::metadata(&path) {
                Ok(meta) => meta,
                // Removed between listing and now: it is simply gone.
                Err(_) => continue,
            };
            let key = FileKey::of(&meta);
            let parsed = match self.files.get(&path) {
                Some(previous) if previous.key == key => Arc::clone(previous),
                _ => {
                    changed = true;
                    Arc::new(parse_one(&path, key))
                }
            };
            files.insert(path, parsed);
        }
        Ok(assemble(files, changed))
    }
}

/// Builds the user index from the parsed files; warns about duplicates when something changed
/// (so an unchanged tree does not repeat the warning on every refresh).
fn assemble(files: HashMap<PathBuf, Arc<ParsedFile>>, changed: bool) -> Scan {
    let mut sorted: Vec<(&PathBuf, &Arc<ParsedFile>)> = files.iter().collect();
    sorted.sort_by_key(|(path, _)| *path);
    let mut users: BTreeMap<String, (StoredUser, PathBuf)> = BTreeMap::new();
    let mut duplicates: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for (path, parsed) in sorted {
        for user in &parsed.users {
            if let Some(files) = duplicates.get_mut(&user.name) {
                files.push(path.clone());
            } else if let Some((_, first)) = users.remove(&user.name) {
                duplicates.insert(user.name.clone(), vec![first, path.clone()]);
            } else {
                users.insert(user.name.clone(), (user.clone(), path.clone()));
            }
        }
    }
    if changed {
        for (name, paths) in &duplicates {
            let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            tracing::warn!(
                user = %name,
                files = %shown.join(", "),
                "IchorUser is defined in several files; it is ignored until only one defines it"
            );
        }
    }
    Scan {
        files,
        users,
        duplicates,
    }
}

/// Reads and parses one file, logging every problem.
fn parse_one(path: &Path, key: FileKey) -> ParsedFile {
    let file = path.display().to_string();
    let bad = |key| ParsedFile {
        key,
        users: Vec::new(),
        objects: 0,
    };
    let bytes = match read_bounded(path) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => {
            tracing::warn!(%file, max = MAX_FILE_BYTES, "manifest file is too large; its users are ignored");
            return bad(key);
        }
        Err(e) => {
            tracing::warn!(%file, error = %e, "cannot read manifest file; its users are ignored");
            return bad(key);
        }
    };
    let manifests = match parse_file(&file, &bytes) {
        Ok(manifests) => manifests,
        Err(errors) => {
            tracing::warn!(%file, errors = %errors, "invalid manifest file; its users are ignored");
            return bad(key);
        }
    };
    let objects = manifests.clusters.len()
        + manifests.machines.len()
        + manifests.users.len()
        + manifests.installations.len()
        + manifests.configmaps.len();
    let mut users = Vec::with_capacity(manifests.users.len());
    for object in &manifests.users {
        let name = object.metadata.name.as_deref().unwrap_or_default();
        match object.metadata.namespace.as_deref() {
            None => {}
            Some(ns) if ns == NAMESPACE => {}
            Some(ns) => {
                tracing::warn!(
                    %file,
                    user = %name,
                    namespace = %ns,
                    "IchorUser metadata.namespace: users live in {NAMESPACE}; this one is ignored"
                );
                continue;
            }
        }
        match stored_user(object) {
            Ok(user) => users.push(user),
            Err(reason) => {
                tracing::warn!(%file, user = %name, %reason, "IchorUser not usable; it is ignored");
            }
        }
    }
    ParsedFile { key, users, objects }
}
