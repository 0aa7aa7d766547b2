//! Controller replicas as local processes, and reading what they wrote through kubectl.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ichor_testkit::control_plane::{ControlPlane, Process, free_port, free_port_on, log_tail};
use ichor_testkit::install::NAMESPACE;
use serde_json::Value;

/// One `ichor-controller run --leader-elect` replica (killed with SIGKILL on drop).
pub struct Replica {
    /// Its identity in the Lease (a pod name in a cluster).
    pub pod: String,
    /// Where it serves /metrics, /healthz and /readyz.
    pub metrics_port: u16,
    /// Where it serves the admission webhooks (HTTPS, every address).
    pub webhook_port: u16,
    /// Its webhook serving certificate directory (the Secret volume of its pod).
    pub cert_dir: PathBuf,
    process: Option<Process>,
    log: PathBuf,
}

impl Replica {
    /// Starts a replica named `pod` with `kubeconfig` (a token of the controller's
    /// ServiceAccount); its log and webhook certificate directory go under `dir`.
    pub fn start(dir: &Path, pod: &str, kubeconfig: &Path) -> anyhow::Result<Self> {
        Self::start_with(dir, pod, kubeconfig, &[])
    }

    /// [`Replica::start`] with more settings in its environment (`ICHOR_CONTROLLER_*`, as the
    /// chart's Deployment sets them).
    pub fn start_with(
        dir: &Path,
        pod: &str,
        kubeconfig: &Path,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let metrics_port = free_port()?;
        // The webhook listens on every address: the port is checked free on every address.
        let webhook_port = free_port_on(&[Ipv4Addr::UNSPECIFIED])?;
        let cert_dir = dir.join(format!("{pod}-webhook-tls"));
        std::fs::create_dir_all(&cert_dir)?;
        let log = dir.join(format!("{pod}.log"));
        // A benchmark run from a private copy names the binary it was built with.
        let binary = std::env::var_os("ICHOR_CONTROLLER_BIN")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_ichor-controller").into());
        let mut cmd = Command::new(binary);
        cmd.args(["run", "--leader-elect", "--log-format", "text"])
            .arg(format!("--pod-name={pod}"))
            .arg(format!("--metrics-listen=127.0.0.1:{metrics_port}"))
            .arg(format!("--webhook-port={webhook_port}"))
            .arg(format!("--webhook-cert-dir={}", cert_dir.display()))
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info")
            .env_remove("ICHOR_CONTROLLER_LEADER_ELECT")
            .envs(env.iter().copied());
        let process = Process::spawn(&format!("ichor-controller {pod}"), &mut cmd, &log)?;
        Ok(Self {
            pod: pod.to_owned(),
            metrics_port,
            webhook_port,
            cert_dir,
            process: Some(process),
            log,
        })
    }

    /// SIGKILL: the replica crashes with no chance to step down.
    pub fn kill(&mut self) {
        if let Some(p) = self.process.take() {
            p.kill();
        }
    }

    /// SIGSTOP: the replica hangs (its sockets accept, nothing answers) until killed.
    pub fn freeze(&self) -> anyhow::Result<()> {
        let pid = self.process.as_ref().map(|p| p.id().to_string());
        let pid = pid.ok_or_else(|| anyhow::anyhow!("{} was killed", self.pod))?;
        let status = Command::new("kill").args(["-STOP", &pid]).status()?;
        anyhow::ensure!(status.success(), "kill -STOP {pid} failed");
        Ok(())
    }

    /// An error quoting its log when it has exited.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        match self.process.as_mut() {
            Some(p) => p.check_running(),
            None => anyhow::bail!("{} was killed", self.pod),
        }
    }

    /// The end of its log (for failure messages).
    pub fn log_tail(&self) -> String {
        log_tail(&self.log)
    }

    /// The HTTP status of its `/readyz`, if it answers.
    pub fn readyz(&self) -> Option<u16> {
        self.readyz_answer().map(|(status, _)| status)
    }

    /// The HTTP status and body of its `/readyz`, if it answers.
    pub fn readyz_answer(&self) -> Option<(u16, String)> {
        use std::io::{Read as _, Write as _};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.metrics_port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        s.write_all(b"GET /readyz HTTP/1.0\r\n\r\n").ok()?;
        let mut answer = String::new();
        s.read_to_string(&mut answer).ok()?;
        let status = answer.split_whitespace().nth(1)?.parse().ok()?;
        let body = answer
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default();
        Some((status, body))
    }

    /// Its whole log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// `kubectl get KIND NAME -n ichor-system -o json` as the admin on apiserver `on`; `None` when
/// the object does not exist.
pub fn get(plane: &ControlPlane, on: usize, kind: &str, name: &str) -> anyhow::Result<Option<Value>> {
    plane.get_json(on, kind, NAMESPACE, name)
}

pub use ichor_testkit::install::merge_patch_args as merge_patch;

/// The holder of the controller's Lease, if any.
pub fn lease_holder(plane: &ControlPlane) -> anyhow::Result<Option<String>> {
    Ok(get(plane, 0, "lease", "ichor-controller")?
        .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_owned))
        .filter(|h| !h.is_empty()))
}

/// The status of condition `kind` of an object, if it has one.
pub fn condition(object: &Value, kind: &str) -> Option<String> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .and_then(|c| c["status"].as_str().map(str::to_owned))
}
