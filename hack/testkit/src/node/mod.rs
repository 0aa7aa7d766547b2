//! A real single-node Kubernetes cluster for tests, in a network namespace the test creates:
//! etcd and kube-apiserver (a [`ControlPlane`] on the node's address), kube-controller-manager,
//! kube-scheduler, containerd with runc and the CNI plugins, the kubelet and kube-proxy
//! (iptables mode), all built or installed by the test command (`hack/kube/build.sh`,
//! `hack/install-test-deps.sh`, `hack/node/build.sh`). Pods run from OCI image archives
//! imported into the node's containerd (`imagePullPolicy: Never`): no registry.
//!
//! [`Node::start`] moves the calling thread into the namespace: threads it creates afterwards
//! (a tokio runtime's) and every process it spawns (kubectl, helm, a browser) see the node's
//! address, pod addresses and Service ClusterIPs, and nothing else — the namespace has no route
//! out, and no DNS: nothing in the node depends on name resolution.
//!
//! Addresses: the node is 10.200.0.1 on the bridge `node0`, pods are in 10.201.0.0/24 on
//! `cni0`, Services in 10.202.0.0/24 (`kubernetes` is 10.202.0.1). Every component authenticates
//! as the control plane's admin.
//!
//! What the node changes outside its namespace is put back when it is dropped, also after a
//! start that failed half way: the kernel settings the kubelet rewrites, mounts under its
//! directory, its cgroups (the kubelet's cgroup root is `/ichor-node-<pid>`, the node's own: a
//! machine's `/kubepods` is never touched), its containers and processes, the namespace, its
//! entries in machine directories. A state file
//! under `/run/ichor-node/` lets `hack/node/clean.sh` do the same after a test that was killed
//! (`hack/test.sh` runs it on exit; the next [`Node::start`] runs it first). One node runs on a
//! machine at a time: a second start waits for the first to stop (up to
//! [`NodeOptions::lock_timeout`]).

mod components;
pub mod config;
pub mod host;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::consumers::{self, KubeBinary};
use crate::control_plane::{self, ControlPlane, NodeNetwork, Process};
use components::Binaries;
use config::{KUBERNETES_SERVICE_IP, NODE_ADDRESS, SERVICE_CIDR};
use host::Host;

/// The default bound of a start: containerd, the control plane, the node `Ready`.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(240);

/// The default wait for another node: within nextest's bound of a node test (10 minutes).
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(540);

/// How to start a node.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// OCI image archives to import into the node's containerd before the kubelet starts (the
    /// pause image is always imported).
    pub images: Vec<PathBuf>,
    /// The bound of the start itself, from when the node has the machine's lock.
    pub start_timeout: Duration,
    /// How long a start waits for another test's node to stop (one node runs on a machine at a
    /// time) before it fails.
    pub lock_timeout: Duration,
    /// The `--authentication-config` the apiserver starts with.
    pub authentication_config: String,
    /// More kube-apiserver flags.
    pub apiserver_args: Vec<String>,
}

impl Default for NodeOptions {
    fn default() -> Self {
        Self {
            images: Vec::new(),
            start_timeout: DEFAULT_START_TIMEOUT,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            authentication_config: control_plane::EMPTY_AUTHENTICATION_CONFIG.to_owned(),
            apiserver_args: Vec::new(),
        }
    }
}

/// A running single-node cluster; dropping it stops everything and puts the machine back.
pub struct Node {
    host: Host,
    binaries: Binaries,
    dir: Option<tempfile::TempDir>,
    root: PathBuf,
    socket: PathBuf,
    control_plane: Option<ControlPlane>,
    /// containerd first, then the Kubernetes components in their start order.
    processes: Vec<(String, Process)>,
    proxy_healthz_port: u16,
    started_in: Duration,
}

impl Node {
    /// Takes the machine's node lock, creates the network namespace and MOVES THE CALLING
    /// THREAD into it, then starts every component and waits until the node is `Ready`. Call it
    /// on the test's thread before building a tokio runtime. A missing binary fails the test;
    /// `Ok(None)` only under `ICHOR_REQUIRE_CONSUMERS=0` ([`consumers::require`]). A failed start
    /// names the component, quotes the end of its log and keeps the directory.
    pub fn start(options: NodeOptions) -> anyhow::Result<Option<Self>> {
        let (Some(_), Some(_), Some(_), Some(binaries)) = (
            consumers::require(KubeBinary::Etcd),
            consumers::require(KubeBinary::ApiServer),
            consumers::require(KubeBinary::Kubectl),
            Binaries::find(),
        ) else {
            return Ok(None);
        };
        let dir = tempfile::Builder::new().prefix("ichor-node-").tempdir()?;
        let root = dir.path().to_path_buf();
        let host = Host::acquire(&root, Instant::now() + options.lock_timeout)?;
        let started = Instant::now();
        let deadline = started + options.start_timeout;
        let mut node = Self {
            host,
            binaries,
            socket: root.join("containerd/containerd.sock"),
            root,
            dir: Some(dir),
            control_plane: None,
            processes: Vec::new(),
            proxy_healthz_port: 0,
            started_in: Duration::ZERO,
        };
        if let Err(e) = node.finish_start(&options, deadline) {
            let kept = node.keep();
            return Err(e.context(format!(
                "the node did not start (logs kept in {})",
                kept.display()
            )));
        }
        node.started_in = started.elapsed();
        Ok(Some(node))
    }

    fn finish_start(&mut self, options: &NodeOptions, deadline: Instant) -> anyhow::Result<()> {
        self.host.create_cgroup_root()?;
        self.host.enter_namespace()?;
        self.host.configure_network(NODE_ADDRESS)?;
        self.start_containerd(deadline)?;
        let pause = self.binaries.pause_image.clone();
        self.import_image(&pause)?;
        for image in &options.images {
            self.import_image(image)?;
        }
        let plane = ControlPlane::start(control_plane::Options {
            authentication_config: options.authentication_config.clone(),
            start_timeout: deadline.saturating_duration_since(Instant::now()),
            extra_args: options.apiserver_args.clone(),
            node: Some(NodeNetwork {
                address: NODE_ADDRESS,
                service_cidr: SERVICE_CIDR.to_owned(),
                service_ip: KUBERNETES_SERVICE_IP,
            }),
            parent_dir: Some(self.root.clone()),
            ..control_plane::Options::default()
        })?
        .context("the control plane's binaries are missing")?;
        for pid in [plane.pid(0), plane.etcd_pid()].into_iter().flatten() {
            self.host.record_pid(pid)?;
        }
        self.control_plane = Some(plane);
        self.start_kube_components()?;
        self.wait_ready(deadline)
    }

    /// The node's address (on `node0`): the apiserver's, the kubelet's and the node's
    /// `InternalIP`.
    pub fn address(&self) -> Ipv4Addr {
        NODE_ADDRESS
    }

    /// The node's etcd and kube-apiserver.
    pub fn control_plane(&self) -> &ControlPlane {
        self.control_plane
            .as_ref()
            .expect("a started node has a control plane")
    }

    /// The node's etcd and kube-apiserver, to restart the apiserver (as Talos does when it
    /// applies a `KubeAuthenticationConfig`) or rewrite its authentication file.
    pub fn control_plane_mut(&mut self) -> &mut ControlPlane {
        self.control_plane
            .as_mut()
            .expect("a started node has a control plane")
    }

    /// The admin's kubeconfig (a client certificate in `system:masters`).
    pub fn admin_kubeconfig(&self) -> &Path {
        self.control_plane().admin_kubeconfig()
    }

    /// kubectl as the admin; its stdout, or an error quoting its stderr.
    pub fn kubectl(&self, args: &[&str]) -> anyhow::Result<String> {
        self.control_plane
            .as_ref()
            .context("the node's control plane is stopped")?
            .kubectl_run(args, None)
    }

    /// Imports an OCI image archive into the node's containerd (the CRI's namespace), for pods
    /// with `imagePullPolicy: Never`.
    pub fn import_image(&self, oci_archive: &Path) -> anyhow::Result<()> {
        let path = oci_archive
            .to_str()
            .context("an image archive's path is not UTF-8")?;
        self.ctr(&["images", "import", path])
            .with_context(|| format!("importing the image archive {path}"))?;
        Ok(())
    }

    /// How long [`Node::start`] took.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The resident set of each component in KiB (for the record).
    pub fn rss_kib(&self) -> Vec<(String, u64)> {
        let mut all = Vec::new();
        if let Some(plane) = &self.control_plane {
            let (apiserver, etcd) = plane.rss_kib(0);
            all.push(("etcd".to_owned(), etcd));
            all.push(("kube-apiserver".to_owned(), apiserver));
        }
        all.extend(self.processes.iter().map(|(n, p)| (n.clone(), p.rss_kib())));
        all
    }

    /// The node's directory: component logs, configuration, containerd's and the kubelet's
    /// state, the control plane's directory.
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// The network namespace's name (`/run/netns/<name>`).
    pub fn namespace(&self) -> &str {
        self.host.namespace()
    }

    /// Keeps the directory (logs) after the drop; returns its path.
    pub fn keep(&mut self) -> PathBuf {
        if let Some(plane) = self.control_plane.as_mut() {
            plane.keep();
        }
        self.host.record_keep();
        match self.dir.take() {
            Some(dir) => dir.keep(),
            None => self.root.clone(),
        }
    }

    /// Kills and deletes every container through containerd.
    fn remove_containers(&self) {
        let Ok(tasks) = self.ctr(&["tasks", "list", "--quiet"]) else {
            return;
        };
        for id in tasks.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let _ = self.ctr(&["tasks", "kill", "--signal", "SIGKILL", id]);
        }
        for id in tasks.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let _ = self.ctr(&["tasks", "delete", "--force", id]);
        }
        if let Ok(containers) = self.ctr(&["containers", "list", "--quiet"]) {
            for id in containers.lines().map(str::trim).filter(|l| !l.is_empty()) {
                self.host.record_container(id);
                let _ = self.ctr(&["containers", "delete", id]);
            }
        }
    }
}

impl Drop for Node {
    /// Stops kube-proxy, the kubelet, the scheduler and the controller-manager, then the
    /// apiserver and etcd, kills and deletes the containers through containerd, stops
    /// containerd, and runs `hack/node/clean.sh` over the state file (mounts, cgroups, the
    /// namespace, the kernel settings).
    fn drop(&mut self) {
        let containerd = if self.processes.is_empty() {
            None
        } else {
            Some(self.processes.remove(0))
        };
        while let Some((_, p)) = self.processes.pop() {
            p.kill();
        }
        drop(self.control_plane.take());
        if let Some((_, p)) = containerd {
            self.remove_containers();
            let _ = p.terminate(Duration::from_secs(10));
        }
        if let Err(e) = self.host.restore() {
            eprintln!("the node's clean-up failed: {e:#}");
        }
    }
}
