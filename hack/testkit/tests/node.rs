//! The test kit's single-node cluster: it starts and registers Ready, runs a Deployment under
//! the chart's restricted security context from an image built here, a Secret volume and a
//! ServiceAccount token reach the pods, its ClusterIP Service answers from the test's own thread
//! from both pods, and after the drop nothing it changed on the machine remains, while a
//! `kubepods` cgroup that is not the node's (a machine that is itself a Kubernetes node) and its
//! process are left alone.

use std::collections::BTreeSet;
use std::io::{Read as _, Write as _};
use std::path::Path;
use std::time::{Duration, Instant};

use ichor_testkit::consumers::{images_dir, require_path};
use ichor_testkit::node::host::{MACHINE_DIRS, MachineLock, STATE_DIR, lock_machine, read_sysctls};

/// How long a test waits for another test's node to stop (the walkthrough's runs for minutes).
const LOCK_WAIT: Duration = Duration::from_secs(540);

/// The machine's node lock: what the test reads while it holds it is the machine at rest, with
/// no other test's node running.
fn at_rest() -> MachineLock {
    lock_machine(Instant::now() + LOCK_WAIT).unwrap_or_else(|e| panic!("{e:#}"))
}

/// Where containerd, the CNI plugins and the kubelet write by default: the node points each
/// elsewhere or removes what it created ([`MACHINE_DIRS`]).
const DEFAULT_PATHS: &[&str] = &[
    "/var/lib/containerd",
    "/run/containerd",
    "/opt/containerd",
    "/etc/cni",
    "/var/lib/cni",
    "/var/lib/kubelet",
    "/var/log/pods",
    "/var/log/containers",
    "/usr/libexec/kubernetes",
    "/var/run/kubernetes",
    "/etc/kubernetes",
];
use ichor_testkit::node::{Node, NodeOptions};

const WORKLOAD: &str = r#"apiVersion: v1
kind: Secret
metadata: {name: web-secret, namespace: default}
stringData: {value: from-the-secret-volume}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        fsGroup: 65532
        seccompProfile: {type: RuntimeDefault}
      containers:
      - name: web
        image: ichor.local/node-test-http:1
        imagePullPolicy: Never
        env:
        - {name: SECRET_FILE, value: /etc/web-secret/value}
        - {name: SCRATCH_DIR, value: /tmp}
        - {name: TOKEN_FILE, value: /var/run/secrets/kubernetes.io/serviceaccount/token}
        ports: [{containerPort: 8080}]
        readinessProbe:
          httpGet: {path: /healthz, port: 8080}
          periodSeconds: 1
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
        volumeMounts:
        - {name: tmp, mountPath: /tmp}
        - {name: secret, mountPath: /etc/web-secret, readOnly: true}
      volumes:
      - {name: tmp, emptyDir: {}}
      - {name: secret, secret: {secretName: web-secret}}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
"#;

/// One plain HTTP/1.0 GET of `/` at `address:80` from this thread; the body.
fn get(address: &str) -> anyhow::Result<String> {
    get_path(address, "/")
}

/// One plain HTTP/1.0 GET of `path` at `address:80` from this thread (the server's connection
/// tests run 3-second timeouts: the read waits longer); the body.
fn get_path(address: &str, path: &str) -> anyhow::Result<String> {
    let mut s =
        std::net::TcpStream::connect_timeout(&format!("{address}:80").parse()?, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(8)))?;
    s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    Ok(answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.trim().to_owned())
        .unwrap_or_default())
}

/// Which of [`MACHINE_DIRS`] and [`DEFAULT_PATHS`] exist.
fn machine_dirs() -> Vec<&'static str> {
    MACHINE_DIRS
        .iter()
        .chain(DEFAULT_PATHS)
        .copied()
        .filter(|d| Path::new(d).exists())
        .collect()
}

fn mounts_under(dir: &Path) -> Vec<String> {
    let prefix = dir.to_string_lossy().into_owned();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(str::to_owned))
        .filter(|m| m == &prefix || m.starts_with(&format!("{prefix}/")))
        .collect()
}

/// The node's own cgroup root (`/ichor-node-<pid>`, named like its namespace) in each hierarchy
/// that has it.
fn node_cgroups(namespace: &str) -> Vec<String> {
    std::fs::read_dir("/sys/fs/cgroup")
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path().join(namespace))
                .filter(|p| p.exists())
                .map(|p| p.display().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// A `kubepods` cgroup that is not the node's, with a process in it: what a machine that is
/// itself a Kubernetes node (cgroupfs driver, cgroup v1) has. Neither a node's drop nor
/// `hack/node/clean.sh` may touch it. Made in the `pids` hierarchy (`kubepods` itself when the
/// machine has none, else a cgroup of this test under the machine's); dropping it kills its
/// process and removes what it made.
struct ForeignKubepods {
    made: Vec<std::path::PathBuf>,
    child: std::process::Child,
}

impl ForeignKubepods {
    fn make() -> Self {
        let fail =
            |what: &str, e: std::io::Error| -> ! { panic!("making a foreign kubepods cgroup: {what}: {e}") };
        let base = Path::new("/sys/fs/cgroup/pids/kubepods");
        let mut made = Vec::new();
        if !base.exists() {
            std::fs::create_dir(base).unwrap_or_else(|e| fail("creating it", e));
            made.push(base.to_path_buf());
        }
        let leaf = base.join(format!("ichor-canary-{}", std::process::id()));
        std::fs::create_dir(&leaf).unwrap_or_else(|e| fail("creating its child", e));
        made.push(leaf.clone());
        let child = std::process::Command::new("sleep")
            .arg("900")
            .spawn()
            .unwrap_or_else(|e| fail("running sleep", e));
        let canary = Self { made, child };
        std::fs::write(leaf.join("cgroup.procs"), canary.child.id().to_string())
            .unwrap_or_else(|e| fail("moving sleep into it", e));
        canary
    }

    /// Panics unless its cgroups exist and its process still runs in them.
    fn assert_untouched(&mut self, after: &str) {
        for dir in &self.made {
            assert!(dir.is_dir(), "{after} removed {}", dir.display());
        }
        let leaf = self.made.last().cloned().unwrap_or_default();
        assert!(
            matches!(self.child.try_wait(), Ok(None)),
            "{after} killed the process in {}",
            leaf.display()
        );
        let procs = std::fs::read_to_string(leaf.join("cgroup.procs")).unwrap_or_default();
        assert!(
            procs.lines().any(|p| p == self.child.id().to_string()),
            "{after} moved the process out of {}: {procs}",
            leaf.display()
        );
    }
}

impl Drop for ForeignKubepods {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for dir in self.made.iter().rev() {
            for _ in 0..50 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

#[test]
#[ignore = "needs the node: hack/install-test-deps.sh, hack/kube/build.sh, hack/node/build.sh"]
fn a_node_runs_a_restricted_deployment_behind_a_cluster_ip_and_leaves_nothing_behind() {
    let test_started = Instant::now();
    let Some(image) = require_path(images_dir().join("node-test-http.tar"), "hack/node/build.sh") else {
        return;
    };
    let rest = at_rest();
    let sysctls_before = read_sysctls();
    let machine_dirs_before = machine_dirs();
    let mut foreign = ForeignKubepods::make();
    drop(rest);
    let Some(node) = Node::start(NodeOptions {
        images: vec![image],
        ..NodeOptions::default()
    })
    .unwrap() else {
        return;
    };
    let dir = node.dir().to_path_buf();
    let namespace = node.namespace().to_owned();
    assert!(Path::new("/run/netns").join(&namespace).exists());
    // The kubelet's cgroup root is the node's own, in every hierarchy (v1 and unified).
    let cgroups = node_cgroups(&namespace);
    for hierarchy in ["cpu", "cpuset", "memory", "pids", "unified"] {
        assert!(
            cgroups.contains(&format!("/sys/fs/cgroup/{hierarchy}/{namespace}")),
            "{cgroups:?}"
        );
    }
    let nodes = node.kubectl(&["get", "nodes", "-o", "wide"]).unwrap();
    assert!(
        nodes.contains(" Ready ") && nodes.contains("10.200.0.1"),
        "{nodes}"
    );
    // The kubelet rewrote machine-wide settings: what the drop must put back.
    let sysctls_during = read_sysctls();
    assert_ne!(
        sysctls_during, sysctls_before,
        "the kubelet changed no kernel setting"
    );
    // One node at a time: a second start (its own lock file descriptor) gives up with a clear
    // error.
    let second = std::thread::spawn(|| {
        Node::start(NodeOptions {
            lock_timeout: Duration::from_secs(1),
            ..NodeOptions::default()
        })
        .map(|n| n.is_some())
    })
    .join()
    .unwrap();
    let second = format!(
        "{:#}",
        second.expect_err("a second node started beside the first")
    );
    assert!(
        second.contains("only one node runs on a machine at a time"),
        "{second}"
    );

    let workload_started = Instant::now();
    node.control_plane().apply(WORKLOAD).unwrap();
    let rollout = node.kubectl(&[
        "rollout",
        "status",
        "deployment/web",
        "-n",
        "default",
        "--timeout=180s",
    ]);
    if let Err(e) = &rollout {
        let pods = node
            .kubectl(&["describe", "pods", "-n", "default"])
            .unwrap_or_default();
        panic!("the Deployment did not become ready: {e:#}\n{pods}");
    }
    let ready_in = workload_started.elapsed();
    let kubepods = Path::new("/sys/fs/cgroup/pids").join(&namespace).join("kubepods");
    assert!(
        kubepods.is_dir(),
        "the pods' cgroups are not under the node's root"
    );
    let pods: BTreeSet<String> = node
        .kubectl(&[
            "get",
            "pods",
            "-n",
            "default",
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ])
        .unwrap()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert_eq!(pods.len(), 2, "{pods:?}");
    let cluster_ip = node
        .kubectl(&[
            "get",
            "service",
            "web",
            "-n",
            "default",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ])
        .unwrap();
    assert!(cluster_ip.starts_with("10.202.0."), "{cluster_ip}");

    // From this thread, in the node's namespace, through kube-proxy's rules: both pods answer.
    let mut seen = BTreeSet::new();
    let mut last = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < 2 && Instant::now() < deadline {
        match get(&cluster_ip) {
            Ok(body) => {
                for field in [
                    "uid=65532",
                    "secret=from-the-secret-volume",
                    "scratch=yes",
                    "token=yes",
                ] {
                    assert!(body.contains(field), "{field} missing from {body}");
                }
                if let Some(host) = body.split_whitespace().find_map(|f| f.strip_prefix("hostname=")) {
                    seen.insert(host.to_owned());
                }
                last = body;
            }
            Err(e) => {
                last = format!("{e:#}");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
    assert_eq!(
        seen, pods,
        "the Service {cluster_ip} reached only these pods; last answer: {last}"
    );
    // Pods reach the apiserver through the `kubernetes` Service (what the chart's controller
    // does), and each other through a Service, a pod itself included (hairpin).
    let connect = get_path(&cluster_ip, "/connect/10.202.0.1:443").unwrap();
    assert_eq!(
        connect, "connected",
        "a pod could not reach the kubernetes Service"
    );
    let mut fetched = BTreeSet::new();
    for _ in 0..12 {
        let body = get_path(&cluster_ip, &format!("/fetch/{cluster_ip}:80")).unwrap();
        let host = body
            .split_whitespace()
            .find_map(|f| f.strip_prefix("hostname="))
            .unwrap_or_else(|| panic!("a pod could not reach the Service: {body}"));
        fetched.insert(host.to_owned());
    }
    assert_eq!(fetched, pods, "pod to Service to pod reached only these pods");
    // The apiserver reaches the kubelet on the node's InternalIP (no name resolution).
    let logs = node
        .kubectl(&["logs", "deployment/web", "-n", "default"])
        .unwrap();
    assert!(logs.contains("listening on 0.0.0.0:8080 as uid 65532"), "{logs}");

    // What Talos does when it applies a KubeAuthenticationConfig: the node's apiserver
    // restarts (from this thread: in the namespace, on the node's address) and the node's
    // components and pods carry on.
    let mut node = node;
    let old_pid = node.control_plane().pid(0);
    let stopping = Instant::now();
    node.control_plane_mut().stop_apiserver(0).unwrap();
    let stopped_in = stopping.elapsed();
    let started_in = node
        .control_plane_mut()
        .start_apiserver(0, Duration::from_secs(60))
        .unwrap();
    assert_ne!(node.control_plane().pid(0), old_pid);
    let ready = node
        .kubectl(&[
            "wait",
            "--for=condition=Ready",
            "node/ichor-node",
            "--timeout=60s",
        ])
        .unwrap();
    assert!(ready.contains("condition met"), "{ready}");
    // The stopping apiserver took its address out of the `kubernetes` Service's endpoints;
    // kube-proxy refuses connections to it until the new one has put it back.
    let back = Instant::now();
    let mut connect = String::new();
    while back.elapsed() < Duration::from_secs(30) {
        connect = get_path(&cluster_ip, "/connect/10.202.0.1:443").unwrap();
        if connect == "connected" {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(connect, "connected", "pods cannot reach the restarted apiserver");
    eprintln!(
        "pods reached the kubernetes Service again {:?} after the restart",
        back.elapsed()
    );
    eprintln!("the node's apiserver stopped in {stopped_in:?} and was ready again in {started_in:?}");

    let rss = node.rss_kib();
    eprintln!(
        "node started in {:?}; Deployment ready in {ready_in:?}; RSS (KiB): {rss:?}; total {} MiB",
        node.started_in(),
        rss.iter().map(|(_, k)| k).sum::<u64>() / 1024
    );
    assert!(rss.iter().all(|(_, kib)| *kib > 0), "{rss:?}");

    let stopping = Instant::now();
    drop(node);
    eprintln!("node stopped and cleaned up in {:?}", stopping.elapsed());
    let _rest = at_rest();
    assert_eq!(read_sysctls(), sysctls_before, "kernel settings not restored");
    assert_eq!(
        mounts_under(&dir),
        Vec::<String>::new(),
        "mounts left under {}",
        dir.display()
    );
    assert_eq!(
        node_cgroups(&namespace),
        Vec::<String>::new(),
        "the node's cgroups left"
    );
    foreign.assert_untouched("the node's drop");
    assert!(
        !Path::new("/run/netns").join(&namespace).exists(),
        "namespace {namespace} left"
    );
    assert!(!Path::new(STATE_DIR).join(format!("{namespace}.state")).exists());
    assert!(!dir.exists(), "{} left", dir.display());
    assert_eq!(
        machine_dirs(),
        machine_dirs_before,
        "machine directories the node created are left"
    );
    eprintln!("test took {:?}", test_started.elapsed());
}

/// Processes whose command line names `dir` (the node's components and containerd's shims).
fn processes_naming(dir: &Path) -> Vec<String> {
    let needle = dir.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .chars()
                        .all(|c| c.is_ascii_digit())
                })
                .filter_map(|e| {
                    let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
                    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                    cmdline.contains(&needle).then_some(cmdline)
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
#[ignore = "needs the node: hack/install-test-deps.sh, hack/kube/build.sh, hack/node/build.sh"]
fn a_start_that_fails_half_way_names_the_component_keeps_the_logs_and_puts_the_machine_back() {
    let rest = at_rest();
    let sysctls_before = read_sysctls();
    let machine_dirs_before = machine_dirs();
    let mut foreign = ForeignKubepods::make();
    drop(rest);
    let error = match Node::start(NodeOptions {
        apiserver_args: vec!["--no-such-flag=1".to_owned()],
        ..NodeOptions::default()
    }) {
        Ok(None) => return,
        Ok(Some(node)) => panic!(
            "a node started with an unknown apiserver flag in {}",
            node.dir().display()
        ),
        Err(e) => format!("{e:#}"),
    };
    assert!(error.contains("kube-apiserver 0 exited"), "{error}");
    assert!(error.contains("unknown flag: --no-such-flag"), "{error}");
    let kept = error
        .split("logs kept in ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| panic!("no kept directory in: {error}"));
    assert!(kept.join("containerd.log").is_file(), "{}", kept.display());
    let _rest = at_rest();
    let namespace = format!("ichor-node-{}", std::process::id());
    assert!(
        !Path::new("/run/netns").join(&namespace).exists(),
        "namespace {namespace} left"
    );
    assert_eq!(mounts_under(&kept), Vec::<String>::new());
    assert_eq!(processes_naming(&kept), Vec::<String>::new());
    assert_eq!(node_cgroups(&namespace), Vec::<String>::new());
    foreign.assert_untouched("the drop of a node that failed to start");
    assert_eq!(read_sysctls(), sysctls_before);
    assert_eq!(machine_dirs(), machine_dirs_before);
    assert!(!Path::new(STATE_DIR).join(format!("{namespace}.state")).exists());
    std::fs::remove_dir_all(&kept).unwrap();
}

#[test]
#[ignore = "needs the node: hack/install-test-deps.sh, hack/kube/build.sh, hack/node/build.sh"]
fn clean_sh_undoes_the_node_of_a_test_killed_before_its_drop() {
    use std::io::BufRead as _;
    let Some(image) = require_path(images_dir().join("node-test-http.tar"), "hack/node/build.sh") else {
        return;
    };
    let rest = at_rest();
    let sysctls_before = read_sysctls();
    let machine_dirs_before = machine_dirs();
    let mut foreign = ForeignKubepods::make();
    drop(rest);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ichor-node-hold"))
        .arg(&image)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let fields: Vec<&str> = line.split_whitespace().collect();
    let [_, dir, namespace] = fields[..] else {
        let _ = child.kill();
        panic!(
            "ichor-node-hold did not start a node: {line:?} ({:?})",
            child.wait()
        );
    };
    let dir = std::path::PathBuf::from(dir);
    // What a node left by a killed test looks like: everything still there.
    child.kill().unwrap();
    child.wait().unwrap();
    // Taken as soon as the killed node released it, so no other node's start reaps it first.
    let rest = at_rest();
    assert!(Path::new("/run/netns").join(namespace).exists());
    assert!(!mounts_under(&dir).is_empty());
    assert!(!node_cgroups(namespace).is_empty());
    assert!(!processes_naming(&dir).is_empty());
    assert_ne!(read_sysctls(), sysctls_before);

    // A program that started meanwhile and wrote into a machine directory the node created (a
    // system containerd into /run/containerd): its entry, and so the directory, stay.
    let foreign_entry = (!machine_dirs_before.contains(&"/run/containerd")).then(|| {
        let entry = Path::new("/run/containerd").join(format!("ichor-foreign-{}", std::process::id()));
        std::fs::write(&entry, "not the node's").unwrap();
        entry
    });

    let clean = ichor_testkit::node::host::clean_script();
    let out = std::process::Command::new(&clean)
        .arg("--locked")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(processes_naming(&dir), Vec::<String>::new());
    assert_eq!(mounts_under(&dir), Vec::<String>::new());
    assert_eq!(node_cgroups(namespace), Vec::<String>::new());
    foreign.assert_untouched("hack/node/clean.sh");
    if let Some(entry) = &foreign_entry {
        assert!(entry.is_file(), "hack/node/clean.sh removed {}", entry.display());
        std::fs::remove_file(entry).unwrap();
        // Empty once the foreign entry is gone: the node's own entries (its shims' sockets) were
        // removed.
        std::fs::remove_dir("/run/containerd").unwrap();
    }
    assert!(!Path::new("/run/netns").join(namespace).exists());
    assert_eq!(read_sysctls(), sysctls_before);
    assert_eq!(machine_dirs(), machine_dirs_before);
    assert!(!dir.exists(), "{} left", dir.display());
    assert!(!Path::new(STATE_DIR).join(format!("{namespace}.state")).exists());
    drop(rest);
    // Idempotent: nothing left to do (it takes the lock itself).
    assert!(std::process::Command::new(&clean).status().unwrap().success());
}
