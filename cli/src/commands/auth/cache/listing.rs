//! The listing of the cache directory (`ichor auth status`, `logout`, `kubeconfig`) and the
//! removals `logout` makes, all through the one descriptor the listing opened and checked.

use std::{
    fs::File,
    path::{Path, PathBuf},
};

use rustix::{fs::AtFlags, io::Errno};

use ichor_server::atomic_file::sync_opened_dir;

use super::{CacheEntry, UnusableCache, files, parse};
use crate::commands::auth::error::AuthError;

/// One file found by [`super::CacheDir::listing`].
#[derive(Debug)]
pub struct Listed {
    /// The file.
    pub path: PathBuf,
    /// Its entry, or why it is unusable.
    pub entry: Result<CacheEntry, UnusableCache>,
}

impl Listed {
    /// The cache file stem (the login's key hash) this file belongs to: its own for a cache file,
    /// its target's for a temporary file.
    pub fn stem(&self) -> Option<&str> {
        let name = self.path.file_name()?.to_str()?;
        cache_file_stem(name).or_else(|| leftover_stem(name))
    }
}

/// The cache directory's files, read through its checked descriptor, which the removals use too.
#[derive(Debug)]
pub struct Listing {
    dir: Option<File>,
    path: PathBuf,
    /// The cache files (`<64 hex>.json`), sorted by name.
    pub files: Vec<Listed>,
    /// Temporary files an interrupted write left (`.<64 hex>.json.tmp-…`), sorted by name: they
    /// hold tokens as a cache file does.
    pub leftovers: Vec<Listed>,
}

/// `<64 hex>.json`: the stem of a cache file this module writes and reads back.
pub fn cache_file_stem(name: &str) -> Option<&str> {
    name.strip_suffix(".json").filter(|stem| is_stem(stem))
}

/// `.<64 hex>.json.tmp-…`: the stem of the cache file a temporary file of an atomic write was
/// made for (`ichor_server::atomic_file` names them `.<name>.tmp-<pid>-<random>`).
pub fn leftover_stem(name: &str) -> Option<&str> {
    let (stem, _) = name.strip_prefix('.')?.split_once(".json.tmp-")?;
    is_stem(stem).then_some(stem)
}

fn is_stem(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Listing {
    /// The listing of `path`, opened and checked (`dir`, `None` when absent), read as `you`.
    ///
    /// # Errors
    /// [`AuthError::CacheIo`] when it cannot be listed.
    pub(super) fn read(dir: Option<File>, path: PathBuf, you: u32) -> Result<Self, AuthError> {
        let (files, leftovers) = match &dir {
            Some(handle) => read_files(handle, &path, you)?,
            None => (vec![], vec![]),
        };
        Ok(Self {
            dir,
            path,
            files,
            leftovers,
        })
    }

    /// Deletes `path`, a cache file or a leftover temporary file of this directory (as the listing
    /// names them), through the listed directory's descriptor, then syncs the directory; an absent
    /// file (or directory) is fine.
    ///
    /// # Errors
    /// [`AuthError::CacheIo`] naming the file, also for a path that is not one of those here.
    pub fn remove(&self, path: &Path) -> Result<(), AuthError> {
        let fail = |source| AuthError::CacheIo {
            path: path.to_owned(),
            action: "delete",
            source,
        };
        let name = match path.file_name().and_then(|n| n.to_str()) {
            Some(name)
                if path.parent() == Some(self.path.as_path())
                    && (cache_file_stem(name).is_some() || leftover_stem(name).is_some()) =>
            {
                name
            }
            _ => return Err(fail(std::io::ErrorKind::InvalidInput.into())),
        };
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
            Ok(()) => sync_opened_dir(dir).map_err(fail),
            Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(fail(e.into())),
        }
    }
}

/// The cache files and the leftover temporary files of the checked directory `dir` (at `path`),
/// each read as `you`, sorted by name.
fn read_files(dir: &File, path: &Path, you: u32) -> Result<(Vec<Listed>, Vec<Listed>), AuthError> {
    let entries = rustix::fs::Dir::read_from(dir).map_err(|e| AuthError::CacheIo {
        path: path.to_owned(),
        action: "list",
        source: e.into(),
    })?;
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().ok().map(str::to_owned))
        .filter(|n| cache_file_stem(n).is_some() || leftover_stem(n).is_some())
        .collect();
    names.sort();
    let (mut caches, mut leftovers) = (Vec::new(), Vec::new());
    for name in names {
        let entry = files::read_bounded(dir, &name, you).and_then(|bytes| match bytes {
            Some(b) => parse(&b),
            None => Err(UnusableCache::Vanished),
        });
        let listed = Listed {
            path: path.join(&name),
            entry,
        };
        if cache_file_stem(&name).is_some() {
            caches.push(listed);
        } else {
            leftovers.push(listed);
        }
    }
    Ok((caches, leftovers))
}
