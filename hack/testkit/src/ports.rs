//! Free TCP ports for processes the tests start and restart.
//!
//! A port asked of the kernel with `bind(…:0)` comes from the ephemeral range, the same range
//! every outgoing connection's local port is drawn from. A test that stops a server and starts it
//! again on the same port (the issuer's URL is fixed in the apiserver's configuration) can then
//! find the port taken by some unrelated connection in between. These ports are drawn from below
//! the ephemeral range instead, where no outgoing connection lands, and checked free when asked.
//!
//! Free when asked is not enough: the caller binds the port later (often in a server process it
//! starts after), and cargo-nextest runs many test processes at once, each drawing ports. Two of
//! them could draw the same port in between, and the later bind fails. So every port handed out
//! is also reserved for the life of the process that asked:
//!
//! - across processes, by an exclusive `flock` on `<port>.lock` in a directory every process of
//!   this user shares (`ichor-test-ports` under the temporary directory, see [`lock_dir`]). The
//!   open file is kept until the process exits, and the kernel drops the lock then however the
//!   process ends (even SIGKILL), so no lock is ever stale and nothing needs cleaning up. A port
//!   whose lock another process holds is skipped;
//! - within the process, by the set of ports it handed out: it never hands out a port twice.
//!
//! Ports used by processes outside the kit are still found by binding them before handing out.
//! Processes only coordinate when they see the same temporary directory (`TMPDIR`).

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use anyhow::{Context as _, anyhow, bail};

/// The lowest port handed out: above the well-known and most registered service ports.
const LOWEST: u16 = 20_000;

/// How many candidates are tried before giving up.
const TRIES: usize = 200;

/// The name, under the temporary directory, of the directory holding the ports' lock files.
const LOCK_DIR: &str = "ichor-test-ports";

/// A TCP port free on 127.0.0.1 (free when asked; the caller binds it soon after), outside the
/// kernel's ephemeral range so it stays free across a restart of the process that holds it.
/// It is reserved until this process exits: no other call, here or in another process of the
/// kit, hands it out meanwhile.
pub fn free_port() -> anyhow::Result<u16> {
    free_port_on(&[Ipv4Addr::LOCALHOST])
}

/// A TCP port free on every one of `addresses` at once (free when asked), reserved until this
/// process exits.
pub fn free_port_on(addresses: &[Ipv4Addr]) -> anyhow::Result<u16> {
    free_ports_on(addresses, 1)
}

/// A port `p` such that `p` and `p + 1` are both free on 127.0.0.1 (free when asked), both
/// reserved until this process exits.
pub fn free_port_pair() -> anyhow::Result<u16> {
    free_ports_on(&[Ipv4Addr::LOCALHOST], 2)
}

fn free_ports_on(addresses: &[Ipv4Addr], run: u16) -> anyhow::Result<u16> {
    let addresses = if addresses.is_empty() {
        &[Ipv4Addr::LOCALHOST][..]
    } else {
        addresses
    };
    let (low, high) = candidate_range(ephemeral_low());
    reserve_in(addresses, run, low, high)
}

/// The ports this process handed out, and the open lock files that reserve them for it.
struct Reserved {
    /// The directory of the lock files, once found.
    dir: Option<PathBuf>,
    /// Every port handed out so far.
    ports: BTreeSet<u16>,
    /// Their lock files, open (and so locked) until the process exits.
    locks: Vec<File>,
}

static RESERVED: Mutex<Reserved> = Mutex::new(Reserved {
    dir: None,
    ports: BTreeSet::new(),
    locks: Vec::new(),
});

fn reserved() -> MutexGuard<'static, Reserved> {
    // Nothing panics while the guard is held; the state stays whole even if something did.
    RESERVED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reserves and returns the first port of a run of `run` ports drawn from `low..=high`.
fn reserve_in(addresses: &[Ipv4Addr], run: u16, low: u16, high: u16) -> anyhow::Result<u16> {
    let mut reserved = reserved();
    let dir = match &reserved.dir {
        Some(dir) => dir.clone(),
        None => {
            let dir = lock_dir()?;
            reserved.dir = Some(dir.clone());
            dir
        }
    };
    anyhow::ensure!(
        run >= 1 && u32::from(low) + u32::from(run) - 1 <= u32::from(high),
        "no run of {run} port(s) fits in {low}..={high}"
    );
    let span = u32::from(high - low) + 1 - u32::from(run - 1);
    for _ in 0..TRIES {
        let offset = rand::random_range(0..span);
        let first = low + u16::try_from(offset).context("a port offset beyond u16")?;
        if try_reserve(&mut reserved, &dir, addresses, first, run)? {
            return Ok(first);
        }
    }
    bail!(
        "no run of {run} free port(s) on all of {addresses:?} in {low}..={high} after {TRIES} tries \
         (ports are skipped when in use, or reserved by this or another test process through {})",
        dir.display()
    )
}

/// Reserves `first..first + run` when none of them is reserved already (by this process, or by
/// another through its lock file in `dir`) and each is free on every one of `addresses`.
/// Whether it did; when not, nothing of the run stays locked.
fn try_reserve(
    reserved: &mut Reserved,
    dir: &Path,
    addresses: &[Ipv4Addr],
    first: u16,
    run: u16,
) -> anyhow::Result<bool> {
    let ports = first..=first + (run - 1);
    if ports.clone().any(|port| reserved.ports.contains(&port)) {
        return Ok(false);
    }
    let mut locks = Vec::with_capacity(usize::from(run));
    for port in ports.clone() {
        match lock(dir, port)? {
            Some(file) => locks.push(file),
            // Dropping `locks` releases the ones taken.
            None => return Ok(false),
        }
    }
    let free = ports
        .clone()
        .all(|port| addresses.iter().all(|a| TcpListener::bind((*a, port)).is_ok()));
    if !free {
        return Ok(false);
    }
    reserved.ports.extend(ports);
    reserved.locks.extend(locks);
    Ok(true)
}

/// `port`'s lock file in `dir`, opened and locked exclusively; `None` when another holder (an
/// open file description of this or another process) has the lock.
fn lock(dir: &Path, port: u16) -> anyhow::Result<Option<File>> {
    let path = dir.join(format!("{port}.lock"));
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("cannot open the test port lock file {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("cannot lock the test port lock file {}", path.display()))
        }
    }
}

/// The directory of the ports' lock files: `ichor-test-ports` under the temporary directory,
/// created private (0700), or, when that name is another user's (or not a private directory),
/// `ichor-test-ports-<uid>`. Every process of this user finds the same one.
fn lock_dir() -> anyhow::Result<PathBuf> {
    let tmp = std::env::temp_dir();
    let uid = rustix::process::getuid().as_raw();
    let shared = tmp.join(LOCK_DIR);
    let shared_error = match private_dir(&shared, uid) {
        Ok(()) => return Ok(shared),
        Err(e) => e,
    };
    let own = tmp.join(format!("{LOCK_DIR}-{uid}"));
    private_dir(&own, uid).map_err(|own_error| {
        anyhow!(
            "no directory can hold the test ports' lock files: {shared_error:#}; {own_error:#}. \
             Remove the one that is yours to fix, or set TMPDIR to a directory of your own"
        )
    })?;
    Ok(own)
}

/// Creates `dir` private to `uid`, or checks that the one already there is.
fn private_dir(dir: &Path, uid: u32) -> anyhow::Result<()> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
    }
    // Not followed: a link another user planted is refused, whatever it points to.
    let meta = std::fs::symlink_metadata(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    match untrusted(meta.is_dir(), meta.uid(), meta.mode(), uid) {
        None => Ok(()),
        Some(reason) => bail!("{} {reason}", dir.display()),
    }
}

/// Why a lock directory with these attributes is not one to use for `uid`, if it is not: it must
/// be a directory (not a link) of `uid` that no one else can write.
fn untrusted(is_dir: bool, owner: u32, mode: u32, uid: u32) -> Option<String> {
    if !is_dir {
        Some("is not a directory".to_owned())
    } else if owner != uid {
        Some(format!("belongs to user {owner}, not to this user ({uid})"))
    } else if mode & 0o022 != 0 {
        Some(format!("is writable by others (mode {:o})", mode & 0o7777))
    } else {
        None
    }
}

/// The first port of the kernel's ephemeral range (Linux's default when it cannot be read).
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// The ports drawn from: `LOWEST` up to just below the ephemeral range, or, when that range
/// starts too low to leave a thousand ports, the ports above it.
fn candidate_range(ephemeral_low: u16) -> (u16, u16) {
    if ephemeral_low > LOWEST + 1_000 {
        (LOWEST, ephemeral_low - 1)
    } else {
        (LOWEST, u16::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lock of `port` taken as another process would take it (an open file description of
    /// its own): `None` when someone holds it already.
    fn other_holder(port: u16) -> Option<File> {
        lock(&lock_dir().unwrap(), port).unwrap()
    }

    /// A port that no one reserved and nothing listens on, with its lock held by the test (as
    /// another process would hold it).
    fn unreserved_port_held_elsewhere() -> (u16, File) {
        let (low, high) = candidate_range(ephemeral_low());
        (0..TRIES)
            .find_map(|_| {
                let port = rand::random_range(low..high);
                if reserved().ports.contains(&port) {
                    return None;
                }
                let held = other_holder(port)?;
                TcpListener::bind((Ipv4Addr::LOCALHOST, port)).ok()?;
                Some((port, held))
            })
            .expect("an unreserved free port")
    }

    #[test]
    fn ports_come_from_below_the_ephemeral_range_and_a_pair_is_free_together() {
        let low = ephemeral_low();
        for _ in 0..20 {
            let port = free_port().unwrap();
            assert!(port >= LOWEST, "{port}");
            if low > LOWEST + 1_000 {
                assert!(port < low, "{port} is in the ephemeral range from {low}");
            }
            let pair = free_port_pair().unwrap();
            TcpListener::bind(("127.0.0.1", pair)).unwrap();
            TcpListener::bind(("127.0.0.1", pair + 1)).unwrap();
        }
    }

    #[test]
    fn a_narrow_or_missing_range_below_the_ephemeral_one_falls_back_above_it() {
        assert_eq!(candidate_range(32_768), (LOWEST, 32_767));
        assert_eq!(candidate_range(1_024), (LOWEST, u16::MAX));
        assert_eq!(candidate_range(LOWEST + 500), (LOWEST, u16::MAX));
    }

    #[test]
    fn a_port_held_by_a_listener_is_not_handed_out_nor_left_locked() {
        let (port, held) = unreserved_port_held_elsewhere();
        drop(held);
        let _listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).unwrap();
        let error = reserve_in(&[Ipv4Addr::LOCALHOST], 1, port, port).unwrap_err();
        assert!(error.to_string().contains("no run of 1 free port"), "{error:#}");
        assert!(!reserved().ports.contains(&port));
        assert!(other_holder(port).is_some(), "the lock of {port} was kept");
    }

    #[test]
    fn a_port_handed_out_is_never_handed_out_again_by_this_process() {
        let ports: Vec<u16> = (0..50).map(|_| free_port().unwrap()).collect();
        let distinct: BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "{ports:?}");
        // Even with no lock file in the way (a directory of no locks) and nothing listening on
        // it, a port this process handed out is refused.
        let no_locks = tempfile::tempdir().unwrap();
        for &port in &ports {
            let again = try_reserve(&mut reserved(), no_locks.path(), &[Ipv4Addr::LOCALHOST], port, 1);
            assert!(!again.unwrap(), "{port} handed out twice");
        }
        // And it is reserved against other processes: its lock is held.
        for &port in &ports {
            assert!(other_holder(port).is_none(), "the lock of {port} is not held");
        }
    }

    #[test]
    fn a_port_whose_lock_another_process_holds_is_skipped() {
        let (port, held) = unreserved_port_held_elsewhere();
        // The only candidate, free to bind: only the lock keeps it from being handed out.
        let error = reserve_in(&[Ipv4Addr::LOCALHOST], 1, port, port).unwrap_err();
        assert!(error.to_string().contains("no run of 1 free port"), "{error:#}");
        assert!(!reserved().ports.contains(&port));
        drop(held);
        assert_eq!(reserve_in(&[Ipv4Addr::LOCALHOST], 1, port, port).unwrap(), port);
        assert!(reserved().ports.contains(&port));
        assert!(other_holder(port).is_none());
    }

    #[test]
    fn a_pair_is_skipped_when_its_second_port_is_held_and_leaves_the_first_unlocked() {
        // A second port held elsewhere after a first port that is free and unreserved.
        let (first, second, held) = (0..TRIES)
            .find_map(|_| {
                let (second, held) = unreserved_port_held_elsewhere();
                let first = second.checked_sub(1)?;
                if reserved().ports.contains(&first) {
                    return None;
                }
                other_holder(first)?;
                TcpListener::bind((Ipv4Addr::LOCALHOST, first)).ok()?;
                Some((first, second, held))
            })
            .expect("a free first port before a held one");
        let error = reserve_in(&[Ipv4Addr::LOCALHOST], 2, first, second).unwrap_err();
        assert!(error.to_string().contains("no run of 2 free port"), "{error:#}");
        assert!(!reserved().ports.contains(&first));
        assert!(other_holder(first).is_some(), "the lock of {first} was kept");
        drop(held);
    }

    #[test]
    fn a_pair_is_reserved_together() {
        for _ in 0..10 {
            let pair = free_port_pair().unwrap();
            {
                let reserved = reserved();
                assert!(reserved.ports.contains(&pair), "{pair}");
                assert!(reserved.ports.contains(&(pair + 1)), "{}", pair + 1);
            }
            assert!(other_holder(pair).is_none(), "the lock of {pair} is not held");
            assert!(
                other_holder(pair + 1).is_none(),
                "the lock of {} is not held",
                pair + 1
            );
            TcpListener::bind(("127.0.0.1", pair)).unwrap();
            TcpListener::bind(("127.0.0.1", pair + 1)).unwrap();
        }
    }

    #[test]
    fn the_lock_directory_is_created_private_and_a_shared_or_foreign_one_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;

        let tmp = tempfile::tempdir().unwrap();
        let uid = rustix::process::getuid().as_raw();
        let fresh = tmp.path().join("fresh");
        private_dir(&fresh, uid).unwrap();
        assert_eq!(std::fs::metadata(&fresh).unwrap().mode() & 0o7777, 0o700);
        private_dir(&fresh, uid).unwrap();

        let open = tmp.path().join("open");
        std::fs::DirBuilder::new().mode(0o777).create(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let error = private_dir(&open, uid).unwrap_err().to_string();
        assert!(error.contains("is writable by others (mode 777)"), "{error}");

        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&fresh, &link).unwrap();
        let error = private_dir(&link, uid).unwrap_err().to_string();
        assert!(error.contains("is not a directory"), "{error}");

        let error = private_dir(&fresh, uid + 1).unwrap_err().to_string();
        assert!(
            error.contains(&format!("belongs to user {uid}, not to this user ({})", uid + 1)),
            "{error}"
        );

        assert_eq!(untrusted(true, 7, 0o40700, 7), None);
        assert_eq!(untrusted(true, 7, 0o40750, 7), None);
        assert!(untrusted(true, 7, 0o40770, 7).is_some());
        assert!(untrusted(true, 8, 0o40700, 7).is_some());
        assert!(untrusted(false, 7, 0o100600, 7).is_some());
    }
}
