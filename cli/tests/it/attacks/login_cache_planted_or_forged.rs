//! A login cache someone else shaped: kubectl runs `ichor auth token` before every command and
//! it answers from `~/.ichor/auth/` without the lock, so whatever sits there decides what the
//! user's kubectl sends, whether it runs at all, and what reaches its stderr (often a CI log).
//!
//! - A cache file others can read (0644) or that is hard-linked to another name is not one ichor
//!   wrote (every release creates it 0600 and renames it into place): it is refused with an
//!   error naming the file, and its token is not printed.
//! - A cache directory that is a link to a directory holding a valid login is not read from.
//! - A FIFO planted as the lock file is refused at once, naming it.
//! - A cached `exp` decades ahead does not keep a token in use until logout.
//! - A cache file that does not parse never has a fragment quoted on stderr.
#![cfg(unix)]

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::process::Output;

use ichor_cli::commands::auth::cache::{CacheDir, CacheKey};

use crate::support::{assert_no_secret, ichor, text, unreachable_issuer};
use crate::user_support::seed_login;

const TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJtYWxsb3J5In0.cGxhbnRlZC1zaWduYXR1cmU";
const REFRESH: &str = "refresh-secret-of-alice";

fn dir(home: &Path) -> CacheDir {
    CacheDir::new(home.join(".ichor/auth"))
}

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

/// `ichor auth token` as kubectl runs it in a script: no terminal, so no browser login.
fn token(home: &Path, issuer: &str) -> Output {
    ichor(home, &["auth", "token", "--issuer", issuer])
}

/// The run failed, printed no credential and no secret, and its error names `path` and says
/// to remove it (or, for a link, the link).
fn refused_naming(out: &Output, path: &Path, what: &str) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(text(&out.stdout), "", "no credential is printed");
    assert!(
        stderr.contains(&path.display().to_string())
            && stderr.contains(what)
            && (stderr.contains("remove it") || stderr.contains("remove the link")),
        "{stderr}"
    );
    assert_no_secret(&stderr, &[TOKEN.into(), REFRESH.into()]);
}

#[test]
fn a_readable_or_hard_linked_cache_file_is_refused_naming_it_and_its_token_is_not_printed() {
    let home = tempfile::tempdir().unwrap();
    let issuer = unreachable_issuer();
    seed_login(
        home.path(),
        &issuer,
        "ichor-kube",
        TOKEN,
        now() + 600,
        Some(REFRESH),
    );
    let file = dir(home.path()).file_for(&key(&issuer));
    let ok = token(home.path(), &issuer);
    assert!(ok.status.success(), "{}", text(&ok.stderr));

    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    refused_naming(&token(home.path(), &issuer), &file, "0644");

    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::hard_link(&file, home.path().join("other-name")).unwrap();
    refused_naming(&token(home.path(), &issuer), &file, "hard links");
    assert!(file.exists(), "the file is left for the user to look at");
}

#[test]
fn a_cache_directory_linked_to_one_holding_a_login_is_not_read_from() {
    let home = tempfile::tempdir().unwrap();
    let issuer = unreachable_issuer();
    let elsewhere = tempfile::tempdir().unwrap();
    seed_login(
        elsewhere.path(),
        &issuer,
        "ichor-kube",
        TOKEN,
        now() + 600,
        Some(REFRESH),
    );
    std::fs::create_dir(home.path().join(".ichor")).unwrap();
    let auth = home.path().join(".ichor/auth");
    symlink(elsewhere.path().join(".ichor/auth"), &auth).unwrap();

    let out = token(home.path(), &issuer);
    refused_naming(&out, &auth, "symbolic link");
    assert!(
        text(&out.stderr).contains(&format!("remove the link (`rm {}`", auth.display())),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_fifo_planted_as_the_lock_file_is_refused_at_once_naming_it() {
    let home = tempfile::tempdir().unwrap();
    let issuer = unreachable_issuer();
    // An expired login: the run takes the lock to refresh it.
    seed_login(
        home.path(),
        &issuer,
        "ichor-kube",
        TOKEN,
        now() - 60,
        Some(REFRESH),
    );
    let lock = dir(home.path()).file_for(&key(&issuer)).with_extension("lock");
    let made = std::process::Command::new("mkfifo").arg(&lock).status().unwrap();
    assert!(made.success());

    let started = std::time::Instant::now();
    let out = token(home.path(), &issuer);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    refused_naming(&out, &lock, "not a regular file");
}

/// Year 2100 would be printed as it is; year 9999 (past what an `ExecCredential` can carry)
/// would fail every run until logout. Both are refreshed or asked for again instead.
#[test]
fn a_cached_exp_decades_ahead_does_not_keep_its_token_in_use() {
    let home = tempfile::tempdir().unwrap();
    let issuer = unreachable_issuer();
    for exp in [4_102_444_800, 253_402_300_799] {
        seed_login(home.path(), &issuer, "ichor-kube", TOKEN, exp, None);
        let out = token(home.path(), &issuer);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_eq!(text(&out.stdout), "", "the token is not printed");
        assert!(stderr.contains("ichor auth login --issuer"), "{stderr}");
        assert_no_secret(&stderr, &[TOKEN.into()]);
    }
}

#[test]
fn a_cache_file_that_does_not_parse_never_has_its_tokens_quoted_on_stderr() {
    let home = tempfile::tempdir().unwrap();
    let issuer = unreachable_issuer();
    let cache = dir(home.path());
    cache.ensure().unwrap();
    let file = cache.file_for(&key(&issuer));
    // A token where a number belongs, and a refresh token as a field name: serde_json's own
    // messages quote both.
    let wrong_type = format!("{{\n  \"v\": 1,\n  \"idTokenExp\": \"{TOKEN}\"\n}}\n");
    let unknown_field = format!("{{\n  \"v\": 1,\n  \"{REFRESH}\": 1\n}}\n");
    for bytes in [wrong_type, unknown_field] {
        std::fs::write(&file, bytes).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let out = token(home.path(), &issuer);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("does not parse") && stderr.contains("line 3, column"),
            "{stderr}"
        );
        assert_no_secret(&stderr, &[TOKEN.into(), REFRESH.into(), "eyJ".into()]);
    }
}
