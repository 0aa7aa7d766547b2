//! What a node changes on the machine, and how it is put back: the one-node-at-a-time lock, the
//! state file under [`STATE_DIR`] that `hack/node/clean.sh` undoes (also after a test killed
//! before its drop ran), the kernel settings the kubelet rewrites, and the network namespace
//! the calling thread moves into.

use std::fs::File;
use std::io::Write as _;
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};

use crate::consumers::repo_root;

/// Where nodes keep their lock and state files.
pub const STATE_DIR: &str = "/run/ichor-node";

/// The machine-wide kernel settings the kubelet sets at start (`vm.overcommit_memory=1`,
/// `kernel.panic=10`, `kernel.panic_on_oops=1`, and the panic-on-OOM and key quotas it checks):
/// read before it starts, written back when the node stops.
pub const SYSCTLS: &[&str] = &[
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
];

/// Machine directories the node's components write into whatever they are told (the
/// kubelet's device-plugin socket and its `/var/log/containers` links, the CNI result cache,
/// containerd's shim sockets). The node removes only its own entries there; a directory that
/// did not exist before it is then removed only when it is empty (what another program put
/// there in the meantime stays, and so does the directory).
pub const MACHINE_DIRS: &[&str] = &[
    "/var/lib/kubelet",
    "/var/log/containers",
    "/var/lib/cni",
    "/run/containerd",
];

/// Reads `key` (`a.b.c`) from `/proc/sys`.
pub fn read_sysctl(key: &str) -> Option<String> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    std::fs::read_to_string(path).ok().map(|v| v.trim().to_owned())
}

/// The current values of [`SYSCTLS`] (those the kernel has).
pub fn read_sysctls() -> Vec<(String, String)> {
    SYSCTLS
        .iter()
        .filter_map(|k| Some(((*k).to_owned(), read_sysctl(k)?)))
        .collect()
}

/// A process's start time (field 22 of `/proc/PID/stat`), to tell it from a later one that
/// reuses its PID.
pub fn start_time(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = stat.rsplit_once(") ")?.1;
    after_name.split(' ').nth(19).map(str::to_owned)
}

/// `hack/node/clean.sh`.
pub fn clean_script() -> PathBuf {
    repo_root().join("hack/node/clean.sh")
}

/// Runs `hack/node/clean.sh` with `args`; an error quotes its output.
pub fn run_clean(args: &[&Path]) -> anyhow::Result<()> {
    let script = clean_script();
    let out = Command::new(&script)
        .args(args)
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!(
            "{} failed ({}): {}{}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// The machine's node lock, held: no node runs, and none starts, until it is dropped. A node
/// holds it from before it changes anything until it has put everything back; a test holds it
/// to read the machine at rest (before a node starts, after one stopped) without another test's
/// node in between.
pub struct MachineLock {
    _file: File,
}

/// Takes the machine's node lock, waiting until `deadline` for the node that holds it to stop;
/// an error names the test process that holds it.
pub fn lock_machine(deadline: Instant) -> anyhow::Result<MachineLock> {
    std::fs::create_dir_all(STATE_DIR).with_context(|| format!("creating {STATE_DIR}"))?;
    let lock_path = Path::new(STATE_DIR).join("lock");
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("opening {}", lock_path.display()))?;
    let holder_path = Path::new(STATE_DIR).join("holder");
    loop {
        match lock.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(&holder_path).unwrap_or_default();
                bail!(
                    "another test kit node holds {} (test process {}): only one node runs on a machine at a time",
                    lock_path.display(),
                    holder.trim()
                );
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", lock_path.display()));
            }
        }
    }
    std::fs::write(&holder_path, std::process::id().to_string())?;
    Ok(MachineLock { _file: lock })
}

/// Where the machine's cgroup hierarchies are mounted.
const CGROUP_MOUNTS: &str = "/sys/fs/cgroup";

/// The machine-side state of one node: held from before anything changes until everything is
/// put back.
pub struct Host {
    _lock: MachineLock,
    state_file: PathBuf,
    namespace: String,
    cgroup_root: String,
    original: Option<File>,
}

fn run(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running {program}"))?;
    if !out.status.success() {
        bail!(
            "{program} {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl Host {
    /// Takes the machine's node lock (waiting until `deadline` for another node to stop), reaps
    /// what nodes of dead test processes left, and writes this node's state file: its
    /// namespace, directory, cgroup root and the kernel settings as they are now.
    pub fn acquire(dir: &Path, deadline: Instant) -> anyhow::Result<Self> {
        let lock = lock_machine(deadline)?;
        // Leftovers of nodes whose test process died without its drop: with the lock held, every
        // state file is one.
        run_clean(&[Path::new("--locked")])?;
        let me = std::process::id();
        let namespace = format!("ichor-node-{me}");
        let cgroup_root = format!("/{namespace}");
        let state_file = Path::new(STATE_DIR).join(format!("{namespace}.state"));
        let mut state = format!(
            "owner {me} {}\nnamespace {namespace}\ndir {}\ncgroup_root {cgroup_root}\n",
            start_time(me).unwrap_or_default(),
            dir.display()
        );
        for (key, value) in read_sysctls() {
            state.push_str(&format!("sysctl {key} {value}\n"));
        }
        for created in MACHINE_DIRS.iter().filter(|d| !Path::new(d).exists()) {
            state.push_str(&format!("created {created}\n"));
        }
        std::fs::write(&state_file, state).with_context(|| format!("writing {}", state_file.display()))?;
        Ok(Self {
            _lock: lock,
            state_file,
            namespace,
            cgroup_root,
            original: None,
        })
    }

    /// The kubelet's `cgroupRoot` (`/ichor-node-<pid>`): the pods' cgroups are under it in every
    /// hierarchy, and the clean-up touches nothing else (a machine that is itself a
    /// Kubernetes node keeps its own `/kubepods`).
    pub fn cgroup_root(&self) -> &str {
        &self.cgroup_root
    }

    /// Creates [`Host::cgroup_root`] in every cgroup hierarchy mounted at or under
    /// `/sys/fs/cgroup` (the v1 ones and the unified one): the kubelet refuses a cgroup root that does not exist
    /// ("cgroup ... has some missing paths"). In `cpuset` the new cgroup gets its parent's CPUs
    /// and memory nodes, without which no task can join it. Already recorded in the state
    /// file, so a failure half way is cleaned up too.
    pub fn create_cgroup_root(&self) -> anyhow::Result<()> {
        let mounts = std::fs::read_to_string("/proc/self/mounts").context("reading /proc/self/mounts")?;
        let name = self.cgroup_root.trim_start_matches('/');
        for line in mounts.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            let (Some(target), Some(fstype)) = (fields.get(1), fields.get(2)) else {
                continue;
            };
            let parent = Path::new(target);
            // A hierarchy at `/sys/fs/cgroup/<name>` (v1, hybrid), or the unified one at
            // `/sys/fs/cgroup` itself (v2 only).
            let under =
                parent == Path::new(CGROUP_MOUNTS) || parent.parent() == Some(Path::new(CGROUP_MOUNTS));
            if !matches!(*fstype, "cgroup" | "cgroup2") || !under {
                continue;
            }
            let cgroup = parent.join(name);
            match std::fs::create_dir(&cgroup) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e).with_context(|| format!("creating the cgroup {}", cgroup.display())),
            }
            for file in ["cpuset.cpus", "cpuset.mems"] {
                let Ok(value) = std::fs::read_to_string(parent.join(file)) else {
                    continue;
                };
                std::fs::write(cgroup.join(file), value.trim())
                    .with_context(|| format!("writing {}", cgroup.join(file).display()))?;
            }
        }
        Ok(())
    }

    /// The network namespace's name (`/run/netns/<name>`).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Records a process of the node in the state file, for a clean-up after a crash.
    pub fn record_pid(&self, pid: u32) -> anyhow::Result<()> {
        let mut f = File::options().append(true).open(&self.state_file)?;
        writeln!(f, "pid {pid} {}", start_time(pid).unwrap_or_default())?;
        Ok(())
    }

    /// Records a container (a pod sandbox's ID names its CNI cache entries).
    pub fn record_container(&self, id: &str) {
        if let Ok(mut f) = File::options().append(true).open(&self.state_file) {
            let _ = writeln!(f, "container {id}");
        }
    }

    /// Marks the node's directory as kept (a clean-up after a crash leaves it).
    pub fn record_keep(&self) {
        if let Ok(mut f) = File::options().append(true).open(&self.state_file) {
            let _ = writeln!(f, "keep");
        }
    }

    /// Creates the network namespace and moves the calling thread into it.
    pub fn enter_namespace(&mut self) -> anyhow::Result<()> {
        self.original =
            Some(File::open("/proc/thread-self/ns/net").context("opening this thread's network namespace")?);
        run("ip", &["netns", "add", &self.namespace])?;
        let path = Path::new("/run/netns").join(&self.namespace);
        let ns = File::open(&path).with_context(|| format!("opening {}", path.display()))?;
        move_into_link_name_space(ns.as_fd(), Some(LinkNameSpaceType::Network))
            .with_context(|| format!("moving this thread into {}", path.display()))?;
        Ok(())
    }

    /// Moves the calling thread back to the network namespace it came from.
    pub fn leave_namespace(&mut self) -> anyhow::Result<()> {
        if let Some(original) = self.original.take() {
            move_into_link_name_space(original.as_fd(), Some(LinkNameSpaceType::Network))
                .context("moving this thread back to its network namespace")?;
        }
        Ok(())
    }

    /// Sets up the namespace's links: loopback, and the bridge `node0` holding `address`/24
    /// with the default route through it (the kubelet needs one to pick a node address; nothing
    /// is behind it).
    pub fn configure_network(&self, address: std::net::Ipv4Addr) -> anyhow::Result<()> {
        let cidr = format!("{address}/24");
        let a = address.to_string();
        run("ip", &["link", "set", "lo", "up"])?;
        run("ip", &["link", "add", "node0", "type", "bridge"])?;
        run("ip", &["addr", "add", &cidr, "dev", "node0"])?;
        run("ip", &["link", "set", "node0", "up"])?;
        run("ip", &["route", "add", "default", "via", &a, "dev", "node0"])?;
        Ok(())
    }

    /// Puts everything back: the thread's namespace, then `hack/node/clean.sh` over the state
    /// file (processes, mounts, cgroups, the namespace, the kernel settings). The lock goes
    /// with `self`.
    pub fn restore(&mut self) -> anyhow::Result<()> {
        let left = self.leave_namespace();
        let cleaned = run_clean(&[&self.state_file]);
        left.and(cleaned)
    }
}
