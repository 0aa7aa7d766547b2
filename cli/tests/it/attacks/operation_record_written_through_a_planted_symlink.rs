//! An operation record written through a planted symlink: in a shared, group-writable manifests
//! checkout another user plants `.ichor/operations/.prod.yaml.tmp -> ~victim/.bashrc`. If
//! `ichor config apply` wrote its record through that fixed temporary name, following links, it
//! would truncate and overwrite the victim's file with YAML. The store writes a fresh file under
//! a random name (exclusive create, 0600) and renames it over the record, so a planted name is
//! never opened and a planted record is replaced, not written through.
#![cfg(unix)]

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use ichor_cli::commands::config::operation::new_operation;
use ichor_cli::commands::config::store::{FileOperationStore, OperationStore};

const VICTIM: &str = "export PATH=$HOME/bin:$PATH\n";

fn victim_file(dir: &Path) -> std::path::PathBuf {
    let victim = dir.join("victim-bashrc");
    std::fs::write(&victim, VICTIM).unwrap();
    victim
}

fn operations(manifests: &Path) -> std::path::PathBuf {
    let ops = manifests.join(".ichor").join("operations");
    std::fs::create_dir_all(&ops).unwrap();
    ops
}

#[test]
fn a_symlink_planted_at_the_old_temporary_name_is_neither_followed_nor_touched() {
    let dir = tempfile::tempdir().unwrap();
    let victim = victim_file(dir.path());
    let manifests = dir.path().join("manifests");
    let planted = operations(&manifests).join(".prod.yaml.tmp");
    symlink(&victim, &planted).unwrap();

    let store = FileOperationStore::new(&manifests);
    let op = new_operation("ichor-system", "prod", "abc123", &["prod-cp-1".to_owned()]);
    store.save(&op).unwrap();

    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        VICTIM,
        "the link's target is unchanged"
    );
    assert_eq!(
        std::fs::read_link(&planted).unwrap(),
        victim,
        "the planted link is left as it was"
    );
    let saved = store.load("prod").unwrap().expect("the record was saved");
    assert_eq!(saved.spec.cluster, "prod");
    let record = manifests.join(".ichor/operations/prod.yaml");
    let mode = std::fs::symlink_metadata(&record).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the record is private to its writer");
    let mut left: Vec<String> = std::fs::read_dir(manifests.join(".ichor/operations"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [".prod.yaml.tmp", "prod.yaml"],
        "no temporary file left behind"
    );
}

#[test]
fn a_symlink_planted_as_the_record_is_replaced_not_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let victim = victim_file(dir.path());
    let manifests = dir.path().join("manifests");
    let record = operations(&manifests).join("prod.yaml");
    symlink(&victim, &record).unwrap();

    let store = FileOperationStore::new(&manifests);
    let op = new_operation("ichor-system", "prod", "abc123", &["prod-cp-1".to_owned()]);
    store.save(&op).unwrap();

    assert_eq!(std::fs::read_to_string(&victim).unwrap(), VICTIM);
    assert!(
        !std::fs::symlink_metadata(&record)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the record is a file of its own now"
    );
}
