//! `Watched` values: keys.json loaded, reloaded on change (events and poll), and a broken file
//! keeping the previous value, counted once and logged without its content.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::server_common::*;
use ichor_renderers::trust::KeysDocument;
use ichor_server::reload::{CheckOutcome, LoadError, WatchOptions, Watched};
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Events only: the poll is an hour, so a reload within seconds proves the file event path.
fn events_only() -> WatchOptions {
    WatchOptions {
        poll_interval: Duration::from_secs(3600),
        debounce: Duration::from_millis(20),
        ..WatchOptions::default()
    }
}

/// Neither events nor a poll within the test: only `check_now` reloads, so outcomes are exact.
fn manual() -> WatchOptions {
    WatchOptions {
        poll_interval: Duration::from_secs(3600),
        file_events: false,
        ..WatchOptions::default()
    }
}

/// Poll only: no file events, a 50 ms poll.
fn poll_only() -> WatchOptions {
    WatchOptions {
        poll_interval: Duration::from_millis(50),
        file_events: false,
        ..WatchOptions::default()
    }
}

fn watch_keys(path: &std::path::Path, options: WatchOptions) -> Watched<KeysDocument> {
    Watched::file("keys", path, KeysDocument::parse, options).unwrap()
}

async fn wait_for_kid(keys: &Watched<KeysDocument>, kid: &str) {
    eventually(&format!("kid {kid} loaded"), 10, || async {
        keys.current().is_some_and(|d| rsa_kid(&d) == kid)
    })
    .await;
}

#[tokio::test]
async fn loads_keys_json_before_returning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.json");
    std::fs::write(&path, keys_json("k-1", "2027-01-01T00:00:00Z")).unwrap();
    let keys = watch_keys(&path, events_only());
    assert!(keys.is_loaded());
    assert_eq!(rsa_kid(&keys.current().unwrap()), "k-1");
    assert_eq!(keys.reload_failures(), 0);
}

#[tokio::test]
async fn a_file_missing_at_start_is_loaded_by_the_poll_once_it_appears() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.json");
    let keys = watch_keys(&path, poll_only());
    assert!(!keys.is_loaded());
    assert_eq!(keys.reload_failures(), 1, "the missing file is one failure");
    std::fs::write(&path, keys_json("k-late", "2027-01-01T00:00:00Z")).unwrap();
    wait_for_kid(&keys, "k-late").await;
    assert_eq!(
        keys.reload_failures(),
        1,
        "a missing file seen at every poll counts once"
    );
}

#[tokio::test]
async fn a_changed_file_is_reloaded_on_its_file_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.json");
    std::fs::write(&path, keys_json("k-1", "2027-01-01T00:00:00Z")).unwrap();
    let keys = watch_keys(&path, events_only());
    let mut generation = keys.subscribe();
    write_atomic(&path, keys_json("k-2", "2027-02-01T00:00:00Z").as_bytes());
    tokio::time::timeout(Duration::from_secs(10), generation.changed())
        .await
        .expect("a reload within 10 s")
        .unwrap();
    assert_eq!(rsa_kid(&keys.current().unwrap()), "k-2");
}

#[tokio::test]
async fn a_kubernetes_secret_volume_symlink_swap_is_followed() {
    // The layout kubelet's atomic writer makes: keys.json -> ..data/keys.json,
    // ..data -> ..<timestamp>; an update writes a new timestamped directory and swaps ..data.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let v1 = root.join("..2027_01_01");
    std::fs::create_dir(&v1).unwrap();
    std::fs::write(v1.join("keys.json"), keys_json("k-v1", "2027-01-01T00:00:00Z")).unwrap();
    std::os::unix::fs::symlink("..2027_01_01", root.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/keys.json", root.join("keys.json")).unwrap();
    let keys = watch_keys(&root.join("keys.json"), events_only());
    assert_eq!(rsa_kid(&keys.current().unwrap()), "k-v1");

    let v2 = root.join("..2027_02_01");
    std::fs::create_dir(&v2).unwrap();
    std::fs::write(v2.join("keys.json"), keys_json("k-v2", "2027-02-01T00:00:00Z")).unwrap();
    std::os::unix::fs::symlink("..2027_02_01", root.join("..data_tmp")).unwrap();
    std::fs::rename(root.join("..data_tmp"), root.join("..data")).unwrap();
    wait_for_kid(&keys, "k-v2").await;
}

#[tokio::test]
async fn a_half_written_keys_json_keeps_the_previous_document_until_it_is_complete() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.json");
    let full = keys_json("k-2", "2027-02-01T00:00:00Z");
    std::fs::write(&path, keys_json("k-1", "2027-01-01T00:00:00Z")).unwrap();
    let keys = watch_keys(&path, manual());

    // Written in place, in two chunks, checked in between.
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    f.write_all(&full.as_bytes()[..full.len() / 2]).unwrap();
    f.flush().unwrap();
    let outcome = keys.check_now();
    assert!(
        matches!(outcome, CheckOutcome::Failed(LoadError::Parse { .. })),
        "{outcome:?}"
    );
    assert_eq!(
        rsa_kid(&keys.current().unwrap()),
        "k-1",
        "the previous document serves"
    );
    assert!(keys.reload_failures() >= 1);

    f.write_all(&full.as_bytes()[full.len() / 2..]).unwrap();
    drop(f);
    assert_eq!(keys.check_now(), CheckOutcome::Loaded);
    assert_eq!(rsa_kid(&keys.current().unwrap()), "k-2");
}

#[tokio::test]
async fn garbage_keeps_the_previous_document_and_counts_one_failure() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.json");
    std::fs::write(&path, keys_json("k-1", "2027-01-01T00:00:00Z")).unwrap();
    let keys = Watched::file("keys", &path, KeysDocument::parse, poll_only()).unwrap();
    write_atomic(&path, b"\x00\x01 not json at all");
    eventually("the failure is seen", 10, || async {
        keys.reload_failures() == 1
    })
    .await;
    // Several more polls of the same garbage: still one failure.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(keys.reload_failures(), 1);
    assert_eq!(rsa_kid(&keys.current().unwrap()), "k-1");
}

#[tokio::test]
async fn a_file_over_the_size_limit_is_refused_without_parsing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.json");
    std::fs::write(&path, keys_json("k-1", "2027-01-01T00:00:00Z")).unwrap();
    let options = WatchOptions {
        max_file_bytes: 8 * 1024,
        ..manual()
    };
    let keys = watch_keys(&path, options);
    assert!(keys.is_loaded());
    write_atomic(&path, &vec![b' '; 8 * 1024 + 1]);
    let outcome = keys.check_now();
    assert!(
        matches!(
            &outcome,
            CheckOutcome::Failed(LoadError::TooLarge { limit: 8192, .. })
        ),
        "{outcome:?}"
    );
    assert_eq!(rsa_kid(&keys.current().unwrap()), "k-1");
}

#[tokio::test]
async fn an_unchanged_file_is_not_parsed_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.json");
    std::fs::write(&path, keys_json("k-1", "2027-01-01T00:00:00Z")).unwrap();
    let parses = Arc::new(Mutex::new(0u32));
    let counted = Arc::clone(&parses);
    let keys = Watched::file(
        "keys",
        &path,
        move |b: &[u8]| {
            *counted.lock().unwrap() += 1;
            KeysDocument::parse(b)
        },
        manual(),
    )
    .unwrap();
    assert_eq!(keys.check_now(), CheckOutcome::Unchanged);
    assert_eq!(keys.check_now(), CheckOutcome::Unchanged);
    assert_eq!(*parses.lock().unwrap(), 1);
}

/// A `MakeWriter` collecting log output.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[test]
fn a_refused_file_is_logged_with_its_path_and_error_but_not_its_content() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.json");
    std::fs::write(&path, keys_json("k-1", "2027-01-01T00:00:00Z")).unwrap();
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let keys = Watched::file("keys", &path, KeysDocument::parse, manual()).unwrap();
        // A document whose key is valid PEM of the wrong kind, and a truncated one: the
        // secret material must not reach the log.
        let leaked = keys_json("k-2", "2027-02-01T00:00:00Z").replace("\"v\":1", "\"v\":1,\"extra\":1");
        std::fs::write(&path, &leaked).unwrap();
        assert!(matches!(keys.check_now(), CheckOutcome::Failed(_)));
        std::fs::write(&path, &leaked[..leaked.len() - 40]).unwrap();
        assert!(matches!(keys.check_now(), CheckOutcome::Failed(_)));
    });
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(log.contains("load failed"), "{log}");
    assert!(log.contains("keys.json"), "the path is logged: {log}");
    let key_line = RSA_PKCS8.lines().nth(1).unwrap();
    assert!(!log.contains(key_line), "key material leaked into the log: {log}");
    assert!(!log.contains("BEGIN PRIVATE KEY"), "{log}");
    let secret = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, [7u8; 32]);
    assert!(
        !log.contains(&secret),
        "the HMAC secret leaked into the log: {log}"
    );
}
