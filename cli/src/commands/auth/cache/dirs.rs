//! Opening the cache directory (`auth`) and the directory holding it (`~/.ichor`), each once,
//! each checked on its descriptor.
//!
//! `~/.ichor` is opened by path, following a link (dotfiles are often links into a repository),
//! and must be this user's: whoever owns it, or can write into it, could rename `auth` away and
//! put a directory of theirs in its place (a FUSE mount with `allow_other` reports any owner and
//! mode). A `~/.ichor` of this user that group or others can write into (made under umask 002, or
//! by hand) is narrowed through the descriptor (`fchmod`, group and other write dropped), as
//! `auth` is narrowed to 0700; a read ([`Access::Read`]) changes nothing and reports it instead.
//!
//! `auth` is then opened relative to that descriptor (`openat`), never following a link, and
//! must be a directory of this user on the same file system as `~/.ichor` (not a mount point)
//! that neither group nor others can write into.

use std::{
    ffi::OsStr,
    fs::File,
    io,
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
};

use rustix::{
    fs::{AtFlags, FileType, Mode, OFlags},
    io::Errno,
};

use super::files::{self, Unsafe};

/// How much an open of the cache directory may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Change nothing: a directory that is absent is [`DirError::Absent`], a wider one is
    /// [`Unsafe::WritableDirectory`]. The fast path of `ichor auth token`.
    Read,
    /// Create nothing, but narrow a wider directory of this user (listing for status and logout).
    Repair,
    /// Create what is missing (mode 0700) and narrow a wider directory of this user.
    Create,
}

/// Why the cache directory cannot be used.
#[derive(Debug)]
pub enum DirError {
    /// `~/.ichor` or `auth` does not exist (and [`Access::Create`] was not asked for).
    Absent,
    /// `path` (`~/.ichor` or `auth`) is not one this ichor makes or accepts.
    Unsafe {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        problem: Unsafe,
    },
    /// The operating system's answer about `path`.
    Io {
        /// The directory.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The answer.
        source: io::Error,
    },
}

/// The directory holding the cache directory `auth` (`.` for a bare name).
pub fn parent_of(auth: &Path) -> &Path {
    match auth.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// `~/.ichor` was narrowed: group and other write removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Narrowed {
    /// The directory.
    pub path: PathBuf,
    /// Its permission bits before.
    pub from: u32,
    /// Its permission bits now.
    pub to: u32,
}

impl Narrowed {
    /// The notice for stderr (never stdout, which carries the `ExecCredential`).
    pub fn notice(&self) -> String {
        format!(
            "ichor: narrowed {} from {:04o} to {:04o}: other users could replace your login cache",
            self.path.display(),
            self.from,
            self.to
        )
    }
}

/// The cache directory, opened and checked.
#[derive(Debug)]
pub struct Opened {
    /// The cache directory's descriptor.
    pub dir: File,
    /// Whether `~/.ichor` was narrowed on the way, for the caller to say so.
    pub narrowed: Option<Narrowed>,
}

/// Opens the cache directory `auth` as `access` allows and checks it and the directory holding it
/// for the user `you` (see the module's description).
///
/// # Errors
/// See [`DirError`].
pub fn open(auth: &Path, access: Access, you: u32) -> Result<Opened, DirError> {
    let home_path = parent_of(auth);
    let Some(name) = auth.file_name() else {
        return Err(DirError::Io {
            path: auth.to_owned(),
            action: "open the directory",
            source: io::ErrorKind::InvalidInput.into(),
        });
    };
    let (home, narrowed) = open_home(home_path, access, you)?;
    let home_dev = home
        .metadata()
        .map_err(|source| io_error(home_path, "read the directory", source))?
        .dev();
    let dir = open_auth(&home, home_dev, auth, name, access, you)?;
    Ok(Opened { dir, narrowed })
}

/// The error of an open or create of `path` that failed with `errno`, where `owner` is the
/// owner of `path` when it could be found: permission denied on another user's directory is
/// that directory being another user's (made by `sudo ichor`, or this is root with another
/// user's `HOME`), which says what to do; anything else is the operating system's answer. Pure.
pub fn open_failure(
    path: &Path,
    action: &'static str,
    errno: Errno,
    owner: Option<u32>,
    you: u32,
) -> DirError {
    match owner {
        Some(owner) if matches!(errno, Errno::ACCESS | Errno::PERM) && owner != you => {
            unsafe_at(path, Unsafe::OtherOwner { owner, you })
        }
        _ => io_error(path, action, errno.into()),
    }
}

/// The owner of `~/.ichor` at `path` (following a link, as it is opened), when permission to
/// open it was denied.
fn home_owner(errno: Errno, path: &Path) -> Option<u32> {
    matches!(errno, Errno::ACCESS | Errno::PERM)
        .then(|| std::fs::metadata(path).ok().map(|m| m.uid()))
        .flatten()
}

fn io_error(path: &Path, action: &'static str, source: io::Error) -> DirError {
    DirError::Io {
        path: path.to_owned(),
        action,
        source,
    }
}

fn unsafe_at(path: &Path, problem: Unsafe) -> DirError {
    DirError::Unsafe {
        path: path.to_owned(),
        problem,
    }
}

/// Opens `~/.ichor` (following a link), creating it 0700 when `access` allows, and checks it is
/// `you`'s and that neither group nor others can write into it, narrowing it when allowed.
fn open_home(path: &Path, access: Access, you: u32) -> Result<(File, Option<Narrowed>), DirError> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let dir = match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(Errno::NOENT) if access == Access::Create => {
            use std::os::unix::fs::DirBuilderExt as _;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)
                .map_err(|e| io_error(path, "create the directory", e))?;
            File::from(
                rustix::fs::open(path, flags, Mode::empty())
                    .map_err(|e| open_failure(path, "open the directory", e, home_owner(e, path), you))?,
            )
        }
        Err(Errno::NOENT) => return Err(DirError::Absent),
        Err(e) => {
            return Err(open_failure(
                path,
                "open the directory",
                e,
                home_owner(e, path),
                you,
            ));
        }
    };
    let meta = dir
        .metadata()
        .map_err(|e| io_error(path, "read the directory", e))?;
    if meta.uid() != you {
        return Err(unsafe_at(
            path,
            Unsafe::OtherOwner {
                owner: meta.uid(),
                you,
            },
        ));
    }
    let mode = meta.mode() & 0o7777;
    let mut narrowed = None;
    if mode & 0o022 != 0 && access != Access::Read {
        rustix::fs::fchmod(&dir, Mode::from_raw_mode(mode & !0o022))
            .map_err(|e| io_error(path, "remove group and other write from the directory", e.into()))?;
        narrowed = Some(Narrowed {
            path: path.to_owned(),
            from: mode,
            to: mode & !0o022,
        });
    }
    let meta = dir
        .metadata()
        .map_err(|e| io_error(path, "read the directory", e))?;
    files::private_dir(&meta, you).map_err(|problem| unsafe_at(path, problem))?;
    Ok((dir, narrowed))
}

/// Opens `auth` relative to the checked `home` without following a link, creating it 0700 when
/// `access` allows, and checks it: `you`'s, on `home_dev`, then (narrowed to 0700 when allowed)
/// not writable by group or others. The owner and device are checked before any `fchmod`.
fn open_auth(
    home: &File,
    home_dev: u64,
    path: &Path,
    name: &OsStr,
    access: Access,
    you: u32,
) -> Result<File, DirError> {
    if access == Access::Create {
        match rustix::fs::mkdirat(home, name, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(io_error(path, "create the directory", e.into())),
        }
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let dir = match rustix::fs::openat(home, name, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(Errno::NOENT) if access != Access::Create => return Err(DirError::Absent),
        Err(e) => {
            let stat = rustix::fs::statat(home, name, AtFlags::SYMLINK_NOFOLLOW).ok();
            return Err(match stat.map(|st| FileType::from_raw_mode(st.st_mode)) {
                Some(FileType::Symlink) => unsafe_at(path, Unsafe::Link),
                Some(t) if t != FileType::Directory => unsafe_at(path, Unsafe::NotDirectory),
                _ => open_failure(path, "open the directory", e, stat.map(|st| st.st_uid), you),
            });
        }
    };
    let meta = dir
        .metadata()
        .map_err(|e| io_error(path, "read the directory", e))?;
    if meta.uid() != you {
        return Err(unsafe_at(
            path,
            Unsafe::OtherOwner {
                owner: meta.uid(),
                you,
            },
        ));
    }
    files::same_device(&meta, home_dev).map_err(|problem| unsafe_at(path, problem))?;
    if meta.mode() & 0o777 != 0o700 && access != Access::Read {
        rustix::fs::fchmod(&dir, Mode::from_raw_mode(0o700))
            .map_err(|e| io_error(path, "set the directory to mode 0700", e.into()))?;
    }
    let meta = dir
        .metadata()
        .map_err(|e| io_error(path, "read the directory", e))?;
    files::private_dir(&meta, you).map_err(|problem| unsafe_at(path, problem))?;
    Ok(dir)
}
