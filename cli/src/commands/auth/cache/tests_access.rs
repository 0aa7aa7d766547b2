//! What a run is told when it may not open the cache (another user's directory, a file whose
//! mode denies it, a socket), when `~/.ichor` is narrowed, and when a write is in place but not
//! synced.
#![allow(clippy::unwrap_used)]

use std::{
    fs,
    os::unix::fs::{MetadataExt as _, PermissionsExt as _},
};

use rustix::{fs::AtFlags, io::Errno};

use super::{
    dirs::{Access, DirError, Narrowed},
    lock::{Disposition, disposition},
    tests::{entry, key},
    *,
};

const LOGIN: &str = "ichor auth login --issuer https://i.example";

/// `sudo ichor …` made `~/.ichor` (root's, 0700): the user's open is denied. Denied on another
/// user's directory is that directory being theirs, which says whose and what to do; denied on
/// the user's own directory, or another error, stays the operating system's answer.
#[test]
fn permission_denied_on_another_users_directory_says_whose_it_is() {
    let path = Path::new("/home/ann/.ichor");
    for errno in [Errno::ACCESS, Errno::PERM] {
        let DirError::Unsafe { path: p, problem } = dirs::open_failure(path, "open", errno, Some(0), 1000)
        else {
            panic!("{errno:?} is an I/O error");
        };
        assert_eq!(
            (p.as_path(), problem),
            (path, Unsafe::OtherOwner { owner: 0, you: 1000 })
        );
    }
    for (errno, owner) in [
        (Errno::ACCESS, Some(1000)),
        (Errno::ACCESS, None),
        (Errno::IO, Some(0)),
    ] {
        assert!(
            matches!(
                dirs::open_failure(path, "open", errno, owner, 1000),
                DirError::Io { .. }
            ),
            "{errno:?} {owner:?}"
        );
    }

    let dir = CacheDir::new(path.join("auth")).seen_by(1000);
    let err = dir.dir_error(dirs::open_failure(path, "open", Errno::ACCESS, Some(0), 1000));
    assert!(matches!(err, AuthError::CacheNotYours { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("/home/ann/.ichor is owned by root (uid 0), not you (uid 1000)")
            && text.contains("`sudo chown -R 1000 /home/ann/.ichor`")
            && !text.contains("os error"),
        "{text}"
    );
}

/// A socket where the cache file goes answers `ENXIO` to an open: not a read error to retry
/// forever, but a file ichor never makes, refused naming it and kept.
#[test]
fn a_socket_as_the_cache_file_is_refused_not_retried() {
    let home = tempfile::tempdir().unwrap();
    let dir = CacheDir::new(home.path().join("auth"));
    let lock = dir.lock(&key()).unwrap();
    let file = dir.file_for(&key());
    let _socket = std::os::unix::net::UnixListener::bind(&file).unwrap();
    let Loaded::Unusable(reason) = dir.load(&key()) else {
        panic!("a socket is read");
    };
    assert!(
        matches!(reason, UnusableCache::NotPrivate(Unsafe::NotRegular)),
        "{reason}"
    );
    let err = lock.settle(reason, LOGIN).unwrap_err();
    assert!(matches!(err, AuthError::CacheUnsafe { .. }), "{err}");
    assert!(err.to_string().contains(&file.display().to_string()), "{err}");
    assert!(file.exists(), "refused, not removed");
}

/// A cache file of this user whose mode denies this user (`EACCES`): refused with its mode and
/// the `chmod` that fixes it, and kept (the login in it is good). Another user's file denied is
/// that user's file. Root is never denied, so the errno is given here; the file is real.
#[test]
fn a_cache_file_whose_mode_denies_you_says_how_to_fix_it_and_is_kept() {
    let home = tempfile::tempdir().unwrap();
    let dir = CacheDir::new(home.path().join("auth"));
    let lock = dir.lock(&key()).unwrap();
    lock.store(&entry(2000)).unwrap();
    let file = dir.file_for(&key());
    fs::set_permissions(&file, fs::Permissions::from_mode(0o200)).unwrap();
    let stat = rustix::fs::statat(
        &lock.dir,
        lock.file().file_name().unwrap(),
        AtFlags::SYMLINK_NOFOLLOW,
    )
    .unwrap();
    let you = fs::metadata(&file).unwrap().uid();

    let reason = files::open_failure(Errno::ACCESS, Some(&stat), you);
    assert!(
        matches!(reason, UnusableCache::Denied { mode: 0o200 }),
        "{reason}"
    );
    assert_eq!(disposition(&reason), Disposition::Refuse);
    let err = lock.settle(reason, LOGIN).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, AuthError::CacheDenied { .. })
            && text.contains(&file.display().to_string())
            && text.contains("0200")
            && text.contains(&format!("`chmod 600 {}`", file.display())),
        "{text}"
    );
    assert!(file.exists(), "the login is kept");

    assert!(matches!(
        files::open_failure(Errno::ACCESS, Some(&stat), you + 1),
        UnusableCache::NotPrivate(Unsafe::OtherOwner { .. })
    ));
    assert!(matches!(
        files::open_failure(Errno::IO, Some(&stat), you),
        UnusableCache::Read(_)
    ));
    assert!(matches!(
        files::open_failure(Errno::LOOP, None, you),
        UnusableCache::NotPrivate(Unsafe::Link)
    ));
}

/// The rename happened but the directory could not be synced (a descriptor opened `O_PATH`
/// cannot be synced, but names files as any other): the new login is in place, so it is kept,
/// with one warning that it may not survive a crash; removing it would lose it for sure.
#[cfg(target_os = "linux")]
#[test]
fn new_tokens_renamed_into_place_but_not_synced_are_kept() {
    use rustix::fs::{Mode, OFlags};
    let home = tempfile::tempdir().unwrap();
    let dir = CacheDir::new(home.path().join("auth"));
    dir.store(&entry(1)).unwrap();
    let mut lock = dir.lock(&key()).unwrap();
    lock.dir = File::from(
        rustix::fs::open(
            dir.path(),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap(),
    );
    let warning = lock.store_fresh(&entry(2000), LOGIN).unwrap_err();
    assert!(
        warning.starts_with("warning: ")
            && warning.contains("may not survive a crash")
            && warning.contains(&dir.file_for(&key()).display().to_string())
            && !warning.contains("removed")
            && !warning.contains("id.token.x")
            && !warning.contains("refresh-1"),
        "{warning}"
    );
    match dir.load(&key()) {
        Loaded::Usable(e) => assert_eq!(e.id_token_exp, 2000, "the new login is kept"),
        other => panic!("{other:?}"),
    }
}

/// A group-writable `~/.ichor` narrowed by the locked path is reported for a notice; a read
/// narrows and reports nothing.
#[test]
fn narrowing_the_ichor_directory_is_reported_with_both_modes() {
    let home = tempfile::tempdir().unwrap();
    let ichor = home.path().join(".ichor");
    fs::create_dir(&ichor).unwrap();
    fs::set_permissions(&ichor, fs::Permissions::from_mode(0o775)).unwrap();
    let auth = ichor.join("auth");
    let you = CacheDir::new(auth.clone()).you;
    assert!(matches!(
        dirs::open(&auth, Access::Read, you),
        Err(DirError::Unsafe {
            problem: Unsafe::WritableDirectory { mode: 0o775 },
            ..
        })
    ));
    let narrowed = dirs::open(&auth, Access::Create, you).unwrap().narrowed.unwrap();
    assert_eq!(
        narrowed,
        Narrowed {
            path: ichor.clone(),
            from: 0o775,
            to: 0o755
        }
    );
    assert_eq!(
        narrowed.notice(),
        format!(
            "ichor: narrowed {} from 0775 to 0755: other users could replace your login cache",
            ichor.display()
        )
    );
    assert_eq!(dirs::open(&auth, Access::Create, you).unwrap().narrowed, None);
}
