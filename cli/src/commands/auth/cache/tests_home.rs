//! `~/.ichor` (the directory holding the cache), the lock's directory handle, and what the
//! locked path keeps, removes or still prints.
#![allow(clippy::unwrap_used)]

use std::{
    fs,
    os::unix::fs::{MetadataExt as _, PermissionsExt as _, symlink},
};

use super::{
    dirs::{Access, DirError},
    lock::{Disposition, disposition},
    tests::{entry, key, write_private},
    *,
};

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn set_mode(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Whoever owns `~/.ichor` can rename `auth` away and put a directory of theirs there (a FUSE
/// mount reporting the user's uid and 0700): a `~/.ichor` of another user is refused before
/// `auth` is looked at, by the fast path, the locked path, status and logout, naming `~/.ichor`
/// and saying what to do: a user is told how to take it back, root never.
#[test]
fn an_ichor_directory_of_another_user_is_refused_naming_it() {
    let home = tempfile::tempdir().unwrap();
    let ichor = home.path().join(".ichor");
    let mine = CacheDir::new(ichor.join("auth"));
    mine.store(&entry(2000)).unwrap();
    assert!(matches!(mine.load(&key()), Loaded::Usable(_)));

    // The same tree, seen by a user who owns none of it.
    let other = mine.clone().seen_by(euid() + 1);
    let Loaded::Unusable(reason) = other.load(&key()) else {
        panic!("another user's ~/.ichor is read from");
    };
    let UnusableCache::Directory {
        path,
        problem: Unsafe::OtherOwner { .. },
    } = &reason
    else {
        panic!("{reason}");
    };
    assert_eq!(*path, ichor);
    let refusal = other.refusal(&key(), &reason).unwrap();
    for err in [
        refusal,
        other.ensure().unwrap_err(),
        other.lock(&key()).unwrap_err(),
        other.list().unwrap_err(),
    ] {
        assert!(
            matches!(&err, AuthError::CacheNotYours { path, .. } if *path == ichor),
            "{err}"
        );
        let text = err.to_string();
        assert!(
            text.contains(&ichor.display().to_string()) && text.contains("chown -R"),
            "{text}"
        );
    }

    // As root, the real thing: `~/.ichor` handed to another uid, `auth` inside still this user's.
    if euid() == 0 {
        rustix::fs::chown(&ichor, Some(rustix::fs::Uid::from_raw(4242)), None).unwrap();
        assert!(matches!(
            mine.load(&key()),
            Loaded::Unusable(UnusableCache::Directory {
                problem: Unsafe::OtherOwner { owner: 4242, .. },
                ..
            })
        ));
        // Root (this run) with another user's `~/.ichor`: never told to take it.
        let err = mine.lock(&key()).unwrap_err();
        assert!(
            matches!(
                err,
                AuthError::CacheNotYours {
                    owner: 4242,
                    you: 0,
                    ..
                }
            ),
            "{err}"
        );
        let text = err.to_string();
        assert!(
            text.contains("running as root") && !text.contains("chown"),
            "{text}"
        );
    }
}

/// A `~/.ichor` made under umask 002 (or by hand) is group-writable: the fast path changes
/// nothing and falls back to the locked path, which narrows it through its descriptor (group and
/// other write dropped, nothing else) and then works; status and logout narrow it as well.
#[test]
fn a_group_writable_ichor_directory_is_narrowed_not_refused() {
    let home = tempfile::tempdir().unwrap();
    let ichor = home.path().join(".ichor");
    fs::create_dir(&ichor).unwrap();
    set_mode(&ichor, 0o775);
    let dir = CacheDir::new(ichor.join("auth"));
    assert!(matches!(
        dir.load(&key()),
        Loaded::Unusable(UnusableCache::Directory {
            problem: Unsafe::WritableDirectory { mode: 0o775 },
            ..
        })
    ));
    assert_eq!(mode(&ichor), 0o775, "a read changes nothing");

    let lock = dir.lock(&key()).unwrap();
    assert_eq!(mode(&ichor), 0o755);
    assert_eq!(mode(dir.path()), 0o700);
    lock.store(&entry(2000)).unwrap();
    drop(lock);
    assert!(matches!(dir.load(&key()), Loaded::Usable(_)));

    set_mode(&ichor, 0o777);
    let Loaded::Unusable(reason) = dir.load(&key()) else {
        panic!("a world-writable ~/.ichor is read from");
    };
    assert!(matches!(
        reason,
        UnusableCache::Directory {
            problem: Unsafe::WritableDirectory { mode: 0o777 },
            ..
        }
    ));
    assert_eq!(mode(&ichor), 0o777, "a read changes nothing");
    assert_eq!(dir.list().unwrap().len(), 1);
    assert_eq!(mode(&ichor), 0o755, "listing narrows it");
    assert!(matches!(dir.load(&key()), Loaded::Usable(_)));
}

/// Status and logout list the directory: a group-writable `auth` is narrowed to 0700 there too,
/// as the write path does, instead of being refused.
#[test]
fn listing_narrows_a_group_writable_cache_directory_as_a_write_does() {
    let home = tempfile::tempdir().unwrap();
    let dir = CacheDir::new(home.path().join(".ichor/auth"));
    dir.store(&entry(2000)).unwrap();
    set_mode(dir.path(), 0o770);
    let listed = dir.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].entry.is_ok());
    assert_eq!(mode(dir.path()), 0o700);
}

/// Dotfiles are often links into a repository: a linked `~/.ichor` of this user is followed,
/// and the cache lives in its target, narrowed like any other.
#[test]
fn a_linked_ichor_directory_is_followed() {
    let home = tempfile::tempdir().unwrap();
    let target = home.path().join("dotfiles/ichor");
    fs::create_dir_all(&target).unwrap();
    set_mode(&target, 0o775);
    symlink(&target, home.path().join(".ichor")).unwrap();
    let dir = CacheDir::new(home.path().join(".ichor/auth"));

    dir.lock(&key()).unwrap().store(&entry(2000)).unwrap();
    assert!(matches!(dir.load(&key()), Loaded::Usable(_)));
    assert_eq!(dir.list().unwrap().len(), 1);
    assert!(
        target
            .join("auth")
            .join(format!("{}.json", key().file_stem()))
            .exists()
    );
    assert_eq!(mode(&target), 0o755);
}

/// A first run with nothing there: a read creates nothing, the first write creates `~/.ichor`
/// and `auth`, both 0700, whatever the umask (the mode is given to `mkdir`, which a umask only
/// narrows).
#[test]
fn a_first_run_creates_the_ichor_directory_and_the_cache_directory_0700() {
    let home = tempfile::tempdir().unwrap();
    let dir = CacheDir::new(home.path().join(".ichor/auth"));
    assert!(matches!(dir.load(&key()), Loaded::Absent));
    assert!(dir.list().unwrap().is_empty());
    assert!(!home.path().join(".ichor").exists(), "a read creates nothing");
    dir.lock(&key()).unwrap().store(&entry(2000)).unwrap();
    assert_eq!(mode(&home.path().join(".ichor")), 0o700);
    assert_eq!(mode(dir.path()), 0o700);
    assert!(matches!(dir.load(&key()), Loaded::Usable(_)));
}

/// Something mounted on `auth` (a FUSE mount can report any owner and mode) is on another file
/// system than `~/.ichor`: refused. A mount point of this machine stands in for it (`/dev/pts`,
/// `/dev/shm`), opened read-only as its owner would: nothing is created or changed there.
#[test]
fn a_cache_directory_on_another_file_system_than_its_parent_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let here = fs::metadata(home.path()).unwrap();
    assert_eq!(files::same_device(&here, here.dev()), Ok(()));
    assert_eq!(files::same_device(&here, here.dev() + 1), Err(Unsafe::MountPoint));

    let mounts = ["/dev/pts", "/dev/shm", "/sys/fs/cgroup"].map(Path::new);
    // Where none of these is a mount point, the pure check above is all that runs.
    let Some(mount) = mounts
        .into_iter()
        .find(|m| match (fs::metadata(m), m.parent().map(fs::metadata)) {
            (Ok(inner), Some(Ok(outer))) => {
                inner.dev() != outer.dev() && inner.uid() == outer.uid() && outer.mode() & 0o022 == 0
            }
            _ => false,
        })
    else {
        return;
    };
    let owner = fs::metadata(mount).unwrap().uid();
    match dirs::open(mount, Access::Read, owner).map(|o| o.dir) {
        Err(DirError::Unsafe {
            path,
            problem: Unsafe::MountPoint,
        }) => assert_eq!(path, mount),
        other => panic!("{}: {other:?}", mount.display()),
    }
    let Loaded::Unusable(reason) = CacheDir::new(mount.to_owned()).seen_by(owner).load(&key()) else {
        panic!("a mount point is read from");
    };
    let refusal = CacheDir::new(mount.to_owned()).refusal(&key(), &reason).unwrap();
    let text = refusal.to_string();
    assert!(
        text.contains("mount point") && text.contains("umount") && !text.contains("remove it"),
        "{text}"
    );
}

/// The lock keeps the directory it was taken in: if `auth` is renamed away and another put in
/// its place after the lock is taken, the read, the write and the removal under that lock all
/// stay in the locked directory, and the new one is untouched.
#[test]
fn everything_under_a_lock_happens_in_the_directory_it_was_taken_in() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("auth");
    let dir = CacheDir::new(path.clone());
    dir.store(&entry(1)).unwrap();
    let lock = dir.lock(&key()).unwrap();
    let moved = home.path().join("moved");
    fs::rename(&path, &moved).unwrap();
    dir.store(&entry(5)).unwrap();
    let file = |d: &Path| d.join(format!("{}.json", key().file_stem()));
    let exp = |d: &Path| parse(&fs::read(file(d)).unwrap()).unwrap().id_token_exp;

    match lock.load() {
        Loaded::Usable(e) => assert_eq!(e.id_token_exp, 1),
        other => panic!("{other:?}"),
    }
    lock.store(&entry(9)).unwrap();
    assert_eq!((exp(&moved), exp(&path)), (9, 5));
    lock.remove().unwrap();
    assert!(!file(&moved).exists());
    assert_eq!(exp(&path), 5);

    let mut other = entry(9);
    other.audience = "another-audience".into();
    assert!(lock.store(&other).is_err(), "only the locked login is written");
}

/// Under the lock, only a file that can never become usable is removed: a read error (EIO,
/// EMFILE, an NFS timeout) may pass, and a newer ichor's file is that ichor's login.
#[test]
fn only_damaged_files_are_removed_a_read_error_or_a_newer_format_is_kept() {
    use std::io::Error;
    let cases = [
        (UnusableCache::TooLarge, Disposition::Replace),
        (UnusableCache::OtherLogin, Disposition::Replace),
        (parse(b"{").unwrap_err(), Disposition::Replace),
        (UnusableCache::Version(CACHE_VERSION + 1), Disposition::Keep),
        (
            UnusableCache::Read(Error::from_raw_os_error(5)),
            Disposition::Keep,
        ),
        (
            UnusableCache::Read(Error::from_raw_os_error(24)),
            Disposition::Keep,
        ),
        (UnusableCache::NotPrivate(Unsafe::Link), Disposition::Refuse),
    ];
    for (reason, expected) in &cases {
        assert_eq!(disposition(reason), *expected, "{reason}");
    }

    let home = tempfile::tempdir().unwrap();
    let dir = CacheDir::new(home.path().join("auth"));
    let lock = dir.lock(&key()).unwrap();
    let file = dir.file_for(&key());
    let login = "ichor auth login --issuer https://i.example";

    let mut newer = serde_json::to_value(entry(1)).unwrap();
    newer["v"] = (CACHE_VERSION + 1).into();
    write_private(&file, &serde_json::to_vec(&newer).unwrap());
    let Loaded::Unusable(reason) = lock.load() else {
        panic!("a newer format is read");
    };
    let err = lock.settle(reason, login).unwrap_err().to_string();
    assert!(err.contains("newer ichor") && err.contains(login), "{err}");
    assert!(file.exists(), "a newer ichor's login is kept");

    let err = lock
        .settle(UnusableCache::Read(Error::from_raw_os_error(5)), login)
        .unwrap_err();
    assert!(matches!(err, AuthError::CacheRead { .. }), "{err}");
    assert!(err.to_string().contains("kept"), "{err}");
    assert!(file.exists(), "a file that could not be read is kept");

    write_private(&file, b"{not json");
    let Loaded::Unusable(reason) = lock.load() else {
        panic!("junk is read");
    };
    let notice = lock.settle(reason, login).unwrap();
    assert!(notice.contains("replacing it"), "{notice}");
    assert!(!file.exists(), "a damaged file is removed");
}

/// New tokens that cannot be stored are still used (the caller prints them); the warning carries
/// no token, and says what the next run needs. Here the write fails because a directory sits
/// where the file goes, so the outdated login cannot be removed either: the warning says to.
#[test]
fn a_failed_store_of_new_tokens_warns_without_a_token_and_names_what_to_do() {
    let home = tempfile::tempdir().unwrap();
    let dir = CacheDir::new(home.path().join("auth"));
    let lock = dir.lock(&key()).unwrap();
    let file = dir.file_for(&key());
    fs::create_dir(&file).unwrap();
    fs::write(file.join("x"), b"x").unwrap();
    let login = "ichor auth login --issuer https://i.example";
    let warning = lock.store_fresh(&entry(2000), login).unwrap_err();
    assert!(
        !warning.contains("id.token.x") && !warning.contains("refresh-1"),
        "{warning}"
    );
    assert!(
        warning.contains("could not be saved")
            && warning.contains(&file.display().to_string())
            && warning.contains(login),
        "{warning}"
    );
    fs::remove_dir_all(&file).unwrap();
    assert_eq!(lock.store_fresh(&entry(2000), login), Ok(()));
    assert!(matches!(lock.load(), Loaded::Usable(_)));
}
