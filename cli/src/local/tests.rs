//! The local driver over real files.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use ichor_controller_core::cycle::REISSUE_NODE;
use ichor_controller_core::perform::OsKeyMaterial;
use ichor_controller_core::perform::{OPAQUE, SecretData};
use ichor_renderers::trust::keys::KeysDocument;
use ichor_renderers::trust::tls::{CertFacts, San};
use ichor_renderers::trust::{CA_SECRET, NAMESPACE, TLS_SECRET};
use ichor_renderers::trust::{KEYS_JSON, SIGNING_SECRET};
use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
struct Removed(Arc<Mutex<Vec<String>>>);

impl CredentialsRemover for Removed {
    fn remove(&mut self, request: &RemoveCredentialsKeyRequest) -> Result<(), String> {
        self.0.lock().unwrap().push(request.key.clone());
        Ok(())
    }
}

const ADMIN: &str = "apiVersion: ichor.maesh.dev/v1alpha1\nkind: IchorUser\nmetadata:\n  name: admin\nspec:\n  roles: [admin]\n";

fn setup() -> (tempfile::TempDir, LocalPaths, Removed) {
    let tmp = tempfile::tempdir().unwrap();
    let paths = LocalPaths {
        manifests: tmp.path().join("manifests"),
        secrets: tmp.path().join("secrets"),
        credentials: tmp.path().join("credentials.json"),
    };
    fs::create_dir_all(paths.manifests.join("users")).unwrap();
    fs::write(paths.manifests.join("users/admin.yaml"), ADMIN).unwrap();
    (tmp, paths, Removed::default())
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap()
}

#[test]
fn a_first_tick_writes_keys_a_ca_and_a_leaf_for_127_0_0_1_and_settles() {
    let (_tmp, paths, removed) = setup();
    let mut c = LocalController::new(paths.clone(), Box::new(OsKeyMaterial), Box::new(removed)).unwrap();
    let report = c.tick(Timestamp::now());
    assert!(report.settled, "{report:?}");
    assert!(report.problems.is_empty(), "{report:?}");
    let names = stored_secret_names(&paths.secrets);
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        [CA_SECRET, SIGNING_SECRET, TLS_SECRET]
    );
    let doc =
        KeysDocument::parse(&fs::read(paths.secrets.join(SIGNING_SECRET).join(KEYS_JSON)).unwrap()).unwrap();
    assert_eq!((doc.keys().len(), doc.hmac().len()), (1, 1));
    let ca = CertFacts::from_pem(&read(&paths.secrets.join(CA_SECRET).join("tls.crt")), "ca").unwrap();
    let leaf = CertFacts::from_pem(&read(&paths.secrets.join(TLS_SECRET).join("tls.crt")), "leaf").unwrap();
    assert!(leaf.is_issued_by(&ca));
    assert!(
        leaf.sans.contains(&San::Ip("127.0.0.1".parse().unwrap())),
        "{:?}",
        leaf.sans
    );
    assert!(
        leaf.sans.contains(&San::Dns("localhost".into())),
        "{:?}",
        leaf.sans
    );
    let mode = fs::metadata(paths.secrets.join(TLS_SECRET).join("tls.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let mode = fs::metadata(paths.secrets.join(TLS_SECRET))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);

    let again = c.tick(Timestamp::now());
    assert!(
        again.actions.is_empty() && again.secrets_written.is_empty(),
        "{again:?}"
    );
}

#[test]
fn a_restart_reads_the_stored_secrets_and_generates_nothing() {
    let (_tmp, paths, removed) = setup();
    let now = Timestamp::now();
    let mut first =
        LocalController::new(paths.clone(), Box::new(OsKeyMaterial), Box::new(removed.clone())).unwrap();
    assert!(first.tick(now).settled);
    let keys = read(&paths.secrets.join(SIGNING_SECRET).join(KEYS_JSON));
    let mut second = LocalController::new(paths.clone(), Box::new(OsKeyMaterial), Box::new(removed)).unwrap();
    let report = second.tick(now);
    assert!(report.secrets_written.is_empty(), "{report:?}");
    assert_eq!(read(&paths.secrets.join(SIGNING_SECRET).join(KEYS_JSON)), keys);
}

#[test]
fn an_edited_user_file_reaches_the_world_and_a_broken_one_keeps_the_previous_objects() {
    let (_tmp, paths, removed) = setup();
    let mut c = LocalController::new(paths.clone(), Box::new(OsKeyMaterial), Box::new(removed)).unwrap();
    c.tick(Timestamp::now());
    let key = ObjectKey::new("IchorUser", NAMESPACE, "admin");
    fs::write(
        paths.manifests.join("users/admin.yaml"),
        format!("{ADMIN}  disabled: true\n"),
    )
    .unwrap();
    let report = c.tick(Timestamp::now());
    assert_eq!(report.events, 1, "{report:?}");
    let user = c.controller().world().get(&key).unwrap();
    assert_eq!(user.value["spec"]["disabled"], json!(true));
    assert!(user.value.get("status").is_some(), "the in-memory status is kept");

    fs::write(paths.manifests.join("users/admin.yaml"), "kind: IchorUsers\n").unwrap();
    let report = c.tick(Timestamp::now());
    assert!(!report.problems.is_empty());
    assert!(c.controller().world().get(&key).is_some());
    assert_eq!(
        read(&paths.manifests.join("users/admin.yaml")),
        "kind: IchorUsers\n"
    );
}

/// The condition `type_` of `user` as the in-memory status holds it: (status, reason).
fn condition(c: &LocalController, user: &str, type_: &str) -> Option<(String, String)> {
    let key = ObjectKey::new("IchorUser", NAMESPACE, user);
    let user = c.controller().world().get(&key)?;
    let conditions = user.value["status"]["conditions"].as_array()?;
    let found = conditions.iter().find(|c| c["type"] == type_)?;
    Some((
        found["status"].as_str()?.to_owned(),
        found["reason"].as_str()?.to_owned(),
    ))
}

#[test]
fn a_user_without_an_entry_in_the_credentials_file_has_no_password_not_an_unknown_one() {
    let (_tmp, paths, removed) = setup();
    let mut c = LocalController::new(paths, Box::new(OsKeyMaterial), Box::new(removed)).unwrap();
    c.tick(Timestamp::now());
    // The file is read whole: a missing entry is no password, never "not listed".
    assert_eq!(
        condition(&c, "admin", "PasswordSet"),
        Some(("False".to_owned(), "NoPassword".to_owned()))
    );
    assert_eq!(
        condition(&c, "admin", "Ready"),
        Some(("False".to_owned(), "PasswordNotSet".to_owned()))
    );
}

#[test]
fn a_credentials_entry_without_its_user_is_handed_to_the_remover() {
    let (_tmp, paths, removed) = setup();
    fs::write(
        &paths.credentials,
        r#"{"generation": 3, "entries": {"admin": {}, "ghost": {}}}"#,
    )
    .unwrap();
    let mut c = LocalController::new(paths, Box::new(OsKeyMaterial), Box::new(removed.clone())).unwrap();
    c.tick(Timestamp::now());
    assert_eq!(*removed.0.lock().unwrap(), ["ghost"]);
}

/// Fails its first `failures` removals.
struct Flaky {
    failures: usize,
    removed: Removed,
}

impl CredentialsRemover for Flaky {
    fn remove(&mut self, request: &RemoveCredentialsKeyRequest) -> Result<(), String> {
        if self.failures > 0 {
            self.failures -= 1;
            return Err("the credentials store is unavailable".to_owned());
        }
        self.removed.remove(request)
    }
}

#[test]
fn a_failed_effect_is_asked_for_again_on_the_next_tick() {
    let (_tmp, paths, removed) = setup();
    fs::write(
        &paths.credentials,
        r#"{"generation": 3, "entries": {"admin": {}, "ghost": {}}}"#,
    )
    .unwrap();
    let flaky = Flaky {
        failures: 1,
        removed: removed.clone(),
    };
    let mut c = LocalController::new(paths, Box::new(OsKeyMaterial), Box::new(flaky)).unwrap();
    let first = c.tick(Timestamp::now());
    assert!(
        first.problems.iter().any(|p| p.contains("unavailable")),
        "{first:?}"
    );
    assert!(removed.0.lock().unwrap().is_empty());
    let second = c.tick(Timestamp::now());
    assert!(
        second.actions.iter().any(|a| a.contains(REISSUE_NODE)),
        "{second:?}"
    );
    assert_eq!(*removed.0.lock().unwrap(), ["ghost"]);
    let third = c.tick(Timestamp::now());
    assert!(third.actions.is_empty(), "{third:?}");
}

#[test]
fn a_secret_key_that_cannot_be_a_file_name_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let files = SecretFiles::new(tmp.path());
    let secret = SecretData {
        name: "s".into(),
        type_: OPAQUE.into(),
        data: BTreeMap::from([("../escape".to_owned(), b"x".to_vec())]),
    };
    assert!(matches!(files.write(&secret), Err(LocalError::BadKey { .. })));
    assert!(!tmp.path().join("escape").exists());
}

#[test]
fn superseded_keys_are_dated_and_retired_keys_dropped_in_the_signing_files() {
    use ichor_renderers::trust::keys::KeyTimes as _;
    let (_tmp, paths, removed) = setup();
    let mut c = LocalController::new(paths.clone(), Box::new(OsKeyMaterial), Box::new(removed)).unwrap();
    let file = paths.secrets.join(SIGNING_SECRET).join(KEYS_JSON);
    let doc = || KeysDocument::parse(&fs::read(&file).unwrap()).unwrap();
    let t0 = Timestamp::now();
    assert!(c.tick(t0).settled);
    let first = doc().keys()[0].kid().to_owned();
    // A rotation is due after 30 days; its key signs ten minutes later, superseding the first.
    let rotated = t0 + jiff::SignedDuration::from_hours(31 * 24);
    let report = c.tick(rotated);
    assert!(report.settled && report.problems.is_empty(), "{report:?}");
    let report = c.tick(rotated + jiff::SignedDuration::from_mins(11));
    assert!(report.settled && report.problems.is_empty(), "{report:?}");
    let dated = doc();
    let old = dated
        .rsa_key(&first)
        .expect("the superseded key stays for a while");
    assert!(
        old.retire_after().is_some(),
        "the superseded key's retireAfter is in the file the issuer reads"
    );
    // Past its retireAfter (the successor's start + the ID token TTL + 2 h), it leaves the file.
    let report = c.tick(rotated + jiff::SignedDuration::from_hours(3));
    assert!(report.settled && report.problems.is_empty(), "{report:?}");
    assert!(
        doc().rsa_key(&first).is_none(),
        "the retired key is still in {}",
        file.display()
    );
}
