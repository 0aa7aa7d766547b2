//! The `ichor-controller` binary's `replay` and `gen-journal` against the library: the summary
//! printed is the replay's, a journal that cannot be opened is named, and a build without the
//! `sim` feature says how to get the generator instead of writing a journal.

use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;
use std::process::Command;

use ichor_controller_core::identity::{Controller, replay_with};
use ichor_graph::JournalReader;

fn golden_journal() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../golden/journals/fresh-install.jsonl")
}

#[test]
fn replay_summary_is_the_library_replay_of_the_journal() {
    let journal = golden_journal();
    let out = Command::new(env!("CARGO_BIN_EXE_ichor-controller"))
        .args(["replay", "--summary"])
        .arg(&journal)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut controller = Controller::new().unwrap();
    let report = replay_with(
        JournalReader::new(BufReader::new(File::open(&journal).unwrap())),
        &mut controller,
        false,
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("{}\n", report.summary())
    );
    assert!(String::from_utf8(out.stderr).unwrap().starts_with("replayed "));
}

#[test]
fn replay_of_a_missing_journal_names_it_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("absent.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_ichor-controller"))
        .arg("replay")
        .arg(&missing)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.starts_with(&format!("error: cannot open journal {}: ", missing.display())),
        "{stderr}"
    );
}

#[cfg(not(feature = "sim"))]
#[test]
fn gen_journal_without_the_simulation_says_how_to_build_it_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("j.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_ichor-controller"))
        .args(["gen-journal", "--events", "10"])
        .arg(&out_path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("--features sim"), "{stderr}");
    assert!(!out_path.exists());
}
