//! Starting a node's components and waiting for them: containerd (and the images it imports),
//! kube-controller-manager, kube-scheduler, the kubelet and kube-proxy, each a [`Process`] with
//! its log in the node's directory and its PID in the node's state file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

use super::Node;
use super::config::{self, CLUSTER_CIDR, NODE_ADDRESS, NODE_NAME, SERVICE_CIDR};
use crate::consumers::{self, KubeBinary};
use crate::control_plane::{Process, free_port, log_tail};

/// `PATH` for the node's processes: iptables, runc and ip are in the sbin directories.
fn path_env() -> String {
    let inherited = std::env::var("PATH").unwrap_or_default();
    format!("/usr/local/sbin:/usr/sbin:/sbin:/usr/local/bin:/usr/bin:/bin:{inherited}")
}

/// The node's binaries ([`Binaries::find`] fails the test when one is missing).
pub struct Binaries {
    pub kubelet: PathBuf,
    pub kube_proxy: PathBuf,
    pub controller_manager: PathBuf,
    pub scheduler: PathBuf,
    pub containerd: PathBuf,
    pub ctr: PathBuf,
    pub pause_image: PathBuf,
}

impl Binaries {
    /// Finds them ([`consumers::require`] semantics).
    pub fn find() -> Option<Self> {
        let which = |name: &str| -> PathBuf {
            ["/usr/bin", "/usr/sbin", "/usr/local/bin"]
                .iter()
                .map(|d| Path::new(d).join(name))
                .find(|p| p.is_file())
                .unwrap_or_else(|| Path::new("/usr/bin").join(name))
        };
        Some(Self {
            kubelet: consumers::require(KubeBinary::Kubelet)?,
            kube_proxy: consumers::require(KubeBinary::KubeProxy)?,
            controller_manager: consumers::require(KubeBinary::ControllerManager)?,
            scheduler: consumers::require(KubeBinary::Scheduler)?,
            containerd: consumers::require_path(which("containerd"), "hack/install-test-deps.sh")?,
            ctr: consumers::require_path(which("ctr"), "hack/install-test-deps.sh")?,
            pause_image: consumers::require_path(
                consumers::images_dir().join("pause.tar"),
                "hack/node/build.sh",
            )?,
        })
    }
}

impl Node {
    /// Starts a component with its log as `<dir>/<name>.log` and records its PID.
    pub(super) fn spawn(&mut self, name: &str, cmd: &mut Command) -> anyhow::Result<()> {
        let log = self.root.join(format!("{name}.log"));
        cmd.env("PATH", path_env());
        let p = Process::spawn(name, cmd, &log)?;
        self.host.record_pid(p.id())?;
        self.processes.push((name.to_owned(), p));
        Ok(())
    }

    /// An error naming the first component that has exited, quoting its log.
    pub(super) fn check_running(&mut self) -> anyhow::Result<()> {
        for (_, p) in &mut self.processes {
            p.check_running()?;
        }
        Ok(())
    }

    /// Starts containerd and waits until it answers on its socket.
    pub(super) fn start_containerd(&mut self, deadline: Instant) -> anyhow::Result<()> {
        for sub in [
            "containerd",
            "cni/net.d",
            "cni/ipam",
            "runc",
            "pod-logs",
            "kubelet",
        ] {
            std::fs::create_dir_all(self.root.join(sub))?;
        }
        let conf = self.root.join("containerd/config.toml");
        std::fs::write(&conf, config::containerd(&self.root, &self.socket))?;
        std::fs::write(
            self.root.join("cni/net.d/10-ichor-node.conflist"),
            config::cni(&self.root, self.host.namespace()),
        )?;
        let containerd = self.binaries.containerd.clone();
        self.spawn("containerd", Command::new(containerd).arg("--config").arg(&conf))?;
        loop {
            self.check_running()?;
            if self.socket.exists() && self.ctr(&["version"]).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "containerd did not answer on {} in time; its log ends:\n{}",
                    self.socket.display(),
                    log_tail(&self.root.join("containerd.log"))
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `ctr` against the node's containerd in the CRI's namespace `k8s.io`; its output, or an
    /// error quoting it.
    pub(super) fn ctr(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = Command::new(&self.binaries.ctr)
            .arg("--address")
            .arg(&self.socket)
            .args(["--namespace", "k8s.io"])
            .args(args)
            .env("PATH", path_env())
            .output()
            .context("running ctr")?;
        if !out.status.success() {
            bail!(
                "ctr {} failed ({}): {}{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Starts kube-controller-manager, kube-scheduler, the kubelet and kube-proxy against the
    /// running control plane (all with the admin's kubeconfig).
    pub(super) fn start_kube_components(&mut self) -> anyhow::Result<()> {
        let plane = self
            .control_plane
            .as_ref()
            .context("the control plane is stopped")?;
        let kubeconfig = plane.admin_kubeconfig().to_path_buf();
        let plane_dir = plane.dir().to_path_buf();
        let root = self.root.clone();
        let kc = format!("--kubeconfig={}", kubeconfig.display());
        let cert_dir = |name: &str| -> anyhow::Result<String> {
            let d = root.join(name);
            std::fs::create_dir_all(&d)?;
            Ok(format!("--cert-dir={}", d.display()))
        };

        let cm_dir = cert_dir("kube-controller-manager")?;
        let bin = self.binaries.controller_manager.clone();
        self.spawn(
            "kube-controller-manager",
            Command::new(bin).args([
                kc.clone(),
                cm_dir,
                "--bind-address=127.0.0.1".to_owned(),
                format!("--secure-port={}", free_port()?),
                "--leader-elect=false".to_owned(),
                format!(
                    "--service-account-private-key-file={}",
                    plane_dir.join("sa.key").display()
                ),
                format!("--root-ca-file={}", plane_dir.join("ca.crt").display()),
                format!("--cluster-cidr={CLUSTER_CIDR}"),
                format!("--service-cluster-ip-range={SERVICE_CIDR}"),
                "--allocate-node-cidrs=false".to_owned(),
                // Not /usr/libexec/kubernetes/kubelet-plugins/volume/exec, which it creates.
                format!(
                    "--flex-volume-plugin-dir={}",
                    root.join("kube-controller-manager/volume-plugins").display()
                ),
                "--v=1".to_owned(),
            ]),
        )?;

        let sched_dir = cert_dir("kube-scheduler")?;
        let bin = self.binaries.scheduler.clone();
        self.spawn(
            "kube-scheduler",
            Command::new(bin).args([
                kc.clone(),
                sched_dir,
                "--bind-address=127.0.0.1".to_owned(),
                format!("--secure-port={}", free_port()?),
                "--leader-elect=false".to_owned(),
                "--v=1".to_owned(),
            ]),
        )?;

        let kubelet_conf = root.join("kubelet.yaml");
        std::fs::write(
            &kubelet_conf,
            config::kubelet(
                &root,
                &self.socket,
                &plane_dir.join("ca.crt"),
                self.host.cgroup_root(),
                free_port()?,
            ),
        )?;
        let bin = self.binaries.kubelet.clone();
        self.spawn(
            "kubelet",
            Command::new(bin).args([
                format!("--config={}", kubelet_conf.display()),
                kc.clone(),
                format!("--hostname-override={NODE_NAME}"),
                format!("--node-ip={NODE_ADDRESS}"),
                format!("--root-dir={}", root.join("kubelet").display()),
                cert_dir("kubelet/pki")?,
                "--v=1".to_owned(),
            ]),
        )?;

        self.proxy_healthz_port = free_port()?;
        let bin = self.binaries.kube_proxy.clone();
        let healthz = self.proxy_healthz_port;
        self.spawn(
            "kube-proxy",
            Command::new(bin).args([
                kc,
                "--proxy-mode=iptables".to_owned(),
                "--conntrack-max-per-core=0".to_owned(),
                "--conntrack-tcp-timeout-established=0s".to_owned(),
                "--conntrack-tcp-timeout-close-wait=0s".to_owned(),
                format!("--cluster-cidr={CLUSTER_CIDR}"),
                format!("--hostname-override={NODE_NAME}"),
                format!("--bind-address={NODE_ADDRESS}"),
                format!("--healthz-bind-address=127.0.0.1:{healthz}"),
                format!("--metrics-bind-address=127.0.0.1:{}", free_port()?),
                "--v=1".to_owned(),
            ]),
        )?;
        Ok(())
    }

    /// Waits until the node is `Ready`, the `default` ServiceAccount exists (the
    /// controller-manager works), the `kubernetes` Service has the node's address as its
    /// endpoint and kube-proxy reports healthy; an error names what was not ready and quotes
    /// the log of the component behind it.
    pub(super) fn wait_ready(&mut self, deadline: Instant) -> anyhow::Result<()> {
        type Check = (&'static str, &'static str, fn(&Node) -> bool);
        let checks: [Check; 4] = [
            ("the node registered Ready", "kubelet", |n| {
                n.kubectl(&[
                    "get",
                    "node",
                    NODE_NAME,
                    "-o",
                    "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
                ])
                .is_ok_and(|s| s.trim() == "True")
            }),
            (
                "the default ServiceAccount exists",
                "kube-controller-manager",
                |n| {
                    n.kubectl(&["get", "serviceaccount", "default", "-n", "default", "-o", "name"])
                        .is_ok()
                },
            ),
            (
                "the kubernetes Service has the node's address as its endpoint",
                "apiserver-0/kube-apiserver",
                |n| {
                    n.kubectl(&[
                        "get",
                        "endpointslices",
                        "-n",
                        "default",
                        "-l",
                        "kubernetes.io/service-name=kubernetes",
                        "-o",
                        "jsonpath={.items[*].endpoints[*].addresses[*]}",
                    ])
                    .is_ok_and(|s| s.contains(&NODE_ADDRESS.to_string()))
                },
            ),
            ("kube-proxy reported healthy", "kube-proxy", |n| n.proxy_healthy()),
        ];
        let mut done = [false; 4];
        loop {
            self.check_running()?;
            for (i, (_, _, check)) in checks.iter().enumerate() {
                if !done[i] {
                    done[i] = check(self);
                }
            }
            if done.iter().all(|d| *d) {
                return Ok(());
            }
            if Instant::now() > deadline {
                let i = done.iter().position(|d| !d).unwrap_or_default();
                let (what, component, _) = checks[i];
                let log = if let Some((dir, file)) = component.split_once('/') {
                    let plane = self.control_plane.as_ref().map(|p| p.dir().join(dir));
                    plane.map(|d| d.join(format!("{file}.log"))).unwrap_or_default()
                } else {
                    self.root.join(format!("{component}.log"))
                };
                bail!(
                    "the node was not ready in time: not yet \"{what}\"; the log of {component} ({}) ends:\n{}",
                    log.display(),
                    log_tail(&log)
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn proxy_healthy(&self) -> bool {
        use std::io::{Read as _, Write as _};
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.proxy_healthz_port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let mut answer = String::new();
        s.write_all(b"GET /healthz HTTP/1.0\r\n\r\n").is_ok()
            && s.read_to_string(&mut answer).is_ok()
            && answer.lines().next().is_some_and(|l| l.contains(" 200 "))
    }
}
