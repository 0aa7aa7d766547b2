//! The local store of `ichor dev`: users from YAML files, credentials in one locked file shared
//! safely by several stores and several processes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::{
    fs,
    io::Write,
    os::unix::fs::PermissionsExt,
    path::Path,
    process::Command,
    sync::{Arc, Mutex, OnceLock},
    time::Duration,
};

use ichor_issuer::store::{
    Change, StoreError, UserStore, Version,
    local::{LocalStore, UserFileError},
    modify_credentials,
};
use ichor_renderers::{
    auth::credentials::CredentialsEntry,
    crd::{IchorUser, IchorUserSpec},
};
use jiff::Timestamp;

const HASH: &str = "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$SECRETHASHVALUE";
const FAMILY: &str = "fam1";

fn now() -> Timestamp {
    "2026-11-05T10:00:00Z".parse().unwrap()
}

fn entry() -> CredentialsEntry {
    ichor_testkit::issuer::harness::cli_family_entry(HASH, now(), FAMILY, now())
}

fn generation(entry: &CredentialsEntry) -> u64 {
    entry.family(FAMILY).unwrap().generation
}

/// Every log line of this test binary, to check what is (and is not) logged.
fn logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = Arc::clone(&buffer);
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || SharedWriter(Arc::clone(&writer)))
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        buffer
    })
    .clone()
}

struct SharedWriter(Arc<Mutex<Vec<u8>>>);

impl Write for SharedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logged() -> String {
    String::from_utf8_lossy(&logs().lock().unwrap()).into_owned()
}

/// The version of a user without an entry.
fn absent() -> Version {
    Version("absent".to_owned())
}

fn store(root: &Path) -> LocalStore {
    LocalStore::new(root.join("users"), root.join("state"))
}

/// Adds one to the family generation, retrying the whole read-modify-write when
/// `modify_credentials` runs out of retries under heavy contention. Returns the new generation.
async fn bump(store: &LocalStore, user: &str) -> u64 {
    loop {
        let result: Result<u64, StoreError> = modify_credentials(store, user, |current| {
            let mut next = current.cloned().expect("the entry exists");
            let family = next.families.get_mut(FAMILY).expect("the family exists");
            family.generation += 1;
            let generation = family.generation;
            Ok(Change::Put(next, generation))
        })
        .await;
        match result {
            Ok(generation) => return generation,
            Err(StoreError::Conflict(_)) => continue,
            Err(e) => panic!("bump failed: {e}"),
        }
    }
}

fn user_yaml(name: &str, roles: &str, disabled: bool) -> String {
    format!(
        "apiVersion: ichor.maesh.dev/v1alpha1\nkind: IchorUser\n\
         metadata:\n  name: {name}\n  namespace: ichor-system\n\
         spec:\n  displayName: {name} display\n  roles: {roles}\n  disabled: {disabled}\n"
    )
}

fn write(dir: &Path, file: &str, content: &str) {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join(file), content).unwrap();
}

#[tokio::test]
async fn a_missing_credentials_file_is_an_empty_store_where_every_user_is_absent() {
    let root = tempfile::tempdir().unwrap();
    let (entry, version) = store(root.path()).read_credentials("alice").await.unwrap();
    assert!(entry.is_none());
    assert_eq!(version, absent());
}

#[tokio::test]
async fn a_written_entry_reads_back_at_its_own_version_in_a_0600_file_of_a_0700_directory() {
    let root = tempfile::tempdir().unwrap();
    let store = store(root.path());
    let version = store
        .write_credentials("alice", &absent(), Some(&entry()))
        .await
        .unwrap();
    assert!(
        version.0.starts_with("sha256:") && version.0.len() == 7 + 64,
        "{version:?}"
    );
    let (read, read_version) = store.read_credentials("alice").await.unwrap();
    assert_eq!(read, Some(entry()));
    assert_eq!(read_version, version);
    let file_mode = fs::metadata(store.credentials_path())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    let dir_mode = fs::metadata(root.path().join("state"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!((file_mode, dir_mode), (0o600, 0o700));
    let on_disk: serde_json::Value =
        serde_json::from_slice(&fs::read(store.credentials_path()).unwrap()).unwrap();
    assert_eq!(on_disk["generation"], 1);
    assert_eq!(on_disk["entries"]["alice"]["hash"], HASH);
    let leftovers: Vec<_> = fs::read_dir(root.path().join("state"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[tokio::test]
async fn a_write_against_a_stale_entry_is_a_conflict_and_changes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let store = store(root.path());
    let zero = absent();
    let first = store
        .write_credentials("alice", &zero, Some(&entry()))
        .await
        .unwrap();
    let other = entry().revoke_all(now());
    let err = store
        .write_credentials("alice", &zero, Some(&other))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Conflict(ref u) if u == "alice"),
        "{err}"
    );
    let garbage = store
        .write_credentials("alice", &Version("not-a-version".to_owned()), None)
        .await
        .unwrap_err();
    assert!(matches!(garbage, StoreError::Conflict(_)), "{garbage}");
    // A version read before the last change of the entry is stale too.
    let second = store
        .write_credentials("alice", &first, Some(&other))
        .await
        .unwrap();
    let stale = store
        .write_credentials("alice", &first, Some(&entry()))
        .await
        .unwrap_err();
    assert!(matches!(stale, StoreError::Conflict(_)), "{stale}");
    let (read, version) = store.read_credentials("alice").await.unwrap();
    assert_eq!((read, version), (Some(other), second));
}

#[tokio::test]
async fn another_users_write_between_a_read_and_a_write_is_no_conflict() {
    let root = tempfile::tempdir().unwrap();
    let store = store(root.path());
    let (_, alice_read) = store.read_credentials("alice").await.unwrap();
    let (_, bob_read) = store.read_credentials("bob").await.unwrap();
    let alice = store
        .write_credentials("alice", &alice_read, Some(&entry()))
        .await
        .unwrap();
    store
        .write_credentials("bob", &bob_read, Some(&entry()))
        .await
        .unwrap();
    let (_, alice_again) = store.read_credentials("alice").await.unwrap();
    assert_eq!(alice_again, alice, "bob's write moved alice's version");
}

#[tokio::test]
async fn removing_one_entry_keeps_every_other_users_entry() {
    let root = tempfile::tempdir().unwrap();
    let store = store(root.path());
    let v1 = store
        .write_credentials("alice", &absent(), Some(&entry()))
        .await
        .unwrap();
    store
        .write_credentials("bob", &absent(), Some(&entry()))
        .await
        .unwrap();
    let v3 = store.write_credentials("alice", &v1, None).await.unwrap();
    assert_eq!(v3, absent());
    assert!(store.read_credentials("alice").await.unwrap().0.is_none());
    assert_eq!(store.read_credentials("bob").await.unwrap().0, Some(entry()));
}

#[tokio::test]
async fn a_corrupt_credentials_file_is_reported_without_its_content_and_never_overwritten() {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    write(
        &state,
        "credentials.json",
        "{\"generation\": 1, \"entries\": {\"alice\": \"$argon2id$LEAKED\"",
    );
    let store = store(root.path());
    let err = store.read_credentials("alice").await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(!err.to_string().contains("LEAKED"), "{err}");
    let err = store
        .write_credentials("bob", &absent(), Some(&entry()))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(
        fs::read_to_string(state.join("credentials.json"))
            .unwrap()
            .contains("LEAKED")
    );
}

#[tokio::test]
async fn a_corrupt_entry_is_reported_naming_the_field_without_the_hash() {
    logs();
    let root = tempfile::tempdir().unwrap();
    let doc = serde_json::json!({"generation": 4, "entries": {"alice": {
        "v": 1, "hash": "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$HASHMARKER77",
        "notBefore": "2026-11-05T10:00:00Z", "mustChange": "SECRETMARKER77"}}});
    write(&root.path().join("state"), "credentials.json", &doc.to_string());
    let err = store(root.path()).read_credentials("alice").await.unwrap_err();
    let shown = err.to_string();
    assert!(
        matches!(err, StoreError::Corrupt { ref user, .. } if user == "alice"),
        "{shown}"
    );
    assert!(
        shown.contains("mustChange") || shown.contains("invalid type"),
        "{shown}"
    );
    assert!(
        !shown.contains("SECRETMARKER77") && !shown.contains("HASHMARKER77"),
        "{shown}"
    );
    let logged = logged();
    assert!(!logged.contains("SECRETMARKER77") && !logged.contains("HASHMARKER77"));
}

#[tokio::test]
async fn a_name_that_is_not_a_dns_label_gets_no_credentials() {
    let root = tempfile::tempdir().unwrap();
    let store = store(root.path());
    let err = store
        .write_credentials("../escape", &absent(), Some(&entry()))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(!store.credentials_path().exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_stores_on_one_directory_lose_no_increment_under_concurrent_writers() {
    const TASKS_PER_STORE: usize = 4;
    const ROUNDS: usize = 25;
    let root = tempfile::tempdir().unwrap();
    let first = Arc::new(store(root.path()));
    let second = Arc::new(store(root.path()));
    first
        .write_credentials("alice", &absent(), Some(&entry()))
        .await
        .unwrap();
    // A second user written concurrently must survive every alice write.
    first
        .write_credentials("bob", &absent(), Some(&entry()))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for store in [&first, &second] {
        for _ in 0..TASKS_PER_STORE {
            let store = Arc::clone(store);
            tasks.push(tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    bump(&store, "alice").await;
                }
            }));
        }
    }
    let bob_writer = {
        let store = Arc::clone(&second);
        tokio::spawn(async move {
            for _ in 0..ROUNDS {
                bump(&store, "bob").await;
            }
        })
    };
    for task in tasks {
        task.await.unwrap();
    }
    bob_writer.await.unwrap();
    let (alice, _) = first.read_credentials("alice").await.unwrap();
    let (bob, _) = second.read_credentials("bob").await.unwrap();
    assert_eq!(
        generation(&alice.unwrap()),
        1 + (2 * TASKS_PER_STORE * ROUNDS) as u64
    );
    assert_eq!(generation(&bob.unwrap()), 1 + ROUNDS as u64);
}

const CHILD_DIR: &str = "ICHOR_STORE_TEST_CHILD_DIR";
const PROCESS_ROUNDS: usize = 30;

/// Run by `two_processes_on_one_directory_lose_no_increment` as a child process.
#[test]
#[ignore = "a child process of two_processes_on_one_directory_lose_no_increment"]
fn child_process_bumps_the_family_generation() {
    let dir = std::env::var(CHILD_DIR).expect("run as a child process");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = store(Path::new(&dir));
        for _ in 0..PROCESS_ROUNDS {
            bump(&store, "alice").await;
        }
    });
}

#[tokio::test]
async fn two_processes_on_one_directory_lose_no_increment() {
    let root = tempfile::tempdir().unwrap();
    let parent = store(root.path());
    parent
        .write_credentials("alice", &absent(), Some(&entry()))
        .await
        .unwrap();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..2)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "--ignored",
                    "--exact",
                    "store_local::child_process_bumps_the_family_generation",
                    "--test-threads=1",
                ])
                .env(CHILD_DIR, root.path())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for _ in 0..PROCESS_ROUNDS {
        bump(&parent, "alice").await;
    }
    for mut child in children {
        let status = tokio::task::spawn_blocking(move || child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "child failed: {status}");
    }
    let (alice, _) = parent.read_credentials("alice").await.unwrap();
    assert_eq!(generation(&alice.unwrap()), 1 + 3 * PROCESS_ROUNDS as u64);
}

#[tokio::test]
async fn users_come_from_yaml_files_and_a_bad_file_costs_only_its_own_users() {
    logs();
    let root = tempfile::tempdir().unwrap();
    let users = root.path().join("users");
    write(&users, "alice.yaml", &user_yaml("alice", "[admin]", false));
    write(
        &users.join("team"),
        "dave.yml",
        &user_yaml("dave", "[viewer, operator]", true),
    );
    write(
        &users,
        "broken-bob.yaml",
        &format!("{}  extra: [unclosed\n", user_yaml("bob", "[viewer]", false)),
    );
    write(
        &users,
        "carol-bad-role.yaml",
        &user_yaml("carol", "[Admin]", false),
    );
    write(&users, ".hidden.yaml", &user_yaml("eve", "[admin]", false));
    let store = store(root.path()).with_user_ttl(Duration::ZERO);
    let listed = store.list_users().await.unwrap();
    let names: Vec<_> = listed.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["alice", "dave"]);
    let dave = store.get_user("dave").await.unwrap().unwrap();
    assert_eq!(dave.roles, ["viewer", "operator"]);
    assert!(dave.disabled);
    assert_eq!(dave.display_name.as_deref(), Some("dave display"));
    assert!(store.get_user("bob").await.unwrap().is_none());
    let logged = logged();
    assert!(logged.contains("broken-bob.yaml"), "{logged}");
    assert!(
        logged.contains("carol-bad-role.yaml") && logged.contains("spec.roles"),
        "{logged}"
    );
}

#[tokio::test]
async fn a_user_defined_in_two_files_is_ignored() {
    let root = tempfile::tempdir().unwrap();
    let users = root.path().join("users");
    write(&users, "a.yaml", &user_yaml("alice", "[admin]", false));
    write(&users, "b.yaml", &user_yaml("alice", "[admin]", true));
    write(&users, "bob.yaml", &user_yaml("bob", "[viewer]", false));
    let store = store(root.path());
    assert!(store.get_user("alice").await.unwrap().is_none());
    assert!(store.get_user("bob").await.unwrap().is_some());
    let err = store.delete_user("alice").await.unwrap_err();
    assert!(matches!(err, UserFileError::Duplicate { .. }), "{err}");
}

#[tokio::test(start_paused = true)]
async fn an_edited_file_is_seen_once_the_ttl_has_passed_and_not_before() {
    let root = tempfile::tempdir().unwrap();
    let users = root.path().join("users");
    write(&users, "alice.yaml", &user_yaml("alice", "[admin]", false));
    let store = store(root.path()).with_user_ttl(Duration::from_secs(5));
    assert!(!store.get_user("alice").await.unwrap().unwrap().disabled);
    write(&users, "alice.yaml", &user_yaml("alice", "[admin]", true));
    tokio::time::advance(Duration::from_secs(4)).await;
    assert!(
        !store.get_user("alice").await.unwrap().unwrap().disabled,
        "served from the snapshot"
    );
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(
        store.get_user("alice").await.unwrap().unwrap().disabled,
        "re-read after the TTL"
    );
}

#[tokio::test]
async fn create_user_writes_a_file_that_reads_back_and_refuses_an_existing_user() {
    let root = tempfile::tempdir().unwrap();
    let store = store(root.path());
    let mut user = IchorUser::new(
        "alice",
        IchorUserSpec {
            display_name: Some("Alice".to_owned()),
            email: Some("alice@example.org".to_owned()),
            roles: vec!["admin".to_owned()],
            disabled: false,
        },
    );
    let path = store.create_user(&user).await.unwrap();
    assert_eq!(path, root.path().join("users").join("alice.yaml"));
    let yaml = fs::read_to_string(&path).unwrap();
    insta::assert_snapshot!(yaml);
    let read = store.get_user("alice").await.unwrap().unwrap();
    assert_eq!(read.email.as_deref(), Some("alice@example.org"));

    user.spec.disabled = true;
    let err = store.create_user(&user).await.unwrap_err();
    assert!(matches!(err, UserFileError::AlreadyExists { .. }), "{err}");
    assert!(!fs::read_to_string(&path).unwrap().contains("disabled: true"));

    let bad = IchorUser::new("../etc/passwd", IchorUserSpec::default());
    let err = store.create_user(&bad).await.unwrap_err();
    assert!(matches!(err, UserFileError::Invalid { .. }), "{err}");
}

#[tokio::test]
async fn update_user_rewrites_its_own_file_and_refuses_a_file_shared_with_other_objects() {
    let root = tempfile::tempdir().unwrap();
    let users = root.path().join("users");
    write(
        &users,
        "team.yaml",
        &format!(
            "{}---\n{}",
            user_yaml("bob", "[viewer]", false),
            user_yaml("carol", "[viewer]", false)
        ),
    );
    let store = store(root.path());
    let mut alice = IchorUser::new("alice", IchorUserSpec::default());
    store.create_user(&alice).await.unwrap();
    alice.spec.roles = vec!["operator".to_owned()];
    alice.spec.disabled = true;
    store.update_user(&alice).await.unwrap();
    let read = store.get_user("alice").await.unwrap().unwrap();
    assert_eq!(
        (read.roles.as_slice(), read.disabled),
        (["operator".to_owned()].as_slice(), true)
    );

    let bob = IchorUser::new("bob", IchorUserSpec::default());
    let err = store.update_user(&bob).await.unwrap_err();
    assert!(matches!(err, UserFileError::SharedFile { .. }), "{err}");
    let nobody = IchorUser::new("nobody", IchorUserSpec::default());
    let err = store.update_user(&nobody).await.unwrap_err();
    assert!(matches!(err, UserFileError::NotFound { .. }), "{err}");
}

#[tokio::test]
async fn delete_user_removes_its_file_and_the_user_is_gone_at_once() {
    let root = tempfile::tempdir().unwrap();
    let store = store(root.path());
    store
        .create_user(&IchorUser::new("alice", IchorUserSpec::default()))
        .await
        .unwrap();
    assert!(store.get_user("alice").await.unwrap().is_some());
    let path = store.delete_user("alice").await.unwrap();
    assert!(!path.exists());
    assert!(store.get_user("alice").await.unwrap().is_none());
    let err = store.delete_user("alice").await.unwrap_err();
    assert!(matches!(err, UserFileError::NotFound { .. }), "{err}");
}

#[tokio::test]
async fn a_file_over_one_mebibyte_and_a_user_of_another_namespace_are_skipped() {
    let root = tempfile::tempdir().unwrap();
    let users = root.path().join("users");
    let padding = format!("# {}\n", "x".repeat(1024 * 1024));
    write(
        &users,
        "big.yaml",
        &format!("{}{padding}", user_yaml("big", "[admin]", false)),
    );
    write(
        &users,
        "elsewhere.yaml",
        &user_yaml("eve", "[admin]", false).replace("namespace: ichor-system", "namespace: default"),
    );
    write(&users, "ok.yaml", &user_yaml("ok", "[viewer]", false));
    let names: Vec<_> = store(root.path())
        .list_users()
        .await
        .unwrap()
        .into_iter()
        .map(|u| u.name)
        .collect();
    assert_eq!(names, ["ok"]);
}
