//! File-backed values that follow their files: [`Watched`] reads one or more files, parses them
//! with a function given by the caller and keeps the last value that parsed. It reloads on file
//! events of the files' DIRECTORIES (a Kubernetes Secret volume swaps a `..data` symlink, so the
//! files themselves never change in place) and on a poll (10 s by default), since events can be
//! lost (network file systems, overlay quirks, a directory created after start).
//!
//! A file set that fails to read or parse keeps the previous value serving; the failure is logged
//! with the paths and the error only — never the content, which is key material — and counted
//! ([`Watched::reload_failures`]). The same failure is logged and counted once, not at every
//! poll. Files are bounded in size ([`WatchOptions::max_file_bytes`]).
//!
//! The parse function's error must not contain file content (the `keys.json` parser and
//! [`super::tls::TlsPairError`] never do).

use arc_swap::ArcSwapOption;
use notify::{EventKind, RecursiveMode, Watcher as _};
use sha2::{Digest as _, Sha256};
use std::collections::BTreeSet;
use std::fmt;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// How often the files are checked when no event came (the seed's 10 s).
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(10);
/// How long to wait after a file event before reading, so a burst of events (a symlink swap, a
/// write in several chunks) is read once.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(100);
/// Largest file read (PEM files and `keys.json` are far smaller).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 1024 * 1024;

/// How a [`Watched`] value follows its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchOptions {
    /// Interval of the poll that catches changes whose events were lost.
    pub poll_interval: Duration,
    /// Delay between a file event and the read.
    pub debounce: Duration,
    /// Largest file accepted; a larger one is a load failure.
    pub max_file_bytes: u64,
    /// Whether to subscribe to file events at all (the poll always runs).
    pub file_events: bool,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            poll_interval: DEFAULT_POLL_INTERVAL,
            debounce: DEFAULT_DEBOUNCE,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            file_events: true,
        }
    }
}

/// Why a file set could not be loaded. Never contains file content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// A file could not be read (missing, unreadable, a directory…).
    #[error("cannot read {path}: {kind}; check that the file exists and is readable by the issuer")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        kind: std::io::ErrorKind,
    },
    /// A file is larger than the limit.
    #[error("{path} is larger than {limit} bytes, the most accepted; it is not a PEM or keys.json file")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit.
        limit: u64,
    },
    /// The files were read but the parser refused them.
    #[error("{what} was refused: {reason}")]
    Parse {
        /// What was being loaded (the [`Watched`] name).
        what: String,
        /// The parser's error (content-free by contract).
        reason: String,
    },
}

/// What one check of the files did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckOutcome {
    /// The files are as last seen: nothing was parsed.
    Unchanged,
    /// The files changed and parsed: the new value serves.
    Loaded,
    /// The files changed and could not be loaded: the previous value (if any) keeps serving.
    Failed(LoadError),
}

type ParseFn<T> = dyn Fn(&[Vec<u8>]) -> Result<T, String> + Send + Sync;

/// What the last check saw: the digest of the contents, or the error that prevented reading.
#[derive(Clone, PartialEq, Eq)]
enum Seen {
    Content([u8; 32]),
    Unreadable(LoadError),
}

struct Inner<T> {
    name: String,
    paths: Vec<PathBuf>,
    parse: Box<ParseFn<T>>,
    options: WatchOptions,
    current: ArcSwapOption<T>,
    failures: AtomicU64,
    last_seen: Mutex<Option<Seen>>,
    generation: tokio::sync::watch::Sender<u64>,
    wake: mpsc::Sender<Wake>,
}

impl<T> Drop for Inner<T> {
    fn drop(&mut self) {
        // Stop the watcher thread: it holds only a weak reference and exits on `Stop`.
        let _ = self.wake.send(Wake::Stop);
    }
}

enum Wake {
    FileEvent,
    Stop,
}

/// A value loaded from files and reloaded when they change; cheap to clone (a shared handle).
/// Readers call [`Watched::current`] per use, so a renewal reaches the next use.
pub struct Watched<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Clone for Watched<T> {
    fn clone(&self) -> Self {
        Watched {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T> fmt::Debug for Watched<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watched")
            .field("name", &self.inner.name)
            .field("paths", &self.inner.paths)
            .field("loaded", &self.is_loaded())
            .field("reload_failures", &self.reload_failures())
            .finish()
    }
}

/// The watcher thread could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the thread that watches {name}: {source}")]
pub struct WatchError {
    name: String,
    #[source]
    source: std::io::Error,
}

impl<T: Send + Sync + 'static> Watched<T> {
    /// Watches one file, parsed by `parse` (for example `KeysDocument::parse`). The first load
    /// happens before this returns; a file missing or invalid then leaves the value absent
    /// ([`Watched::is_loaded`] false) until a later check loads it.
    pub fn file<E: fmt::Display>(
        name: impl Into<String>,
        path: impl Into<PathBuf>,
        parse: impl Fn(&[u8]) -> Result<T, E> + Send + Sync + 'static,
        options: WatchOptions,
    ) -> Result<Self, WatchError> {
        Self::files(
            name,
            vec![path.into()],
            // `files` passes one buffer per path: here exactly one.
            move |contents: &[Vec<u8>]| parse(contents.first().map_or(&[][..], Vec::as_slice)),
            options,
        )
    }

    /// Watches a set of files parsed together (a certificate and its key): `parse` receives
    /// their contents in the order of `paths`.
    pub fn files<E: fmt::Display>(
        name: impl Into<String>,
        paths: Vec<PathBuf>,
        parse: impl Fn(&[Vec<u8>]) -> Result<T, E> + Send + Sync + 'static,
        options: WatchOptions,
    ) -> Result<Self, WatchError> {
        let name = name.into();
        let (generation, _) = tokio::sync::watch::channel(0);
        let (tx, rx) = mpsc::channel();
        let inner = Arc::new(Inner {
            name: name.clone(),
            paths,
            parse: Box::new(move |c: &[Vec<u8>]| parse(c).map_err(|e| e.to_string())),
            options,
            current: ArcSwapOption::empty(),
            failures: AtomicU64::new(0),
            last_seen: Mutex::new(None),
            generation,
            wake: tx.clone(),
        });
        let watched = Watched { inner };
        // Subscribe before the first read, so no change between the two is missed.
        let watcher = if options.file_events {
            try_watch(&name, &directories(&watched.inner.paths), &tx, false)
        } else {
            None
        };
        watched.check_now();
        let weak = Arc::downgrade(&watched.inner);
        std::thread::Builder::new()
            .name(format!("watch-{name}"))
            .spawn(move || watch_loop(weak, watcher, tx, rx))
            .map_err(|source| WatchError { name, source })?;
        Ok(watched)
    }
}

impl<T> Watched<T> {
    /// The current value, `None` until the files loaded once.
    pub fn current(&self) -> Option<Arc<T>> {
        self.inner.current.load_full()
    }

    /// True once a value is loaded (it stays loaded: a later failure keeps it).
    pub fn is_loaded(&self) -> bool {
        self.inner.current.load().is_some()
    }

    /// How many loads failed since start (each distinct failure counts once).
    pub fn reload_failures(&self) -> u64 {
        self.inner.failures.load(Ordering::Relaxed)
    }

    /// The name given at construction (used in logs and metric labels).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The watched files.
    pub fn paths(&self) -> &[PathBuf] {
        &self.inner.paths
    }

    /// A receiver of the load generation: it changes each time a new value is loaded, so a
    /// consumer can rebuild what it derives from the value (or a test can wait for a reload).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.generation.subscribe()
    }

    /// Checks the files now (blocking file reads): loads them if they changed since the last
    /// check. The background thread calls this on events and on the poll.
    pub fn check_now(&self) -> CheckOutcome {
        check(&self.inner)
    }
}

/// Reads every file, bounded by `max`.
fn read_all(paths: &[PathBuf], max: u64) -> Result<Vec<Vec<u8>>, LoadError> {
    paths.iter().map(|p| read_bounded(p, max)).collect()
}

fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, LoadError> {
    let read_err = |e: std::io::Error| LoadError::Read {
        path: path.to_path_buf(),
        kind: e.kind(),
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let mut buf = Vec::new();
    file.take(max.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(read_err)?;
    if buf.len() as u64 > max {
        return Err(LoadError::TooLarge {
            path: path.to_path_buf(),
            limit: max,
        });
    }
    Ok(buf)
}

fn digest(contents: &[Vec<u8>]) -> [u8; 32] {
    let mut h = Sha256::new();
    for c in contents {
        h.update((c.len() as u64).to_be_bytes());
        h.update(c);
    }
    h.finalize().into()
}

fn check<T>(inner: &Inner<T>) -> CheckOutcome {
    // One check at a time, so the thread and a caller of `check_now` never interleave.
    let mut last = match inner.last_seen.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    let read = read_all(&inner.paths, inner.options.max_file_bytes);
    let seen = match &read {
        Ok(contents) => Seen::Content(digest(contents)),
        Err(e) => Seen::Unreadable(e.clone()),
    };
    if last.as_ref() == Some(&seen) {
        return CheckOutcome::Unchanged;
    }
    *last = Some(seen);
    let result = read.and_then(|contents| {
        (inner.parse)(&contents).map_err(|reason| LoadError::Parse {
            what: inner.name.clone(),
            reason,
        })
    });
    match result {
        Ok(value) => {
            inner.current.store(Some(Arc::new(value)));
            inner.generation.send_modify(|g| *g = g.wrapping_add(1));
            tracing::info!(watched = %inner.name, paths = ?inner.paths, "loaded");
            CheckOutcome::Loaded
        }
        Err(error) => {
            inner.failures.fetch_add(1, Ordering::Relaxed);
            let previous = if inner.current.load().is_some() {
                "the previous value keeps serving"
            } else {
                "nothing is loaded yet"
            };
            tracing::warn!(watched = %inner.name, paths = ?inner.paths, %error, "load failed; {previous}");
            CheckOutcome::Failed(error)
        }
    }
}

/// The directories to watch: the parents of the files (a Secret volume swaps `..data` there).
fn directories(paths: &[PathBuf]) -> BTreeSet<PathBuf> {
    paths
        .iter()
        .map(|p| match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        })
        .collect()
}

/// Whether an event may mean a content change (opens and reads, our own included, do not).
fn is_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(notify::event::AccessKind::Close(notify::event::AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        EventKind::Any | EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) => true,
        EventKind::Other => false,
    }
}

fn start_watcher(
    dirs: &BTreeSet<PathBuf>,
    tx: &mpsc::Sender<Wake>,
) -> notify::Result<notify::RecommendedWatcher> {
    let tx = tx.clone();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let wake = match res {
            Ok(event) => is_change(&event.kind),
            // An error of the event stream: check anyway, the poll would a bit later.
            Err(_) => true,
        };
        if wake {
            let _ = tx.send(Wake::FileEvent);
        }
    })?;
    for dir in dirs {
        watcher.watch(dir, RecursiveMode::NonRecursive)?;
    }
    Ok(watcher)
}

/// Subscribes to the events of `dirs`; on failure logs once (unless `quiet`) and returns None.
fn try_watch(
    name: &str,
    dirs: &BTreeSet<PathBuf>,
    tx: &mpsc::Sender<Wake>,
    quiet: bool,
) -> Option<notify::RecommendedWatcher> {
    match start_watcher(dirs, tx) {
        Ok(w) => Some(w),
        Err(error) => {
            if !quiet {
                tracing::warn!(watched = %name, %error, "cannot watch the directory; relying on the poll");
            }
            None
        }
    }
}

fn watch_loop<T>(
    weak: Weak<Inner<T>>,
    mut watcher: Option<notify::RecommendedWatcher>,
    tx: mpsc::Sender<Wake>,
    rx: mpsc::Receiver<Wake>,
) {
    let Some((options, dirs, name)) = weak
        .upgrade()
        .map(|i| (i.options, directories(&i.paths), i.name.clone()))
    else {
        return;
    };
    loop {
        // A directory missing at start (created later): retry at each poll, quietly.
        if options.file_events && watcher.is_none() {
            watcher = try_watch(&name, &dirs, &tx, true);
        }
        match rx.recv_timeout(options.poll_interval) {
            Ok(Wake::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
            Ok(Wake::FileEvent) => {
                std::thread::sleep(options.debounce);
                // Coalesce the burst; a Stop in it ends the loop.
                while let Ok(w) = rx.try_recv() {
                    if matches!(w, Wake::Stop) {
                        return;
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        let Some(inner) = weak.upgrade() else {
            return;
        };
        check(&inner);
    }
}
