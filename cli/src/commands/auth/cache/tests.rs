#![allow(clippy::unwrap_used)]
use std::{fs, os::unix::fs::MetadataExt as _};

use rustix::fs::Mode;

use super::*;

pub(super) fn key() -> CacheKey {
    CacheKey {
        issuer: "https://i.example".into(),
        client_id: "ichor-cli".into(),
        audience: "ichor-kube".into(),
    }
}

/// Writes `bytes` to `path` as this ichor would: a file of this user, mode 0600.
pub(super) fn write_private(path: &Path, bytes: &[u8]) {
    use std::os::unix::fs::PermissionsExt;
    fs::write(path, bytes).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
}

pub(super) fn entry(exp: i64) -> CacheEntry {
    CacheEntry {
        v: CACHE_VERSION,
        issuer: "https://i.example".into(),
        client_id: "ichor-cli".into(),
        audience: "ichor-kube".into(),
        endpoints: None,
        subject: "alice".into(),
        groups: vec!["admin".into()],
        id_token: Secret::new("id.token.x".into()),
        id_token_exp: exp,
        refresh_token: Some(Secret::new("refresh-1".into())),
    }
}

#[test]
fn the_file_stem_is_a_sha256_that_separates_every_part() {
    let a = key();
    let mut b = key();
    b.issuer = "https://i.exampleichor-cli".into();
    b.client_id = String::new();
    assert_eq!(a.file_stem().len(), 64);
    assert_ne!(a.file_stem(), b.file_stem());
    let mut c = key();
    c.audience = "ichor-ui".into();
    assert_ne!(a.file_stem(), c.file_stem());
}

#[test]
fn a_token_is_fresh_only_with_thirty_seconds_left() {
    let now = Timestamp::from_second(1000).unwrap();
    assert!(entry(1030).is_fresh(now));
    assert!(!entry(1029).is_fresh(now));
    assert!(!entry(i64::MIN).is_fresh(now));
}

/// An `exp` further ahead than Ichor issues tokens for (an edited file, year 9999) would keep
/// a dead token in use until logout: it is treated as expired, so the login is refreshed.
#[test]
fn an_exp_further_ahead_than_any_token_ichor_issues_is_not_fresh() {
    let now = Timestamp::from_second(1_800_000_000).unwrap();
    let at = |ahead: i64| entry(now.as_second() + ahead);
    assert_eq!(MAX_TOKEN_TTL_SECONDS, 15 * 60);
    assert!(at(MAX_TOKEN_TTL_SECONDS).is_fresh(now));
    assert!(
        at(MAX_EXP_AHEAD_SECONDS).is_fresh(now),
        "a clock up to 5 min behind"
    );
    assert!(!at(MAX_EXP_AHEAD_SECONDS).exp_too_far_ahead(now));
    assert!(!at(MAX_EXP_AHEAD_SECONDS + 1).is_fresh(now));
    assert!(at(MAX_EXP_AHEAD_SECONDS + 1).exp_too_far_ahead(now));
    let year_9999 = 253_402_300_799;
    assert!(!entry(year_9999).is_fresh(now));
    assert!(!entry(i64::MAX).is_fresh(now));
}

#[cfg(unix)]
#[test]
fn a_stored_entry_is_0600_in_a_0700_directory_and_reads_back() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    let dir = CacheDir::new(home.path().join(".ichor/auth"));
    dir.store(&entry(2000)).unwrap();
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(dir.path()), 0o700);
    assert_eq!(mode(&home.path().join(".ichor")), 0o700);
    assert_eq!(mode(&dir.file_for(&key())), 0o600);
    match dir.load(&key()) {
        Loaded::Usable(e) => assert_eq!(*e, entry(2000)),
        other => panic!("{other:?}"),
    }
}

/// Files someone else planted where this login's cache file goes: a link to a fresh entry
/// elsewhere, a FIFO (which a plain open would wait on forever), a group-writable file.
#[cfg(unix)]
#[test]
fn a_planted_link_fifo_or_shared_file_is_unusable_not_followed_or_waited_on() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let home = tempfile::tempdir().unwrap();
    let dir = CacheDir::new(home.path().join("auth"));
    dir.ensure().unwrap();
    let elsewhere = home.path().join("planted.json");
    fs::write(&elsewhere, serde_json::to_vec(&entry(i64::MAX)).unwrap()).unwrap();
    fs::set_permissions(&elsewhere, fs::Permissions::from_mode(0o600)).unwrap();
    let file = dir.file_for(&key());

    symlink(&elsewhere, &file).unwrap();
    assert!(matches!(
        dir.load(&key()),
        Loaded::Unusable(UnusableCache::NotPrivate(_))
    ));
    fs::remove_file(&file).unwrap();

    let made = std::process::Command::new("mkfifo").arg(&file).status().unwrap();
    assert!(made.success());
    assert!(matches!(
        dir.load(&key()),
        Loaded::Unusable(UnusableCache::NotPrivate(_))
    ));
    fs::remove_file(&file).unwrap();

    fs::copy(&elsewhere, &file).unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o620)).unwrap();
    assert!(matches!(
        dir.load(&key()),
        Loaded::Unusable(UnusableCache::NotPrivate(_))
    ));
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
    assert!(
        matches!(dir.load(&key()), Loaded::Usable(_)),
        "the same file, private, is read"
    );

    let meta = fs::metadata(&file).unwrap();
    assert_eq!(files::private_file(&meta, meta.uid()), Ok(()));
    assert!(
        files::private_file(&meta, meta.uid() + 1).is_err(),
        "another user's file is refused"
    );
}

#[cfg(unix)]
#[test]
fn a_linked_cache_directory_and_a_linked_lock_file_are_refused() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let home = tempfile::tempdir().unwrap();
    let target = home.path().join("public");
    fs::create_dir(&target).unwrap();
    fs::set_permissions(&target, fs::Permissions::from_mode(0o755)).unwrap();
    let linked = home.path().join("auth");
    symlink(&target, &linked).unwrap();
    assert!(CacheDir::new(linked).ensure().is_err());
    assert_eq!(
        fs::metadata(&target).unwrap().permissions().mode() & 0o777,
        0o755,
        "the link's target is not narrowed"
    );

    let dir = CacheDir::new(home.path().join("real"));
    dir.ensure().unwrap();
    let victim = home.path().join("victim");
    symlink(&victim, dir.lock_file_for(&key())).unwrap();
    assert!(dir.lock(&key()).is_err());
    assert!(!victim.exists(), "nothing is created through the link");
}

#[cfg(unix)]
#[test]
fn an_existing_wide_directory_is_narrowed_to_0700() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("auth");
    fs::create_dir(&path).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    CacheDir::new(path.clone()).ensure().unwrap();
    assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o700);
}

#[test]
fn a_write_replaces_the_file_by_rename_and_leaves_no_temporary_file() {
    let home = tempfile::tempdir().unwrap();
    let dir = CacheDir::new(home.path().join("auth"));
    dir.store(&entry(1)).unwrap();
    let file = dir.file_for(&key());
    // A hard link keeps the old inode: an in-place rewrite would change what it shows.
    let old = home.path().join("old-link");
    fs::hard_link(&file, &old).unwrap();
    dir.store(&entry(2)).unwrap();
    assert_eq!(parse(&fs::read(&old).unwrap()).unwrap().id_token_exp, 1);
    assert_eq!(parse(&fs::read(&file).unwrap()).unwrap().id_token_exp, 2);
    let names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, [format!("{}.json", key().file_stem())]);
}

#[test]
fn corrupt_oversized_foreign_and_other_version_files_are_unusable_not_panics() {
    let home = tempfile::tempdir().unwrap();
    let dir = CacheDir::new(home.path().join("auth"));
    dir.ensure().unwrap();
    let file = dir.file_for(&key());
    let mut other_version = serde_json::to_value(entry(1)).unwrap();
    other_version["v"] = 2.into();
    let mut unknown = serde_json::to_value(entry(1)).unwrap();
    unknown["extra"] = 1.into();
    let mut foreign = entry(1);
    foreign.audience = "ichor-ui".into();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"{not json".to_vec(), "does not parse"),
        (vec![b' '; MAX_CACHE_BYTES as usize + 1], "larger than"),
        (serde_json::to_vec(&other_version).unwrap(), "v is 2"),
        (serde_json::to_vec(&unknown).unwrap(), "a field is unknown"),
        (serde_json::to_vec(&foreign).unwrap(), "another login"),
        (Vec::new(), "does not parse"),
    ];
    for (bytes, needle) in cases {
        write_private(&file, &bytes);
        match dir.load(&key()) {
            Loaded::Unusable(reason) => {
                assert!(reason.to_string().contains(needle), "{needle}: {reason}")
            }
            other => panic!("{needle}: {other:?}"),
        }
    }
    fs::remove_file(&file).unwrap();
    assert!(matches!(dir.load(&key()), Loaded::Absent));
}

#[test]
fn list_returns_only_cache_files_and_reports_unusable_ones() {
    let home = tempfile::tempdir().unwrap();
    let dir = CacheDir::new(home.path().join("auth"));
    assert!(dir.list().unwrap().is_empty());
    dir.store(&entry(1)).unwrap();
    let _lock = dir.lock(&key()).unwrap();
    fs::write(dir.path().join(format!("{}.json", "a".repeat(64))), b"junk").unwrap();
    fs::write(dir.path().join("notes.json"), b"{}").unwrap();
    let listed = dir.list().unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed.iter().filter(|l| l.entry.is_ok()).count(), 1);
}

#[test]
fn the_secret_values_never_show_in_debug_output() {
    let text = format!("{:?}", entry(1));
    assert!(
        !text.contains("id.token.x") && !text.contains("refresh-1"),
        "{text}"
    );
}

/// A cache file others may read (0644) or that shares its inode with another name (a hard
/// link, rewritable there) is not one this ichor wrote: every release creates it 0600 and
/// renames it into place. It is refused with what is wrong, and the locked path's error names
/// the file and says to remove it.
#[cfg(unix)]
#[test]
fn a_readable_or_hard_linked_cache_file_is_refused_saying_what_is_wrong() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    let dir = CacheDir::new(home.path().join("auth"));
    dir.store(&entry(2000)).unwrap();
    let file = dir.file_for(&key());

    fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
    let Loaded::Unusable(reason) = dir.load(&key()) else {
        panic!("a 0644 file is used");
    };
    assert!(matches!(
        reason,
        UnusableCache::NotPrivate(Unsafe::SharedFile { mode: 0o644 })
    ));
    let refusal = dir.refusal(&key(), &reason).unwrap().to_string();
    assert!(
        refusal.contains(&file.display().to_string())
            && refusal.contains("0644")
            && refusal.contains("remove it"),
        "{refusal}"
    );

    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
    fs::hard_link(&file, home.path().join("elsewhere")).unwrap();
    assert!(matches!(
        dir.load(&key()),
        Loaded::Unusable(UnusableCache::NotPrivate(Unsafe::HardLinked(2)))
    ));
    fs::remove_file(home.path().join("elsewhere")).unwrap();
    assert!(matches!(dir.load(&key()), Loaded::Usable(_)));

    let reason = UnusableCache::TooLarge;
    assert!(
        dir.refusal(&key(), &reason).is_none(),
        "a corrupt file is replaced, not refused"
    );
}

/// The fast path reads without the lock, so it checks the directory as the write path does: a
/// link to a directory holding a valid entry, a directory others can write into, another user's
/// directory are not read from, and a read creates nothing.
#[cfg(unix)]
#[test]
fn the_read_path_checks_the_directory_and_creates_nothing() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let home = tempfile::tempdir().unwrap();
    let planted = CacheDir::new(home.path().join("planted"));
    planted.store(&entry(2000)).unwrap();
    assert!(matches!(planted.load(&key()), Loaded::Usable(_)));

    let linked = CacheDir::new(home.path().join("auth"));
    symlink(planted.path(), linked.path()).unwrap();
    assert!(matches!(
        linked.load(&key()),
        Loaded::Unusable(UnusableCache::Directory {
            problem: Unsafe::Link,
            ..
        })
    ));
    assert!(linked.list().is_err(), "status and logout refuse it too");

    fs::set_permissions(planted.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let Loaded::Unusable(reason) = planted.load(&key()) else {
        panic!("a world-writable directory is read from");
    };
    assert!(matches!(
        reason,
        UnusableCache::Directory {
            problem: Unsafe::WritableDirectory { mode: 0o777 },
            ..
        }
    ));
    let refusal = planted.refusal(&key(), &reason).unwrap().to_string();
    assert!(
        refusal.contains(&planted.path().display().to_string()),
        "{refusal}"
    );

    let meta = fs::metadata(planted.path()).unwrap();
    assert!(matches!(
        files::private_dir(&meta, meta.uid() + 1),
        Err(Unsafe::OtherOwner { .. })
    ));
    fs::set_permissions(planted.path(), fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(
        files::private_dir(&fs::metadata(planted.path()).unwrap(), meta.uid()),
        Ok(())
    );

    let absent = CacheDir::new(home.path().join("none/auth"));
    assert!(matches!(absent.load(&key()), Loaded::Absent));
    assert!(absent.list().unwrap().is_empty());
    assert!(!home.path().join("none").exists(), "a read creates nothing");
}

/// A FIFO, a file others can use, or a hard link planted as the lock file: a FIFO opened
/// without O_NONBLOCK blocks, and any lock file another process holds blocks `flock` for as
/// long as it likes. Each is refused at once, naming the file.
#[cfg(unix)]
#[test]
fn a_planted_lock_file_is_refused_at_once_naming_it() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    let dir = CacheDir::new(home.path().join("auth"));
    dir.ensure().unwrap();
    let lock = dir.lock_file_for(&key());
    let refused = |expect: &str| {
        let started = std::time::Instant::now();
        let err = dir
            .lock_within(&key(), Duration::from_secs(5), &mut |_| panic!("waited"))
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2), "refused at once");
        assert!(matches!(err, AuthError::CacheUnsafe { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains(&lock.display().to_string()) && text.contains(expect) && text.contains("remove it"),
            "{text}"
        );
    };

    let made = std::process::Command::new("mkfifo").arg(&lock).status().unwrap();
    assert!(made.success());
    refused("not a regular file");
    fs::remove_file(&lock).unwrap();

    fs::write(&lock, b"").unwrap();
    fs::set_permissions(&lock, fs::Permissions::from_mode(0o666)).unwrap();
    refused("0666");
    fs::set_permissions(&lock, fs::Permissions::from_mode(0o600)).unwrap();
    fs::hard_link(&lock, home.path().join("elsewhere")).unwrap();
    refused("hard links");
    fs::remove_file(home.path().join("elsewhere")).unwrap();

    let taken = dir.lock_within(&key(), Duration::ZERO, &mut |_| panic!("waited"));
    assert!(taken.is_ok(), "the same file, private and alone, is used");
}

/// A run that finds the lock held (a browser sign-in of another run) says once which lock it
/// waits for and gives up at its deadline with an error naming the lock file; once the lock is
/// free it is taken without a word.
#[test]
fn a_held_lock_is_waited_for_with_one_notice_then_given_up_naming_the_lock_file() {
    let home = tempfile::tempdir().unwrap();
    let dir = CacheDir::new(home.path().join("auth"));
    let held = dir.lock(&key()).unwrap();
    let lock = dir.lock_file_for(&key());

    let mut notices = Vec::new();
    let started = std::time::Instant::now();
    let err = dir
        .lock_within(&key(), Duration::from_secs(1), &mut |p| {
            notices.push(p.to_owned())
        })
        .unwrap_err();
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(1) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    assert_eq!(
        notices,
        std::slice::from_ref(&lock),
        "one notice, naming the lock file"
    );
    assert!(matches!(err, AuthError::LockTimeout { seconds: 1, .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains(&lock.display().to_string()), "{text}");
    // A flock ends with the process holding it: removing the file would free nothing.
    assert!(
        text.contains("another ichor process") && text.contains("end it") && !text.contains("remove"),
        "{text}"
    );

    drop(held);
    let mut told = false;
    let _taken = dir
        .lock_within(&key(), Duration::from_secs(1), &mut |_| told = true)
        .unwrap();
    assert!(!told);
    assert!(
        LOCK_WAIT > DEFAULT_LOGIN_TIMEOUT,
        "a run waits out a browser sign-in"
    );
}

/// A parser's message quotes the input ("invalid type: string \"eyJ…\"", "unknown field
/// `…`"), and the input holds tokens: the error names the line and column only.
#[test]
fn a_parse_error_names_the_line_and_column_and_never_quotes_the_file() {
    let secret = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0.c2ln";
    let mut wrong_type = serde_json::to_value(entry(1)).unwrap();
    wrong_type["idTokenExp"] = secret.into();
    let mut unknown = serde_json::to_value(entry(1)).unwrap();
    unknown[secret] = 1.into();
    let cases: Vec<Vec<u8>> = vec![
        serde_json::to_vec_pretty(&wrong_type).unwrap(),
        serde_json::to_vec_pretty(&unknown).unwrap(),
        format!("{{\"v\": 1, \"idToken\": \"{secret}\" junk").into_bytes(),
        format!("{{\"v\": \"{secret}\"}}").into_bytes(),
        format!("{{\"v\": 1, \"idToken\": \"{secret}").into_bytes(),
    ];
    for bytes in cases {
        let text = parse(&bytes).unwrap_err().to_string();
        assert!(!text.contains("eyJ") && !text.contains("c2Vj"), "{text}");
        assert!(
            text.contains("does not parse") && text.contains(", column "),
            "{text}"
        );
    }
}

/// A process that can write into `~/.ichor` swaps `auth` for a link to a directory it reads,
/// between the check and the write of a refreshed token: the token still goes into the
/// directory that was checked, through its descriptor, and nothing lands in the planted one.
#[test]
fn a_cache_directory_swapped_for_a_link_during_a_refresh_receives_no_token() {
    use std::os::unix::fs::{PermissionsExt as _, symlink};
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("auth");
    let dir = CacheDir::new(path.clone());
    let checked = dir.ensure().unwrap();
    let planted = home.path().join("planted");
    fs::create_dir(&planted).unwrap();
    fs::set_permissions(&planted, fs::Permissions::from_mode(0o777)).unwrap();
    let moved = home.path().join("moved");
    fs::rename(&path, &moved).unwrap();
    symlink(&planted, &path).unwrap();

    dir.store_in(&checked, &entry(7)).unwrap();

    assert_eq!(
        fs::read_dir(&planted).unwrap().count(),
        0,
        "nothing lands in the planted directory"
    );
    let file = moved.join(format!("{}.json", key().file_stem()));
    assert_eq!(parse(&fs::read(&file).unwrap()).unwrap().id_token_exp, 7);
    assert_eq!(fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    // The next run refuses the link instead of following it.
    let refused = dir.ensure().unwrap_err();
    assert!(
        matches!(
            refused,
            AuthError::CacheUnsafe {
                problem: Unsafe::Link,
                ..
            }
        ),
        "{refused}"
    );
    assert!(refused.to_string().contains("remove the link"), "{refused}");
}

/// `auth` swapped for a FIFO after the check: the write's directory sync goes through the
/// descriptor, never opens the name, and so never waits on the FIFO while holding the lock.
#[test]
fn a_fifo_swapped_in_as_the_directory_after_the_check_does_not_hang_a_write() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("auth");
    let dir = CacheDir::new(path.clone());
    let checked = dir.ensure().unwrap();
    let moved = home.path().join("moved");
    fs::rename(&path, &moved).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &path,
        rustix::fs::FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();

    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(dir.store_in(&checked, &entry(8)).is_ok()));
    // A write that opened the FIFO would wait here for a writer that never comes.
    let stored = finished
        .recv_timeout(Duration::from_secs(20))
        .expect("the write did not hang");
    assert!(stored);
    let file = moved.join(format!("{}.json", key().file_stem()));
    assert_eq!(parse(&fs::read(&file).unwrap()).unwrap().id_token_exp, 8);
}

/// Removal goes through the listed directory and only takes this directory's cache files.
#[test]
fn a_removal_takes_only_a_cache_file_of_this_directory() {
    let home = tempfile::tempdir().unwrap();
    let dir = CacheDir::new(home.path().join("auth"));
    dir.store(&entry(1)).unwrap();
    let other = home.path().join(format!("{}.json", key().file_stem()));
    write_private(&other, b"keep");
    let listing = dir.listing().unwrap();
    for path in [other.clone(), dir.path().join("notes.txt"), dir.path().join("..")] {
        assert!(
            matches!(
                listing.remove(&path),
                Err(AuthError::CacheIo { action: "delete", .. })
            ),
            "{}",
            path.display()
        );
    }
    assert_eq!(fs::read(&other).unwrap(), b"keep");
    listing.remove(&dir.file_for(&key())).unwrap();
    assert!(!dir.file_for(&key()).exists());
    listing.remove(&dir.file_for(&key())).unwrap();
    let absent = CacheDir::new(home.path().join("absent/auth"));
    absent
        .listing()
        .unwrap()
        .remove(&absent.file_for(&key()))
        .unwrap();
    let lock = dir.lock(&key()).unwrap();
    dir.store(&entry(1)).unwrap();
    lock.remove().unwrap();
    assert!(!dir.file_for(&key()).exists());
    lock.remove().unwrap();
}
