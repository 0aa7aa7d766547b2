//! The login cache as the real `ichor auth token` meets it: `~/.ichor` made by hand under
//! umask 002 and linked into a dotfiles directory still works (narrowed, said on stderr only,
//! not refused); a newer ichor's cache file is kept, not deleted; refreshed tokens that cannot be
//! saved (a full disk) are still printed, with the outdated login removed so the next run does
//! not present a retired refresh token; and a `~/.ichor` that `sudo ichor` made, a cache file
//! whose mode denies its user, or root run with another user's `HOME` each say what to do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    os::unix::fs::{MetadataExt as _, PermissionsExt as _, symlink},
    path::Path,
    process::{Command, Output},
};

use ichor_cli::commands::auth::cache::{CACHE_VERSION, CacheKey, Loaded};

use crate::auth::{CACHED_TOKEN, seed};
use crate::support::{FakeOp, assert_no_secret, command_at, text, unreachable_issuer};

fn key(issuer: &str) -> CacheKey {
    CacheKey {
        issuer: issuer.into(),
        client_id: "ichor-cli".into(),
        audience: "ichor-kube".into(),
    }
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// `ichor auth token --issuer <issuer>` run by `sh` after `prelude` (a umask, a limit).
fn token_after(home: &Path, prelude: &str, issuer: &str) -> Output {
    let script = format!("{prelude}\nexec \"$0\" \"$@\"");
    command_at(
        Path::new("/bin/sh"),
        home,
        &[
            "-c",
            &script,
            env!("CARGO_BIN_EXE_ichor"),
            "auth",
            "token",
            "--issuer",
            issuer,
        ],
    )
    .output()
    .unwrap()
}

/// The uid the runs as a user take (no account of that number is needed).
const USER: u32 = 4242;

/// Whether this test runs as root: only root can hand files to [`USER`] and run as it.
fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn chown_r(path: &Path, uid: u32) {
    let done = Command::new("chown")
        .arg("-R")
        .arg(uid.to_string())
        .arg(path)
        .status()
        .unwrap();
    assert!(done.success());
}

/// `ichor-full auth token --issuer <issuer>` run as [`USER`] (by `setpriv`, from root) with
/// `HOME=home`, which must be reachable by that user. `ichor-full` is linked (or copied) into
/// `home/bin`, as the build directory may not be; `ichor` would exec it for this run anyway.
fn token_as_user(home: &Path, issuer: &str) -> Output {
    let bin = home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let full = bin.join("ichor-full");
    if !full.exists() && std::fs::hard_link(env!("CARGO_BIN_EXE_ichor-full"), &full).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_ichor-full"), &full).unwrap();
    }
    let user = USER.to_string();
    let full = full.to_str().unwrap();
    command_at(
        Path::new("setpriv"),
        home,
        &[
            "--reuid",
            &user,
            "--regid",
            &user,
            "--clear-groups",
            "--",
            full,
            "auth",
            "token",
            "--issuer",
            issuer,
        ],
    )
    .current_dir(home)
    .output()
    .unwrap()
}

fn stdout_token(out: &Output) -> String {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["status"]["token"].as_str().unwrap().to_owned()
}

/// Dotfiles linked from a repository, a `~/.ichor` made by hand under umask 002 (0775): the
/// refresh runs, `~/.ichor`'s target loses group write only, and the next run is served from the
/// cache.
#[test]
fn a_linked_group_writable_ichor_directory_under_umask_002_is_narrowed_and_used() {
    let op = FakeOp::start();
    let home = tempfile::tempdir().unwrap();
    let target = home.path().join("dotfiles/ichor");
    std::fs::create_dir_all(&target).unwrap();
    symlink(&target, home.path().join(".ichor")).unwrap();
    op.state.seed_refresh("seeded-refresh-token");
    seed(
        home.path(),
        op.issuer(),
        "ichor-kube",
        CACHED_TOKEN,
        now() - 10,
        Some("seeded-refresh-token"),
    );
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o775)).unwrap();

    let out = token_after(home.path(), "umask 002", op.issuer());
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_no_secret(&stderr, &op.state.secrets());
    let notice = format!(
        "ichor: narrowed {} from 0775 to 0755: other users could replace your login cache",
        home.path().join(".ichor").display()
    );
    assert_eq!(stderr.matches(&notice).count(), 1, "{stderr}");
    // stdout is kubectl's: the ExecCredential alone.
    let stdout = text(&out.stdout);
    assert!(!stdout.contains("narrowed"), "{stdout}");
    let fresh = stdout_token(&out);
    assert_ne!(fresh, CACHED_TOKEN);
    assert_eq!(mode(&target), 0o755);
    let file = target
        .join("auth")
        .join(format!("{}.json", key(op.issuer()).file_stem()));
    assert_eq!(mode(&file), 0o600);

    let again = token_after(home.path(), "umask 002", op.issuer());
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(
        !text(&again.stderr).contains("narrowed"),
        "said once, when narrowed"
    );
    assert_eq!(stdout_token(&again), fresh);
    assert_eq!(
        op.state.refresh_hits(),
        1,
        "the second run is served from the cache"
    );
}

/// A cache file of a format this ichor does not read was written by a newer ichor: it is kept as
/// it is (that ichor's login), and the error says so and how to replace it.
#[test]
fn a_cache_file_a_newer_ichor_wrote_is_kept_and_the_error_says_so() {
    let home = tempfile::tempdir().unwrap();
    let issuer = unreachable_issuer();
    let entry = seed(
        home.path(),
        &issuer,
        "ichor-kube",
        CACHED_TOKEN,
        now() - 10,
        Some("refresh-of-a-newer-ichor"),
    );
    let mut newer = serde_json::to_value(&entry).unwrap();
    newer["v"] = (CACHE_VERSION + 1).into();
    let file = crate::user_support::cache_dir(home.path()).file_for(&key(&issuer));
    let bytes = serde_json::to_vec(&newer).unwrap();
    std::fs::write(&file, &bytes).unwrap();

    let out = token_after(home.path(), ":", &issuer);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains("written by a newer ichor")
            && stderr.contains(&file.display().to_string())
            && stderr.contains(&format!("ichor auth login --issuer {issuer}")),
        "{stderr}"
    );
    assert_no_secret(&stderr, &[CACHED_TOKEN.into(), "refresh-of-a-newer-ichor".into()]);
    assert_eq!(std::fs::read(&file).unwrap(), bytes, "the file is kept as it was");
}

/// The disk is full when the refreshed tokens are stored (a file size limit of 0 stands in for
/// it: every write to a file fails with EFBIG). The issuer has already rotated the refresh token,
/// so the new ID token is still printed, the warning names what the next run needs and holds no
/// token, and the cache file with the retired refresh token is gone.
#[test]
fn refreshed_tokens_that_cannot_be_saved_are_printed_and_the_outdated_login_removed() {
    let op = FakeOp::start();
    let home = tempfile::tempdir().unwrap();
    op.state.seed_refresh("seeded-refresh-token");
    seed(
        home.path(),
        op.issuer(),
        "ichor-kube",
        CACHED_TOKEN,
        now() - 10,
        Some("seeded-refresh-token"),
    );
    let dir = crate::user_support::cache_dir(home.path());
    let file = dir.file_for(&key(op.issuer()));

    // SIGXFSZ ignored (kept across exec), so the write fails instead of killing the process.
    let out = token_after(home.path(), "trap '' XFSZ\nulimit -f 0", op.issuer());
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let fresh = stdout_token(&out);
    assert_ne!(fresh, CACHED_TOKEN);
    assert_eq!(op.state.refresh_hits(), 1);
    assert!(
        stderr.contains("could not be saved")
            && stderr.contains(&format!("ichor auth login --issuer {}", op.issuer())),
        "{stderr}"
    );
    let mut secrets = op.state.secrets();
    secrets.push(CACHED_TOKEN.into());
    assert_no_secret(&stderr, &secrets);
    assert!(
        !file.exists(),
        "the login holding the retired refresh token is removed"
    );
    assert!(matches!(dir.load(&key(op.issuer())), Loaded::Absent));
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(left.is_empty(), "no temporary file is left: {left:?}");
}

/// A home holding a seeded login for an unreachable issuer, and that issuer, when this test runs
/// as root (which these tests need to hand files to another user and run as it); else `None`,
/// said as skipped with `needs`.
fn seeded_home_as_root(needs: &str) -> Option<(tempfile::TempDir, String)> {
    if !is_root() {
        eprintln!("skipped: {needs}");
        return None;
    }
    let home = tempfile::tempdir().unwrap();
    let issuer = unreachable_issuer();
    seed(
        home.path(),
        &issuer,
        "ichor-kube",
        CACHED_TOKEN,
        now() - 10,
        Some("rt"),
    );
    Some((home, issuer))
}

/// `sudo ichor auth login` with the user's `HOME` made `~/.ichor` root's (0700): the user's next
/// run is denied opening it, and says whose it is and how to take it back, naming it, instead of a
/// bare "Permission denied".
#[test]
fn an_ichor_directory_made_by_sudo_says_whose_it_is_and_how_to_take_it_back() {
    let Some((home, issuer)) =
        seeded_home_as_root("needs root to make a directory of root's and run as another user")
    else {
        return;
    };
    rustix::fs::chown(home.path(), Some(rustix::fs::Uid::from_raw(USER)), None).unwrap();

    let out = token_as_user(home.path(), &issuer);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty());
    let ichor = home.path().join(".ichor");
    assert!(
        stderr.contains(&format!(
            "{} is owned by root (uid 0), not you (uid {USER})",
            ichor.display()
        )) && stderr.contains(&format!("`sudo chown -R {USER} {}`", ichor.display()))
            && !stderr.contains("os error"),
        "{stderr}"
    );
    assert_no_secret(&stderr, &[CACHED_TOKEN.into(), "rt".into()]);
}

/// A cache file of the user whose mode denies the user (0200): not a read error retried in
/// silence on every run, but an error naming the file and the `chmod` that fixes it; the login
/// in it is kept.
#[test]
fn a_cache_file_whose_mode_denies_its_user_says_how_to_fix_it_and_is_kept() {
    let Some((home, issuer)) = seeded_home_as_root("needs root to run as another user") else {
        return;
    };
    chown_r(home.path(), USER);
    let file = crate::user_support::cache_dir(home.path()).file_for(&key(&issuer));
    let bytes = std::fs::read(&file).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o200)).unwrap();

    let out = token_as_user(home.path(), &issuer);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains(&format!("login cache {}: permission denied", file.display()))
            && stderr.contains(&format!("`chmod 600 {}`", file.display()))
            && !stderr.contains("try again"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), bytes, "the login is kept");
    assert_no_secret(&stderr, &[CACHED_TOKEN.into(), "rt".into()]);
}

/// `sudo ichor auth token` without `-H`: root, with the user's `HOME`. Told to chown, root would
/// take the user's cache; it is told to run without sudo (or with `sudo -H`) instead, and the
/// user's directory is left as it is.
#[test]
fn root_with_another_users_home_is_told_to_drop_sudo_and_changes_nothing() {
    let Some((home, issuer)) = seeded_home_as_root("needs root") else {
        return;
    };
    let ichor = home.path().join(".ichor");
    chown_r(&ichor, USER);

    let out = token_after(home.path(), ":", &issuer);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains(&ichor.display().to_string())
            && stderr.contains("running as root with another user's HOME")
            && stderr.contains("sudo -H")
            && !stderr.contains("chown"),
        "{stderr}"
    );
    let file = crate::user_support::cache_dir(home.path()).file_for(&key(&issuer));
    for path in [&ichor, &file] {
        assert_eq!(std::fs::metadata(path).unwrap().uid(), USER, "{}", path.display());
    }
}
