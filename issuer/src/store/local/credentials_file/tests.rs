//! The credentials file's tests: reads through the cache, writes and their conflicts, between
//! handles that stand for two processes sharing the directory.

#![allow(clippy::unwrap_used)]

use std::{collections::BTreeMap, sync::Arc};

use super::{document::Document, *};

fn entry(n: u64) -> Arc<Entry> {
    Arc::new(Entry::of(&serde_json::json!({"n": n})))
}

#[test]
fn an_unchanged_file_is_parsed_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = CredentialsFile::new(dir.path());
    file.write("alice", ABSENT_VERSION, Edit::Put(entry(1))).unwrap();
    let first = file.read("alice").unwrap();
    let second = file.read("alice").unwrap();
    assert!(
        Arc::ptr_eq(&first, &second),
        "the second read should come from the cache"
    );
    assert_eq!(second.entries.get("alice"), Some(&entry(1)));
}

#[test]
fn a_write_by_another_process_is_seen_by_the_next_read() {
    let dir = tempfile::tempdir().unwrap();
    let ours = CredentialsFile::new(dir.path());
    // A second handle has its own queue and cache, as another process would.
    let theirs = CredentialsFile::new(dir.path());
    let v1 = ours.write("alice", ABSENT_VERSION, Edit::Put(entry(1))).unwrap();
    assert_eq!(ours.read("alice").unwrap().entries.get("alice"), Some(&entry(1)));
    theirs.write("alice", &v1, Edit::Put(entry(2))).unwrap();
    assert_eq!(ours.read("alice").unwrap().entries.get("alice"), Some(&entry(2)));
    theirs.write("bob", ABSENT_VERSION, Edit::Put(entry(3))).unwrap();
    let doc = ours.read("alice").unwrap();
    assert_eq!(doc.entries.get("bob"), Some(&entry(3)));
    assert_eq!(doc.generation, 3);
}

#[test]
fn our_own_write_is_seen_by_the_next_read() {
    let dir = tempfile::tempdir().unwrap();
    let file = CredentialsFile::new(dir.path());
    let v1 = file.write("alice", ABSENT_VERSION, Edit::Put(entry(1))).unwrap();
    assert_eq!(file.read("alice").unwrap().entries.get("alice"), Some(&entry(1)));
    file.write("alice", &v1, Edit::Remove).unwrap();
    assert!(!file.read("alice").unwrap().entries.contains_key("alice"));
}

#[test]
fn a_stale_cache_never_hides_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let ours = CredentialsFile::new(dir.path());
    let theirs = CredentialsFile::new(dir.path());
    let v1 = ours.write("alice", ABSENT_VERSION, Edit::Put(entry(1))).unwrap();
    let _cached = ours.read("alice").unwrap();
    theirs.write("alice", &v1, Edit::Put(entry(2))).unwrap();
    // The version we computed from the old entry no longer matches the file.
    let err = ours.write("alice", &v1, Edit::Put(entry(9))).unwrap_err();
    assert!(
        matches!(err, StoreError::Conflict(ref u) if u == "alice"),
        "{err:?}"
    );
}

#[test]
fn a_file_in_the_earlier_pretty_layout_is_read_at_the_same_versions() {
    let dir = tempfile::tempdir().unwrap();
    let mut entries = BTreeMap::new();
    entries.insert("alice".to_owned(), serde_json::json!({"n": 1, "s": "é\"x"}));
    entries.insert("bob".to_owned(), serde_json::json!({"n": 2}));
    let old = Document {
        generation: 7,
        entries,
    };
    let mut bytes = serde_json::to_vec_pretty(&old).unwrap();
    bytes.push(b'\n');
    std::fs::write(dir.path().join(CREDENTIALS_FILE_NAME), bytes).unwrap();
    let file = CredentialsFile::new(dir.path());
    let doc = file.read("alice").unwrap();
    assert_eq!(doc.generation, 7);
    for (user, value) in &old.entries {
        assert_eq!(doc.entries.get(user).map(|e| e.as_ref()), Some(&Entry::of(value)));
    }
    let v = doc.version("bob").to_owned();
    file.write("bob", &v, Edit::Put(entry(3))).unwrap();
}

#[test]
fn a_file_we_write_parses_as_the_same_document_with_every_entry_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let file = CredentialsFile::new(dir.path());
    let tricky = Arc::new(Entry::of(
        &serde_json::json!({"k": "quote \" newline \n é", "n": [1, 2]}),
    ));
    file.write("alice", ABSENT_VERSION, Edit::Put(Arc::clone(&tricky)))
        .unwrap();
    file.write("bob", ABSENT_VERSION, Edit::Put(entry(2))).unwrap();
    let bytes = std::fs::read(file.path()).unwrap();
    // What the earlier code parses: the serde document.
    let doc: Document = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(doc.generation, 2);
    assert_eq!(doc.entries.len(), 2);
    assert_eq!(Entry::of(&doc.entries["alice"]), *tricky);
    assert_eq!(Entry::of(&doc.entries["bob"]), *entry(2));
    let text = String::from_utf8(bytes).unwrap();
    assert_eq!(text.lines().count(), 7, "one line per entry: {text}");
}

#[test]
fn an_emptied_file_is_a_valid_document() {
    let dir = tempfile::tempdir().unwrap();
    let file = CredentialsFile::new(dir.path());
    let v = file.write("alice", ABSENT_VERSION, Edit::Put(entry(1))).unwrap();
    file.write("alice", &v, Edit::Remove).unwrap();
    let doc: Document = serde_json::from_slice(&std::fs::read(file.path()).unwrap()).unwrap();
    assert!(doc.entries.is_empty());
    assert_eq!(doc.generation, 2);
}

#[test]
fn a_write_by_another_process_between_our_own_writes_is_a_conflict_at_the_compare() {
    let dir = tempfile::tempdir().unwrap();
    let ours = CredentialsFile::new(dir.path());
    let theirs = CredentialsFile::new(dir.path());
    // Our commit caches the document it wrote; the other process then rewrites the same
    // entry with one of the same length, so only the inode tells the files apart.
    let v1 = ours.write("alice", ABSENT_VERSION, Edit::Put(entry(1))).unwrap();
    let v2 = theirs.write("alice", &v1, Edit::Put(entry(2))).unwrap();
    let err = ours.write("alice", &v1, Edit::Put(entry(3))).unwrap_err();
    assert!(
        matches!(err, StoreError::Conflict(ref u) if u == "alice"),
        "{err:?}"
    );
    // And the compare now works from their file.
    ours.write("alice", &v2, Edit::Put(entry(4))).unwrap();
    assert_eq!(
        theirs.read("alice").unwrap().entries.get("alice"),
        Some(&entry(4))
    );
}

#[test]
fn a_corrupt_file_is_never_overwritten_even_with_a_cached_document() {
    let dir = tempfile::tempdir().unwrap();
    let file = CredentialsFile::new(dir.path());
    let v1 = file.write("alice", ABSENT_VERSION, Edit::Put(entry(1))).unwrap();
    std::fs::write(file.path(), b"{not json").unwrap();
    let err = file.write("alice", &v1, Edit::Put(entry(2))).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert_eq!(std::fs::read(file.path()).unwrap(), b"{not json");
}

#[test]
fn a_commit_turn_dropped_before_running_fails_its_writers_and_frees_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let file = CredentialsFile::new(dir.path());
    let (receiver, turn) = file.submit("alice", ABSENT_VERSION, Edit::Put(entry(1)));
    let (second, no_turn) = file.submit("bob", ABSENT_VERSION, Edit::Put(entry(2)));
    assert!(
        turn.is_some() && no_turn.is_none(),
        "only the first writer commits"
    );
    drop(turn);
    assert!(
        receiver.blocking_recv().is_err(),
        "the writer is told, not left waiting"
    );
    assert!(second.blocking_recv().is_err());
    // The next writer takes a new turn and commits.
    file.write("alice", ABSENT_VERSION, Edit::Put(entry(1))).unwrap();
    assert_eq!(file.read("alice").unwrap().entries.get("alice"), Some(&entry(1)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_async_writers_are_committed_in_batches_and_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let file = CredentialsFile::new(dir.path());
    let mut tasks = Vec::new();
    for n in 0..48u64 {
        let file = file.clone();
        tasks.push(tokio::spawn(async move {
            file.write_async(&format!("user-{n}"), ABSENT_VERSION, Edit::Put(entry(n)))
                .await
        }));
    }
    for (n, task) in tasks.into_iter().enumerate() {
        let version = task.await.unwrap().unwrap();
        assert_eq!(version, entry(n as u64).version);
    }
    let doc: Document = serde_json::from_slice(&std::fs::read(file.path()).unwrap()).unwrap();
    assert_eq!(doc.entries.len(), 48);
    assert!(doc.generation <= 48, "generation {}", doc.generation);
    // The writers are told as their batch lands; the turn ends when its holder next finds the
    // queue empty, a moment later.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while file.queue().committing && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(!file.queue().committing, "the turn ended with the queue");
}

#[test]
fn a_file_replaced_by_hand_with_a_lower_generation_is_still_what_reads_return() {
    let dir = tempfile::tempdir().unwrap();
    let file = CredentialsFile::new(dir.path());
    let v1 = file.write("alice", ABSENT_VERSION, Edit::Put(entry(1))).unwrap();
    file.write("alice", &v1, Edit::Put(entry(2))).unwrap();
    let by_hand = dir.path().join("by-hand.json");
    std::fs::write(&by_hand, br#"{"generation": 0, "entries": {"alice": {"n": 5}}}"#).unwrap();
    std::fs::rename(&by_hand, file.path()).unwrap();
    assert_eq!(file.read("alice").unwrap().entries.get("alice"), Some(&entry(5)));
    assert_eq!(file.read("alice").unwrap().entries.get("alice"), Some(&entry(5)));
    // The compare under the lock works from that file too.
    file.write("alice", &entry(5).version, Edit::Put(entry(6)))
        .unwrap();
    assert_eq!(file.read("alice").unwrap().generation, 1);
}

#[test]
fn a_written_entry_has_the_version_another_process_reads_and_is_not_parsed_again() {
    use ichor_renderers::auth::credentials::CredentialsEntry;
    let now: jiff::Timestamp = "2026-12-03T12:00:00Z".parse().unwrap();
    let fam = "a-family_0123456789abcd";
    let entry = CredentialsEntry::new("$argon2id$v=19$m=65536,t=3,p=1$c2FsdA$aGFzaA".into(), now, false)
        .start_family(
            fam,
            "ichor-cli",
            "ichor-kube",
            now,
            jiff::SignedDuration::from_hours(24),
        )
        .unwrap();
    let written = Arc::new(Entry::of_written(entry.to_json("alice").unwrap(), entry.clone()));
    assert_eq!(written.parsed("alice").unwrap(), entry);
    let dir = tempfile::tempdir().unwrap();
    let ours = CredentialsFile::new(dir.path());
    let version = ours
        .write("alice", ABSENT_VERSION, Edit::Put(Arc::clone(&written)))
        .unwrap();
    assert_eq!(version, written.version);
    // Another process parses the file: the same version, the same entry.
    let theirs = CredentialsFile::new(dir.path());
    let read = theirs.read("alice").unwrap();
    assert_eq!(read.version("alice"), version);
    assert_eq!(read.entries["alice"].parsed("alice").unwrap(), entry);
    assert!(!format!("{:?}", read.entries["alice"]).contains("argon2id"));
}

#[test]
fn an_entry_that_does_not_parse_is_refused_on_every_read() {
    let bad = Entry::of(&serde_json::json!({"v": 1, "hash": 7}));
    assert!(bad.parsed("alice").is_err());
    assert!(bad.parsed("alice").is_err());
}
