//! The local store of the embedded mode (`ichor dev`): users are the `IchorUser` YAML files of a
//! manifest directory, credentials live in one file of a private state directory.
//!
//! # Layout
//! - `<users dir>/**/*.yaml`: the GitOps tree (see [`users`] for what is read and refused). The
//!   write methods of [`LocalStore`] keep one user per file, `<users dir>/<name>.yaml`.
//! - `<state dir>/credentials.json`: `{"generation": n, "entries": {"<user>": <entry>}}`, mode
//!   0600 in a 0700 directory; `n` counts the file's rewrites. A user's [`Version`] is the digest
//!   of that user's entry alone (or `absent`). See [`credentials_file`].
//! - `<state dir>/credentials.json.lock`, `<state dir>/users.lock`: the inter-process locks.
//!
//! # Guarantees
//! - Several processes may share one store: a credentials write is a locked
//!   read–compare–write of the user's entry, so no rotation is ever lost (a changed entry is a
//!   [`StoreError::Conflict`] and [`super::modify_credentials`] retries from a fresh read), while
//!   writes for different users never conflict. Concurrent writes are committed in batches, one
//!   durable file replacement per batch. One user's changes take turns in this process
//!   ([`super::UserQueue`]), so they conflict only with another process's.
//! - User reads are served from a snapshot at most the configured TTL old (default
//!   [`DEFAULT_USER_TTL`], never more than [`USER_CACHE_TTL`]); a refresh re-parses only the files
//!   whose size, modification time or inode changed. A bad file is logged and skipped, never fatal.
//! - No hash or entry content appears in a log line or an error.

pub mod credentials_file;
mod fsutil;
pub mod users;

use std::{
    io,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use async_trait::async_trait;
use ichor_renderers::{
    auth::{UserName, credentials::CredentialsEntry},
    crd::{IchorUser, NAMESPACE},
    manifest::parse_file,
};
use ichor_server::atomic_file::{create_atomic, write_atomic};
use tokio::time::Instant;

use self::{
    credentials_file::{CredentialsFile, Edit, Entry},
    fsutil::{ensure_private_dir, lock_exclusive, remove_durably},
    users::{Location, Scan},
};
use super::{
    StoreError, StoredUser, USER_CACHE_TTL, UserStore, Version,
    convert::{check_user_name, stored_user},
    redact,
};

/// How old a user read of the local store may be by default: short, since a file edit by hand
/// should show quickly and a re-scan of an unchanged tree costs only `stat` calls.
pub const DEFAULT_USER_TTL: Duration = Duration::from_secs(2);

/// The name of the lock file serializing the user-file writes of several processes.
pub const USERS_LOCK_FILE_NAME: &str = "users.lock";

/// The embedded-mode [`UserStore`]: a directory of `IchorUser` files and one credentials file.
#[derive(Debug)]
pub struct LocalStore {
    users_dir: PathBuf,
    state_dir: PathBuf,
    credentials: CredentialsFile,
    user_ttl: Duration,
    snapshot: Mutex<Snapshot>,
    /// Held while the directory is re-read: callers that find the snapshot stale together wait
    /// for one re-read instead of each re-reading every file.
    rescanning: tokio::sync::Mutex<()>,
    /// Directory reads so far (tests count them).
    rescans: std::sync::atomic::AtomicU64,
    user_queue: super::UserQueue,
}

/// The last scan of the users directory and until when it may be served.
#[derive(Debug, Default)]
struct Snapshot {
    fresh_until: Option<Instant>,
    /// When the directory read of `scan` started.
    started: Option<Instant>,
    /// When the snapshot was last marked stale: a scan started before it is stale on arrival.
    invalidated: Option<Instant>,
    scan: Arc<Scan>,
}

impl Snapshot {
    /// The scan, if it may be served to a caller that asked at `asked`: still fresh, or read
    /// from a directory listing started after the caller asked (as good as its own).
    fn serve(&self, asked: Instant) -> Option<Arc<Scan>> {
        let fresh = self.fresh_until.is_some_and(|until| Instant::now() < until);
        let after = self.started.is_some_and(|started| {
            started >= asked && self.invalidated.is_none_or(|invalidated| started >= invalidated)
        });
        (fresh || after).then(|| Arc::clone(&self.scan))
    }
}

/// A user-file write (create, update, delete) was refused or failed. Each message names the user
/// and the file or field concerned.
#[derive(Debug, thiserror::Error)]
pub enum UserFileError {
    /// The object is not a valid user (its name or roles).
    #[error("IchorUser {name:?}: {reason}")]
    Invalid {
        /// The object's name, as given.
        name: String,
        /// What is wrong, naming the field.
        reason: String,
    },
    /// Creating a user that exists already.
    #[error("IchorUser {name:?} exists already (in {file}); update it instead")]
    AlreadyExists {
        /// The user.
        name: String,
        /// The file that defines it (or that occupies its file name).
        file: String,
    },
    /// Updating or deleting a user that does not exist.
    #[error("IchorUser {name:?} does not exist in {dir}")]
    NotFound {
        /// The user.
        name: String,
        /// The users directory.
        dir: String,
    },
    /// The user is defined in a file with other objects, which this store does not rewrite.
    #[error("IchorUser {name:?} is defined in {file} together with other objects; edit that file by hand")]
    SharedFile {
        /// The user.
        name: String,
        /// The file.
        file: String,
    },
    /// The user is defined in several files (and ignored until only one defines it).
    #[error("IchorUser {name:?} is defined in several files ({files}); remove all but one by hand")]
    Duplicate {
        /// The user.
        name: String,
        /// The files, comma-separated.
        files: String,
    },
    /// The file system refused.
    #[error("cannot write {file}: {message}")]
    Io {
        /// The file or directory.
        file: String,
        /// The operating system's reason.
        message: String,
    },
}

impl LocalStore {
    /// A store reading users from `users_dir` and keeping credentials in `state_dir` (created
    /// mode 0700 on the first write). Neither directory needs to exist yet.
    pub fn new(users_dir: impl Into<PathBuf>, state_dir: impl Into<PathBuf>) -> Self {
        let state_dir = state_dir.into();
        Self {
            users_dir: users_dir.into(),
            credentials: CredentialsFile::new(&state_dir),
            state_dir,
            user_ttl: DEFAULT_USER_TTL,
            snapshot: Mutex::new(Snapshot::default()),
            rescanning: tokio::sync::Mutex::new(()),
            rescans: std::sync::atomic::AtomicU64::new(0),
            user_queue: super::UserQueue::default(),
        }
    }

    /// The same store with at most `max_waiting` changes of one user waiting behind the one in
    /// progress (see [`super::UserQueue::new`]; the default is
    /// [`super::user_queue::MAX_WAITING_PER_USER`]).
    #[must_use]
    pub fn with_max_waiting_per_user(mut self, max_waiting: usize) -> Self {
        self.user_queue = super::UserQueue::new(max_waiting);
        self
    }

    /// The same store with user reads cached for `ttl` (capped at [`USER_CACHE_TTL`]; zero
    /// re-scans on every read).
    #[must_use]
    pub fn with_user_ttl(mut self, ttl: Duration) -> Self {
        self.user_ttl = ttl.min(USER_CACHE_TTL);
        self
    }

    /// The directory users are read from.
    pub fn users_dir(&self) -> &Path {
        &self.users_dir
    }

    /// The credentials file.
    pub fn credentials_path(&self) -> &Path {
        self.credentials.path()
    }

    /// The current scan, re-reading the directory when the snapshot is stale. Callers finding
    /// it stale together share one re-read (a directory of many users is not read once per
    /// concurrent request).
    async fn scan(&self) -> Result<Arc<Scan>, StoreError> {
        let asked = Instant::now();
        if let Some(scan) = self.snapshot().serve(asked) {
            return Ok(scan);
        }
        let _turn = self.rescanning.lock().await;
        let previous = {
            let snapshot = self.snapshot();
            if let Some(scan) = snapshot.serve(asked) {
                return Ok(scan);
            }
            Arc::clone(&snapshot.scan)
        };
        let started = Instant::now();
        self.rescans.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = self.users_dir.clone();
        let scan = Arc::new(blocking(move || previous.rescan(&dir)).await??);
        let mut snapshot = self.snapshot();
        snapshot.scan = Arc::clone(&scan);
        snapshot.started = Some(started);
        // Marked stale while the directory was read: the next caller reads it again.
        let stale = snapshot
            .invalidated
            .is_some_and(|invalidated| invalidated > started);
        snapshot.fresh_until = if stale {
            None
        } else {
            Instant::now().checked_add(self.user_ttl)
        };
        Ok(scan)
    }

    fn snapshot(&self) -> std::sync::MutexGuard<'_, Snapshot> {
        self.snapshot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Creates `<users dir>/<name>.yaml` for `user` (its name and spec; status is not written),
    /// refusing when the user exists anywhere in the tree or the file name is taken. Atomic: the
    /// file appears complete or not at all. Returns the file written.
    ///
    /// # Errors
    /// [`UserFileError::Invalid`], [`UserFileError::AlreadyExists`], [`UserFileError::Duplicate`],
    /// [`UserFileError::Io`].
    pub async fn create_user(&self, user: &IchorUser) -> Result<PathBuf, UserFileError> {
        let (name, bytes) = render(user)?;
        let path = self.users_dir.join(format!("{name}.yaml"));
        let result = self
            .with_users_lock(move |dir, scan| {
                match scan.locate(&name) {
                    Location::Absent => {}
                    Location::File(file, _) => {
                        return Err(UserFileError::AlreadyExists {
                            name,
                            file: file.display().to_string(),
                        });
                    }
                    Location::Duplicate(files) => return Err(duplicate(&name, files)),
                }
                std::fs::create_dir_all(dir).map_err(|e| io_error(dir, &e))?;
                match create_atomic(&path, &bytes) {
                    Ok(()) => Ok(path),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(UserFileError::AlreadyExists {
                        name,
                        file: path.display().to_string(),
                    }),
                    Err(e) => Err(io_error(&path, &e)),
                }
            })
            .await;
        self.invalidate_all();
        result
    }

    /// Replaces the file defining `user` by its new name and spec, atomically. The file must hold
    /// that user alone (as [`LocalStore::create_user`] writes it). Returns the file written.
    ///
    /// # Errors
    /// [`UserFileError::Invalid`], [`UserFileError::NotFound`], [`UserFileError::SharedFile`],
    /// [`UserFileError::Duplicate`], [`UserFileError::Io`].
    pub async fn update_user(&self, user: &IchorUser) -> Result<PathBuf, UserFileError> {
        let (name, bytes) = render(user)?;
        let result = self
            .with_users_lock(move |dir, scan| {
                let path = own_file(dir, scan, &name)?;
                write_atomic(&path, &bytes).map_err(|e| io_error(&path, &e))?;
                Ok(path)
            })
            .await;
        self.invalidate_all();
        result
    }

    /// Removes the file defining user `name`, which must hold that user alone. Returns the file
    /// removed. The user's credentials entry is left to the caller (or the controller's garbage
    /// collection).
    ///
    /// # Errors
    /// [`UserFileError::Invalid`] for a name that is not a DNS label, [`UserFileError::NotFound`],
    /// [`UserFileError::SharedFile`], [`UserFileError::Duplicate`], [`UserFileError::Io`].
    pub async fn delete_user(&self, name: &str) -> Result<PathBuf, UserFileError> {
        let name = UserName::parse(name)
            .map_err(|e| UserFileError::Invalid {
                name: name.chars().take(64).collect(),
                reason: e.to_string(),
            })?
            .as_str()
            .to_owned();
        let result = self
            .with_users_lock(move |dir, scan| {
                let path = own_file(dir, scan, &name)?;
                let parent = path.parent().unwrap_or(dir).to_owned();
                remove_durably(&parent, &path).map_err(|e| io_error(&path, &e))?;
                Ok(path)
            })
            .await;
        self.invalidate_all();
        result
    }

    /// Runs `f` with the users lock held and a scan taken under it (so what `f` checks cannot
    /// change before it writes, as far as other users of this store go).
    async fn with_users_lock<T, F>(&self, f: F) -> Result<T, UserFileError>
    where
        T: Send + 'static,
        F: FnOnce(&Path, &Scan) -> Result<T, UserFileError> + Send + 'static,
    {
        let previous = Arc::clone(&self.snapshot.lock().unwrap_or_else(PoisonError::into_inner).scan);
        let dir = self.users_dir.clone();
        let state_dir = self.state_dir.clone();
        blocking(move || {
            ensure_private_dir(&state_dir).map_err(|e| io_error(&state_dir, &e))?;
            let lock_path = state_dir.join(USERS_LOCK_FILE_NAME);
            let _lock = lock_exclusive(&lock_path).map_err(|e| io_error(&lock_path, &e))?;
            let scan = previous.rescan(&dir).map_err(|e| UserFileError::Io {
                file: dir.display().to_string(),
                message: e.to_string(),
            })?;
            f(&dir, &scan)
        })
        .await
        .map_err(|e| UserFileError::Io {
            file: self.users_dir.display().to_string(),
            message: e.to_string(),
        })?
    }

    /// Marks the user snapshot stale (the parsed files are kept for reuse).
    fn invalidate_all(&self) {
        let mut snapshot = self.snapshot();
        snapshot.fresh_until = None;
        snapshot.invalidated = Some(Instant::now());
    }
}

#[async_trait]
impl UserStore for LocalStore {
    async fn get_user(&self, name: &str) -> Result<Option<StoredUser>, StoreError> {
        Ok(self.scan().await?.user(name).cloned())
    }

    async fn list_users(&self) -> Result<Vec<StoredUser>, StoreError> {
        Ok(self.scan().await?.all_users())
    }

    async fn read_credentials(&self, name: &str) -> Result<(Option<CredentialsEntry>, Version), StoreError> {
        // The common case (the file unchanged since it was last parsed) needs no blocking thread.
        let doc = match self.credentials.read_cached() {
            Some(doc) => doc,
            None => {
                let file = self.credentials.clone();
                let user = name.to_owned();
                blocking(move || file.read(&user)).await??
            }
        };
        let Some(stored) = doc.entries.get(name) else {
            return Ok((None, Version(doc.version(name).to_owned())));
        };
        let entry = stored.parsed(name).map_err(|e| redact::corrupt(name, &e))?;
        Ok((Some(entry), Version(stored.version.clone())))
    }

    async fn write_credentials(
        &self,
        name: &str,
        expected: &Version,
        entry: Option<&CredentialsEntry>,
    ) -> Result<Version, StoreError> {
        check_user_name(name)?;
        let edit = match entry {
            Some(entry) => {
                let json = entry.to_json(name).map_err(|e| redact::corrupt(name, &e))?;
                Edit::Put(Arc::new(Entry::of_written(json, entry.clone())))
            }
            None => Edit::Remove,
        };
        Ok(Version(
            self.credentials.write_async(name, &expected.0, edit).await?,
        ))
    }

    fn invalidate(&self, _name: &str) {
        self.invalidate_all();
    }

    fn user_queue(&self) -> Option<&super::UserQueue> {
        Some(&self.user_queue)
    }
}

/// Runs blocking file work off the async threads.
async fn blocking<T, F>(f: F) -> Result<T, StoreError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StoreError::Unavailable(format!("a local store task failed: {e}")))
}

/// The file of a user defined alone in one file.
fn own_file(dir: &Path, scan: &Scan, name: &str) -> Result<PathBuf, UserFileError> {
    match scan.locate(name) {
        Location::Absent => Err(UserFileError::NotFound {
            name: name.to_owned(),
            dir: dir.display().to_string(),
        }),
        Location::File(file, 1) => Ok(file.to_owned()),
        Location::File(file, _) => Err(UserFileError::SharedFile {
            name: name.to_owned(),
            file: file.display().to_string(),
        }),
        Location::Duplicate(files) => Err(duplicate(name, files)),
    }
}

fn duplicate(name: &str, files: &[PathBuf]) -> UserFileError {
    let files: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    UserFileError::Duplicate {
        name: name.to_owned(),
        files: files.join(", "),
    }
}

fn io_error(path: &Path, e: &io::Error) -> UserFileError {
    UserFileError::Io {
        file: path.display().to_string(),
        message: e.to_string(),
    }
}

/// The user's name and the YAML of its file: `apiVersion`, `kind`, `metadata` (name and the
/// `ichor-system` namespace) and `spec`. Checked to read back as that one user.
fn render(user: &IchorUser) -> Result<(String, Vec<u8>), UserFileError> {
    let given = user.metadata.name.clone().unwrap_or_default();
    let invalid = |reason: String| UserFileError::Invalid {
        name: given.chars().take(64).collect(),
        reason,
    };
    let stored = stored_user(user).map_err(|e| invalid(e.to_string()))?;
    let mut object = IchorUser::new(&stored.name, user.spec.clone());
    object.metadata.namespace = Some(NAMESPACE.to_owned());
    let yaml =
        serde_yaml::to_string(&object).map_err(|e| invalid(format!("cannot be written as YAML: {e}")))?;
    let file = format!("{}.yaml", stored.name);
    let read_back = parse_file(&file, yaml.as_bytes()).map_err(|e| invalid(e.to_string()))?;
    if read_back.users.len() != 1 || read_back.users.first().map(|u| &u.spec) != Some(&user.spec) {
        return Err(invalid("does not read back as the same user".to_owned()));
    }
    Ok((stored.name, yaml.into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn callers_finding_the_users_stale_together_share_one_directory_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let users = dir.path().join("users");
        std::fs::create_dir_all(&users).expect("mkdir");
        for i in 0..50 {
            std::fs::write(
                users.join(format!("u{i}.yaml")),
                format!(
                    "apiVersion: ichor.maesh.dev/v1alpha1\nkind: IchorUser\nmetadata:\n  name: u{i}\n  namespace: ichor-system\nspec:\n  roles: [viewer]\n"
                ),
            )
            .expect("write");
        }
        let store = Arc::new(LocalStore::new(&users, dir.path().join("state")));
        let readers: Vec<_> = (0..64)
            .map(|i| {
                let store = Arc::clone(&store);
                tokio::spawn(async move { store.get_user(&format!("u{}", i % 50)).await })
            })
            .collect();
        for r in readers {
            assert!(r.await.expect("join").expect("read").is_some());
        }
        assert_eq!(store.rescans.load(Ordering::Relaxed), 1);
        // Fresh: served without reading; stale after an invalidation: read again, once.
        assert!(store.get_user("u1").await.expect("read").is_some());
        assert_eq!(store.rescans.load(Ordering::Relaxed), 1);
        store.invalidate("u1");
        let again: Vec<_> = (0..8)
            .map(|_| {
                let store = Arc::clone(&store);
                tokio::spawn(async move { store.list_users().await.map(|u| u.len()) })
            })
            .collect();
        for r in again {
            assert_eq!(r.await.expect("join").expect("list"), 50);
        }
        assert_eq!(store.rescans.load(Ordering::Relaxed), 2);
    }

    #[tokio::test]
    async fn with_no_cache_every_read_sees_a_directory_read_that_started_after_it_asked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = LocalStore::new(dir.path(), dir.path().join("state")).with_user_ttl(Duration::ZERO);
        assert!(store.get_user("late").await.expect("read").is_none());
        std::fs::write(
            dir.path().join("late.yaml"),
            "apiVersion: ichor.maesh.dev/v1alpha1\nkind: IchorUser\nmetadata:\n  name: late\n  namespace: ichor-system\nspec:\n  roles: [viewer]\n",
        )
        .expect("write");
        assert!(store.get_user("late").await.expect("read").is_some());
        assert_eq!(store.rescans.load(Ordering::Relaxed), 2);
    }
}
