//! The one way the binaries write a file they keep (credentials, user manifests, the CLI's token
//! cache, kubeconfigs, operation records, `ichor dev`'s Secret files): atomically and durably.
//!
//! - The content goes to a new file in the same directory, named `.<name>.tmp-<pid>-<random>`
//!   (hidden, so manifest scans skip it; random, so a name someone else planted in a shared
//!   directory is never guessed, and `create_new`, so a planted link is never followed), mode
//!   0600, written and `fsync`ed.
//! - It then replaces the target by `rename` (a reader sees the old file or the new one, never a
//!   half-written one), or is hard-linked to it when the target must not exist yet.
//! - Last, the directory is `fsync`ed, so the rename survives a crash. A file system that cannot
//!   sync a directory at all (it answers `EINVAL` or "unsupported", as some network and FUSE file
//!   systems do) is taken as having nothing to sync: the rename has happened, and refusing every
//!   write there (the kubectl exec plugin's token cache among them) would help no one.
//!
//! The temporary file is removed when a step fails.
//!
//! [`write_atomic_in`] does the same inside a directory the caller has already opened and
//! checked: every step (create, rename, the directory's `fsync`) goes through that descriptor, so
//! a directory swapped for a link or a FIFO after the check changes nothing about where the bytes
//! go or whether the write finishes. It tells a failed write from a rename whose directory sync
//! failed ([`WriteInError`]): the file is then in place, and removing it would lose it for sure.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags};

/// The directory holding `path` (`.` for a bare file name).
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// A fresh temporary file name for the file `name`.
fn temp_name(name: &str) -> io::Result<String> {
    let mut nonce = [0u8; 8];
    getrandom::fill(&mut nonce).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(format!(
        ".{name}.tmp-{}-{:016x}",
        std::process::id(),
        u64::from_le_bytes(nonce)
    ))
}

/// A fresh temporary path beside `path`.
fn temp_path(path: &Path) -> io::Result<PathBuf> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(parent(path).join(temp_name(&name)?))
}

/// Writes `bytes` to the new file `temp` (mode 0600, never an existing one) and syncs it.
fn write_synced(temp: &Path, bytes: &[u8]) -> io::Result<File> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(temp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    Ok(file)
}

/// Replaces `path` by `bytes` atomically and durably: a new 0600 file in the same directory,
/// written and synced, renamed over `path`, then the directory synced.
///
/// # Errors
/// The failing step's I/O error.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_before_dir_sync(path, bytes)?;
    sync_dir(parent(path))
}

/// The first half of [`write_atomic`]: `bytes` written to a new 0600 file, synced and renamed
/// over `path`, which readers now see. Returns the new file still open (write-only), so the
/// caller can stamp it and keep its inode from being reused while it holds it. The rename is
/// durable only once [`sync_dir`] of the directory returns, which the caller must call before it
/// reports the write done.
///
/// # Errors
/// The failing step's I/O error.
pub fn replace_before_dir_sync(path: &Path, bytes: &[u8]) -> io::Result<File> {
    let temp = temp_path(path)?;
    let result = write_synced(&temp, bytes).and_then(|file| {
        fs::rename(&temp, path)?;
        Ok(file)
    });
    if result.is_err() {
        // The temporary file may already be gone (renamed).
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Creates `path` with `bytes` atomically, failing with [`io::ErrorKind::AlreadyExists`] when it
/// exists: the content is written and synced under a temporary name, hard-linked to `path`
/// (which never replaces), and the directory synced.
///
/// # Errors
/// The failing step's I/O error.
pub fn create_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let temp = temp_path(path)?;
    let result = write_synced(&temp, bytes).and_then(|_| fs::hard_link(&temp, path));
    let _ = fs::remove_file(&temp);
    result?;
    sync_dir(parent(path))
}

/// Why [`write_atomic_in`] did not finish.
#[derive(Debug, thiserror::Error)]
pub enum WriteInError {
    /// Nothing was replaced: the file is as it was, and the temporary file is removed.
    #[error(transparent)]
    NotWritten(io::Error),
    /// The new file is in place (readers see it), but the directory could not be synced, so the
    /// rename may not survive a crash. The caller keeps the file: removing it would lose what was
    /// just written, for a risk that only a crash makes real.
    #[error(
        "the file is in place, but its directory could not be synced, so it may not survive a crash: {0}"
    )]
    NotSynced(io::Error),
}

/// Replaces the file `name` of the opened directory `dir` by `bytes`, atomically and durably,
/// every step through `dir`'s descriptor: a new 0600 file created there (never through a link,
/// never an existing one), written and synced, renamed over `name` within `dir`, then `dir`
/// synced. `name` is a plain file name (no `/`).
///
/// # Errors
/// [`WriteInError::NotWritten`] when a step before the rename fails (the temporary file is
/// removed then); [`WriteInError::NotSynced`] when only the directory's sync fails.
pub fn write_atomic_in(dir: &File, name: &str, bytes: &[u8]) -> Result<(), WriteInError> {
    replace_in_before_dir_sync(dir, name, bytes).map_err(WriteInError::NotWritten)?;
    sync_opened_dir(dir).map_err(WriteInError::NotSynced)
}

/// The first half of [`write_atomic_in`]: `bytes` written to a new 0600 file in `dir`, synced and
/// renamed over `name`, which readers now see. Durable only once [`sync_opened_dir`] of `dir`
/// returns.
///
/// # Errors
/// The failing step's I/O error; the temporary file is removed then.
pub fn replace_in_before_dir_sync(dir: &File, name: &str, bytes: &[u8]) -> io::Result<()> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a plain file name"),
        ));
    }
    let temp = temp_name(name)?;
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let result = (|| -> io::Result<()> {
        let mut file = File::from(rustix::fs::openat(
            dir,
            temp.as_str(),
            flags,
            Mode::from_raw_mode(0o600),
        )?);
        file.write_all(bytes)?;
        file.sync_all()?;
        rustix::fs::renameat(dir, temp.as_str(), dir, name)?;
        Ok(())
    })();
    if result.is_err() {
        // The temporary file may already be gone (renamed).
        let _ = rustix::fs::unlinkat(dir, temp.as_str(), AtFlags::empty());
    }
    result
}

/// Syncs the directory `dir`, making the renames, links and removals in it durable.
///
/// # Errors
/// The open or sync failure, except a file system's answer that it cannot sync directories.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    sync_opened_dir(&File::open(dir)?)
}

/// Syncs an opened directory; see [`sync_dir`].
///
/// # Errors
/// The sync failure, except a file system's answer that it cannot sync directories.
pub fn sync_opened_dir(dir: &File) -> io::Result<()> {
    match dir.sync_all() {
        Err(e) if cannot_sync_directories(&e) => Ok(()),
        other => other,
    }
}

/// Whether `e` is a file system saying it has no directory sync (`EINVAL`, `ENOTSUP`), not a
/// failure to make something durable.
fn cannot_sync_directories(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Unsupported || e.raw_os_error() == Some(EINVAL)
}

/// `EINVAL`, the same number on Linux, macOS and the BSDs.
const EINVAL: i32 = 22;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::fs::{PermissionsExt as _, symlink};

    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn replaces_a_file_private_to_its_writer_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        fs::write(&path, "old").unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(names(dir.path()), ["a.json"]);
    }

    #[test]
    fn replaces_a_planted_link_instead_of_writing_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "mine").unwrap();
        let path = dir.path().join("record.yaml");
        symlink(&victim, &path).unwrap();
        write_atomic(&path, b"record").unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"mine");
        assert!(!fs::symlink_metadata(&path).unwrap().file_type().is_symlink());
        assert_eq!(fs::read(&path).unwrap(), b"record");
    }

    #[test]
    fn creates_only_what_does_not_exist() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("u.yaml");
        create_atomic(&path, b"one").unwrap();
        let again = create_atomic(&path, b"two").unwrap_err();
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&path).unwrap(), b"one");
        assert_eq!(names(dir.path()), ["u.yaml"]);
    }

    #[test]
    fn a_failed_write_leaves_the_target_and_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("taken");
        fs::create_dir(&path).unwrap();
        fs::write(path.join("inside"), "x").unwrap();
        assert!(write_atomic(&path, b"new").is_err());
        assert_eq!(names(dir.path()), ["taken"]);
    }

    #[test]
    fn a_write_in_an_opened_directory_stays_there_when_its_path_becomes_a_link() {
        let root = tempfile::tempdir().unwrap();
        let checked = root.path().join("auth");
        let elsewhere = root.path().join("elsewhere");
        fs::create_dir(&checked).unwrap();
        fs::create_dir(&elsewhere).unwrap();
        let dir = File::open(&checked).unwrap();
        fs::rename(&checked, root.path().join("moved")).unwrap();
        symlink(&elsewhere, &checked).unwrap();
        write_atomic_in(&dir, "t.json", b"token").unwrap();
        assert_eq!(names(&elsewhere), Vec::<String>::new());
        let moved = root.path().join("moved");
        assert_eq!(names(&moved), ["t.json"]);
        assert_eq!(fs::read(moved.join("t.json")).unwrap(), b"token");
        assert_eq!(
            fs::metadata(moved.join("t.json")).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn a_write_in_an_opened_directory_takes_only_a_plain_name() {
        let root = tempfile::tempdir().unwrap();
        let dir = File::open(root.path()).unwrap();
        for name in ["", ".", "..", "../x", "a/b"] {
            let Err(WriteInError::NotWritten(e)) = write_atomic_in(&dir, name, b"x") else {
                panic!("{name:?} is written");
            };
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{name:?}");
        }
        assert_eq!(names(root.path()), Vec::<String>::new());
    }

    /// A directory whose sync fails after the rename (a descriptor opened `O_PATH` cannot be
    /// synced, but names files as any other): the file is in place and the error says only the
    /// sync failed, so the caller keeps what it wrote.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_write_whose_directory_sync_fails_reports_the_file_in_place() {
        let root = tempfile::tempdir().unwrap();
        let path_only = File::from(
            rustix::fs::open(
                root.path(),
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .unwrap(),
        );
        let err = write_atomic_in(&path_only, "t.json", b"token").unwrap_err();
        assert!(matches!(err, WriteInError::NotSynced(_)), "{err:?}");
        assert!(err.to_string().contains("may not survive a crash"), "{err}");
        assert_eq!(names(root.path()), ["t.json"]);
        assert_eq!(fs::read(root.path().join("t.json")).unwrap(), b"token");
    }

    #[test]
    fn a_bare_file_name_is_in_the_current_directory() {
        assert_eq!(parent(Path::new("kubeconfig")), Path::new("."));
        assert_eq!(parent(Path::new("/a/b")), Path::new("/a"));
    }
}
