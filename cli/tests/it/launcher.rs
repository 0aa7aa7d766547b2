//! The `ichor` executable and `ichor-full` beside it: a fresh cached `ichor auth token` is
//! answered by `ichor` alone, byte for byte as `ichor-full` answers it, and every other command
//! line reaches `ichor-full` with its own usage messages and exit codes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use crate::{
    auth::{CACHED_TOKEN, fresh_exp, seed},
    support::{command_at, text, unreachable_issuer},
};

/// A copy of `ichor` alone in a directory, without `ichor-full` beside it.
fn lone_ichor(dir: &Path) -> PathBuf {
    let path = dir.join("ichor");
    std::fs::copy(env!("CARGO_BIN_EXE_ichor"), &path).unwrap();
    path
}

fn run(bin: &Path, home: &Path, args: &[&str]) -> std::process::Output {
    command_at(bin, home, args).output().unwrap()
}

#[test]
fn a_fresh_cached_token_is_answered_by_ichor_alone_as_ichor_full_answers_it() {
    let home = tempfile::tempdir().unwrap();
    let bin_dir = tempfile::tempdir().unwrap();
    let lone = lone_ichor(bin_dir.path());
    let issuer = unreachable_issuer();
    seed(
        home.path(),
        &issuer,
        "ichor-kube",
        CACHED_TOKEN,
        fresh_exp(),
        Some("r"),
    );
    let kubeconfig_args = [
        "auth",
        "token",
        "--issuer",
        &issuer,
        "--client-id",
        "ichor-cli",
        "--audience",
        "ichor-kube",
    ];
    let inline = format!("--issuer={issuer}");
    for args in [
        &kubeconfig_args[..],
        &["auth", "token", &inline, "--audience=ichor-kube"],
    ] {
        let alone = run(&lone, home.path(), args);
        assert!(alone.status.success(), "{args:?}: {}", text(&alone.stderr));
        assert_eq!(text(&alone.stderr), "");
        let full = run(Path::new(env!("CARGO_BIN_EXE_ichor-full")), home.path(), args);
        assert!(full.status.success(), "{}", text(&full.stderr));
        assert_eq!(alone.stdout, full.stdout, "{args:?}");
        assert!(text(&alone.stdout).contains(CACHED_TOKEN));
    }
}

#[test]
fn a_token_that_is_not_fresh_is_left_to_ichor_full_looked_up_beside_ichor_only() {
    let home = tempfile::tempdir().unwrap();
    let bin_dir = tempfile::tempdir().unwrap();
    let lone = lone_ichor(bin_dir.path());
    let issuer = unreachable_issuer();
    // 20 s left: under the 30 s margin, so a refresh is due and only ichor-full can do it.
    let exp = jiff::Timestamp::now().as_second() + 20;
    seed(home.path(), &issuer, "ichor-kube", CACHED_TOKEN, exp, Some("r"));
    // ichor-full is on PATH, but only the directory of `ichor` is looked in.
    let full_dir = Path::new(env!("CARGO_BIN_EXE_ichor-full")).parent().unwrap();
    let out = command_at(&lone, home.path(), &["auth", "token", "--issuer", &issuer])
        .env("PATH", full_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("cannot run") && stderr.contains("ichor-full"),
        "{stderr}"
    );
    assert!(
        stderr.contains("install ichor-full in the same directory as ichor"),
        "{stderr}"
    );
}

#[test]
fn other_command_lines_reach_ichor_full_with_its_messages_and_exit_codes() {
    let home = tempfile::tempdir().unwrap();
    let ichor = Path::new(env!("CARGO_BIN_EXE_ichor"));
    let version = run(ichor, home.path(), &["--version"]);
    assert!(version.status.success());
    assert_eq!(
        text(&version.stdout),
        format!("ichor {}\n", env!("CARGO_PKG_VERSION"))
    );
    // A usage error: clap's exit code 2, and the usage names `ichor` (argv[0] is kept).
    let missing = run(ichor, home.path(), &["auth", "token"]);
    assert_eq!(missing.status.code(), Some(2));
    let stderr = text(&missing.stderr);
    assert!(
        stderr.contains("Usage: ichor auth token") && stderr.contains("--issuer <URL>"),
        "{stderr}"
    );
    // An invalid issuer on the token command: ichor-full's own error, exit code 1.
    let insecure = run(
        ichor,
        home.path(),
        &["auth", "token", "--issuer", "http://ichor.example.com"],
    );
    assert_eq!(insecure.status.code(), Some(1));
    assert!(
        text(&insecure.stderr).contains("uses plain http"),
        "{}",
        text(&insecure.stderr)
    );
}
