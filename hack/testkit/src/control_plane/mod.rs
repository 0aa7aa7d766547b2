//! A real Kubernetes control plane for tests: etcd and one or more kube-apiservers sharing it on
//! 127.0.0.1 (an HA control plane on one machine), built from their Go modules by
//! `hack/kube/build.sh`.
//!
//! Each apiserver has its own port, serving certificate and `--authentication-config` file, RBAC
//! authorization, the service-account signing key of the control plane, and trusts the control
//! plane's CA for client certificates; the admin is a client certificate in `system:masters`
//! ([`ControlPlane::admin_kubeconfig`]). With [`Options::distinct_loopback_addresses`]
//! apiserver `i` listens on 127.0.0.`i+1` instead, all of them on one port, like the control
//! planes of a cluster on their machine addresses. The start is bounded: when a process exits or
//! does not become ready in time the error names it, quotes the end of its log and keeps the
//! directory.
//! Everything is stopped by its PID when the [`ControlPlane`] is dropped.
//!
//! An apiserver can be stopped, started and restarted (what Talos does when it applies a
//! `KubeAuthenticationConfig`), and its authentication file rewritten in place
//! ([`ControlPlane::write_authentication_config`]) for the apiserver's own reload.
//!
//! No controller-manager runs: nothing garbage-collects, and a deleted namespace stays
//! Terminating.

mod audit;
mod clients;
mod https;
mod kubectl;
mod node_mode;
mod pki;
mod process;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

pub use crate::ports::{free_port, free_port_on};
pub use audit::{AUDIT_POLICY, AuditEvent, ObjectRef, UserInfo, read_audit_log};
pub use https::Response;
pub use kubectl::Kubectl;
pub use node_mode::NodeNetwork;
pub use pki::{ADMIN_GROUP, ADMIN_USER, Pair, Pki};
pub use process::{Process, log_tail};

use crate::consumers::{self, KubeBinary};

/// The service-account issuer of every test control plane (a `jwt[].issuer.url` may not equal it).
pub const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// The default bound of a start: etcd plus the apiservers, one after the other.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(180);
/// An `AuthenticationConfiguration` with no authenticator: what an apiserver serves with when a
/// test gives none, so that every apiserver watches a file a test can rewrite.
pub const EMPTY_AUTHENTICATION_CONFIG: &str =
    "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\njwt: []\n";

/// How to start a control plane.
#[derive(Clone, Debug)]
pub struct Options {
    /// How many kube-apiservers share the etcd (at least one).
    pub apiservers: usize,
    /// The `--authentication-config` file every apiserver starts with.
    pub authentication_config: String,
    /// The bound of the whole start.
    pub start_timeout: Duration,
    /// More kube-apiserver flags.
    pub extra_args: Vec<String>,
    /// Write an audit log of every ServiceAccount's requests ([`AUDIT_POLICY`],
    /// [`ControlPlane::audit_events`]).
    pub audit: bool,
    /// Apiserver `i` binds 127.0.0.`i+1` (with a serving certificate for that address) instead
    /// of 127.0.0.1, and all bind the same secure port: `https://<address>:<one port>/readyz`
    /// per control plane, as a rollout probes machines. At most 254 apiservers.
    pub distinct_loopback_addresses: bool,
    /// A node's control plane ([`crate::node`]): one apiserver on the node's address with
    /// ServiceAccount admission, the lease endpoint reconciler and the node's Service CIDR.
    pub node: Option<NodeNetwork>,
    /// Where the control plane's directory is made (the system's temporary directory when
    /// `None`); a node keeps everything of its own under its directory.
    pub parent_dir: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            apiservers: 1,
            authentication_config: EMPTY_AUTHENTICATION_CONFIG.to_owned(),
            start_timeout: DEFAULT_START_TIMEOUT,
            extra_args: Vec::new(),
            audit: false,
            distinct_loopback_addresses: false,
            node: None,
            parent_dir: None,
        }
    }
}

/// One kube-apiserver of the control plane.
struct ApiServer {
    address: Ipv4Addr,
    port: u16,
    args: Vec<String>,
    extra: Vec<String>,
    auth_file: PathBuf,
    log: PathBuf,
    process: Option<Process>,
}

/// A running control plane; dropping it stops every process.
pub struct ControlPlane {
    dir: Option<tempfile::TempDir>,
    root: PathBuf,
    pki: Pki,
    apiserver_bin: PathBuf,
    kubectl_bin: PathBuf,
    apiservers: Vec<ApiServer>,
    // Dropped after the apiservers (fields drop in order).
    etcd: Option<Process>,
    etcd_url: String,
    admin_kubeconfig: PathBuf,
    admin_tls: Arc<rustls::ClientConfig>,
    anonymous_tls: Arc<rustls::ClientConfig>,
    started_in: Duration,
}

/// The loopback address of apiserver `i` with [`Options::distinct_loopback_addresses`].
fn distinct_address(i: usize) -> anyhow::Result<Ipv4Addr> {
    let last = u8::try_from(i + 1)
        .ok()
        .filter(|l| *l < 255)
        .ok_or_else(|| anyhow::anyhow!("at most 254 apiservers have distinct loopback addresses"))?;
    Ok(Ipv4Addr::new(127, 0, 0, last))
}

fn write_private(path: &Path, contents: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, contents).with_context(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

impl ControlPlane {
    /// Starts etcd and `options.apiservers` kube-apiservers and waits until each is ready.
    /// A missing binary fails the calling test with the command that builds it; `Ok(None)` only
    /// under `ICHOR_REQUIRE_CONSUMERS=0` ([`consumers::require`]).
    pub fn start(options: Options) -> anyhow::Result<Option<Self>> {
        let (Some(etcd_bin), Some(apiserver_bin), Some(kubectl_bin)) = (
            consumers::require(KubeBinary::Etcd),
            consumers::require(KubeBinary::ApiServer),
            consumers::require(KubeBinary::Kubectl),
        ) else {
            return Ok(None);
        };
        anyhow::ensure!(
            options.apiservers >= 1,
            "a control plane needs at least one kube-apiserver"
        );
        let started = Instant::now();
        let deadline = started + options.start_timeout;
        anyhow::ensure!(
            options.node.is_none() || (options.apiservers == 1 && !options.distinct_loopback_addresses),
            "a node's control plane has exactly one kube-apiserver, on the node's address"
        );
        let mut builder = tempfile::Builder::new();
        builder.prefix("ichor-control-plane-");
        let dir = match &options.parent_dir {
            Some(parent) => builder.tempdir_in(parent)?,
            None => builder.tempdir()?,
        };
        let root = dir.path().to_path_buf();
        let pki = Pki::new()?;
        write_private(&root.join("ca.crt"), &pki.ca_pem)?;
        write_private(&root.join("sa.key"), &pki.service_account_key_pem)?;
        write_private(&root.join("sa.pub"), &pki.service_account_public_pem)?;
        if options.node.is_some() {
            write_private(&root.join("admin.crt"), &pki.admin.cert_pem)?;
            write_private(&root.join("admin.key"), &pki.admin.key_pem)?;
        }

        let (client_port, peer_port) = (free_port()?, free_port()?);
        let etcd_url = format!("http://127.0.0.1:{client_port}");
        let etcd_log = root.join("etcd.log");
        let etcd = Process::spawn(
            "etcd",
            Command::new(&etcd_bin)
                .arg(format!("--data-dir={}", root.join("etcd").display()))
                .arg(format!("--listen-client-urls={etcd_url}"))
                .arg(format!("--advertise-client-urls={etcd_url}"))
                .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"))
                .arg(format!(
                    "--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"
                ))
                .arg(format!("--initial-cluster=default=http://127.0.0.1:{peer_port}"))
                .arg("--unsafe-no-fsync=true")
                .arg("--log-level=warn"),
            &etcd_log,
        )?;
        let admin_tls = https::client_config(&pki.ca_pem, Some(&pki.admin))?;
        let anonymous_tls = https::client_config(&pki.ca_pem, None)?;
        let mut plane = Self {
            dir: Some(dir),
            root,
            pki,
            apiserver_bin,
            kubectl_bin,
            apiservers: Vec::new(),
            etcd: Some(etcd),
            etcd_url,
            admin_kubeconfig: PathBuf::new(),
            admin_tls,
            anonymous_tls,
            started_in: Duration::ZERO,
        };
        let result = plane.finish_start(&options, client_port, deadline);
        if let Err(e) = result {
            let kept = plane.keep();
            return Err(e.context(format!(
                "the control plane did not start (logs kept in {})",
                kept.display()
            )));
        }
        plane.started_in = started.elapsed();
        Ok(Some(plane))
    }

    fn finish_start(&mut self, options: &Options, etcd_port: u16, deadline: Instant) -> anyhow::Result<()> {
        self.wait_etcd(etcd_port, deadline)?;
        let audit_policy = self.root.join("audit-policy.yaml");
        if options.audit {
            write_private(&audit_policy, AUDIT_POLICY)?;
        }
        let addresses: Vec<Ipv4Addr> = if let Some(node) = &options.node {
            vec![node.address]
        } else if options.distinct_loopback_addresses {
            (0..options.apiservers)
                .map(distinct_address)
                .collect::<anyhow::Result<_>>()?
        } else {
            vec![Ipv4Addr::LOCALHOST; options.apiservers]
        };
        let shared_port = if options.distinct_loopback_addresses {
            Some(free_port_on(&addresses)?)
        } else {
            None
        };
        for (i, address) in addresses.into_iter().enumerate() {
            let dir = self.root.join(format!("apiserver-{i}"));
            std::fs::create_dir_all(&dir)?;
            let name = format!("kube-apiserver-{i}");
            let serving = if let Some(node) = &options.node {
                self.pki.serving_for_ips(&name, &node.serving_ips())?
            } else if address == Ipv4Addr::LOCALHOST {
                self.pki.serving(&name)?
            } else {
                self.pki.serving_for_ip(&name, address.into())?
            };
            write_private(&dir.join("tls.crt"), &serving.cert_pem)?;
            write_private(&dir.join("tls.key"), &serving.key_pem)?;
            let auth_file = dir.join("authentication-config.yaml");
            write_private(&auth_file, &options.authentication_config)?;
            let port = match shared_port {
                Some(port) => port,
                None => free_port()?,
            };
            let mut args = vec![
                format!("--etcd-servers={}", self.etcd_url),
                format!("--secure-port={port}"),
                format!("--bind-address={address}"),
                format!("--advertise-address={address}"),
                "--endpoint-reconciler-type=none".to_owned(),
                format!("--cert-dir={}", dir.display()),
                format!("--tls-cert-file={}", dir.join("tls.crt").display()),
                format!("--tls-private-key-file={}", dir.join("tls.key").display()),
                format!("--client-ca-file={}", self.root.join("ca.crt").display()),
                "--authorization-mode=RBAC".to_owned(),
                format!("--service-account-issuer={SERVICE_ACCOUNT_ISSUER}"),
                format!(
                    "--service-account-key-file={}",
                    self.root.join("sa.pub").display()
                ),
                format!(
                    "--service-account-signing-key-file={}",
                    self.root.join("sa.key").display()
                ),
                "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
                "--allow-privileged=true".to_owned(),
                "--disable-admission-plugins=ServiceAccount".to_owned(),
                format!("--authentication-config={}", auth_file.display()),
                "--v=1".to_owned(),
            ];
            if let Some(node) = &options.node {
                node.adapt_args(&mut args, &self.root);
            }
            if options.audit {
                args.push(format!("--audit-policy-file={}", audit_policy.display()));
                args.push(format!("--audit-log-path={}", dir.join("audit.log").display()));
            }
            args.extend(options.extra_args.iter().cloned());
            self.apiservers.push(ApiServer {
                address,
                port,
                args,
                extra: Vec::new(),
                auth_file,
                log: dir.join("kube-apiserver.log"),
                process: None,
            });
            self.spawn_apiserver(i)?;
            self.wait_ready(i, deadline)?;
        }
        self.admin_kubeconfig = self.root.join("admin.kubeconfig");
        write_private(&self.admin_kubeconfig, &self.kubeconfig_yaml(0))?;
        Ok(())
    }

    fn wait_etcd(&mut self, port: u16, deadline: Instant) -> anyhow::Result<()> {
        loop {
            if let Some(etcd) = self.etcd.as_mut() {
                etcd.check_running()?;
            }
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                use std::io::{Read as _, Write as _};
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut answer = String::new();
                if s.write_all(b"GET /health HTTP/1.0\r\n\r\n").is_ok()
                    && s.read_to_string(&mut answer).is_ok()
                    && answer.contains("\"health\":\"true\"")
                {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "etcd did not report healthy on 127.0.0.1:{port} in time; its log ends:\n{}",
                    process::log_tail(&self.root.join("etcd.log"))
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn spawn_apiserver(&mut self, i: usize) -> anyhow::Result<()> {
        let a = &mut self.apiservers[i];
        let mut cmd = Command::new(&self.apiserver_bin);
        cmd.args(&a.args).args(&a.extra);
        a.process = Some(Process::spawn(&format!("kube-apiserver {i}"), &mut cmd, &a.log)?);
        Ok(())
    }

    /// Waits until apiserver `i` answers `/readyz` with 200, or its process exits, or `deadline`.
    pub fn wait_ready(&mut self, i: usize, deadline: Instant) -> anyhow::Result<()> {
        loop {
            let a = &mut self.apiservers[i];
            match a.process.as_mut() {
                Some(p) => p.check_running()?,
                None => bail!("kube-apiserver {i} is stopped"),
            }
            let at = SocketAddr::from((a.address, a.port));
            if let Ok(r) = https::get(&self.anonymous_tls, at, "/readyz", None, Duration::from_secs(2))
                && r.status == 200
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                let last = https::get(
                    &self.admin_tls,
                    at,
                    "/readyz?verbose",
                    None,
                    Duration::from_secs(2),
                )
                .map(|r| r.body)
                .unwrap_or_else(|e| format!("{e:#}"));
                bail!(
                    "kube-apiserver {i} was not ready on {at} in time; /readyz says:\n{last}\nits log ends:\n{}",
                    process::log_tail(&self.apiservers[i].log)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Keeps the directory (logs, certificates, etcd data) after the drop; returns its path.
    pub fn keep(&mut self) -> PathBuf {
        if let Some(dir) = self.dir.take() {
            return dir.keep();
        }
        self.root.clone()
    }

    /// How long [`ControlPlane::start`] took.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// How many apiservers there are.
    pub fn len(&self) -> usize {
        self.apiservers.len()
    }

    /// Never true: a control plane has at least one apiserver.
    pub fn is_empty(&self) -> bool {
        self.apiservers.is_empty()
    }

    /// Apiserver `i`'s port (on [`ControlPlane::address`]).
    pub fn port(&self, i: usize) -> u16 {
        self.apiservers[i].port
    }

    /// Apiserver `i`'s address: 127.0.0.1, or 127.0.0.`i+1` with
    /// [`Options::distinct_loopback_addresses`].
    pub fn address(&self, i: usize) -> Ipv4Addr {
        self.apiservers[i].address
    }

    /// Apiserver `i`'s address and port.
    pub fn socket_addr(&self, i: usize) -> SocketAddr {
        SocketAddr::from((self.apiservers[i].address, self.apiservers[i].port))
    }

    /// Apiserver `i`'s URL.
    pub fn url(&self, i: usize) -> String {
        format!("https://{}", self.socket_addr(i))
    }

    /// The CA of the serving and client certificates, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.pki.ca_pem
    }

    /// The CA's file.
    pub fn ca_file(&self) -> PathBuf {
        self.root.join("ca.crt")
    }

    /// The control plane's directory.
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// The PKI (to issue more serving certificates, e.g. for a webhook server).
    pub fn pki(&self) -> &Pki {
        &self.pki
    }

    /// A kubeconfig for the client-certificate admin, against apiserver 0.
    pub fn admin_kubeconfig(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// The path of apiserver `i`'s `--authentication-config` file.
    pub fn authentication_config_file(&self, i: usize) -> &Path {
        &self.apiservers[i].auth_file
    }

    /// Replaces apiserver `i`'s authentication file (a temporary file renamed over it, as a
    /// configuration manager writes it). A running apiserver notices and reloads it.
    pub fn write_authentication_config(&self, i: usize, yaml: &str) -> anyhow::Result<()> {
        let path = &self.apiservers[i].auth_file;
        let tmp = path.with_extension("yaml.tmp");
        write_private(&tmp, yaml)?;
        std::fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))?;
        Ok(())
    }

    /// Stops apiserver `i` (SIGTERM, then SIGKILL after 30 s).
    pub fn stop_apiserver(&mut self, i: usize) -> anyhow::Result<()> {
        if let Some(p) = self.apiservers[i].process.take() {
            p.terminate(Duration::from_secs(30))?;
        }
        Ok(())
    }

    /// Starts a stopped apiserver `i` and waits for `/readyz` within `timeout`; how long it took.
    pub fn start_apiserver(&mut self, i: usize, timeout: Duration) -> anyhow::Result<Duration> {
        anyhow::ensure!(
            self.apiservers[i].process.is_none(),
            "kube-apiserver {i} is running"
        );
        let started = Instant::now();
        self.spawn_apiserver(i)?;
        self.wait_ready(i, started + timeout)?;
        Ok(started.elapsed())
    }

    /// Sets flags that apiserver `i` gets on top of its own from its next start on (a second
    /// `--service-account-issuer`, say: every one of them is a disallowed JWT issuer).
    pub fn set_extra_args(&mut self, i: usize, extra: Vec<String>) {
        self.apiservers[i].extra = extra;
    }

    /// Starts apiserver `i` without waiting (to watch a start that may fail).
    pub fn spawn_apiserver_unready(&mut self, i: usize) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.apiservers[i].process.is_none(),
            "kube-apiserver {i} is running"
        );
        self.spawn_apiserver(i)
    }

    /// Whether apiserver `i`'s process has exited; its exit status if so.
    pub fn apiserver_exited(&mut self, i: usize) -> Option<std::process::ExitStatus> {
        let p = self.apiservers[i].process.as_mut()?;
        let status = p.try_exit();
        if status.is_some() {
            self.apiservers[i].process = None;
        }
        status
    }

    /// What Talos does when it applies a `KubeAuthenticationConfig`: stop apiserver `i`, write
    /// its new authentication file, start it and wait until it is ready; the downtime.
    pub fn restart_apiserver(
        &mut self,
        i: usize,
        yaml: Option<&str>,
        timeout: Duration,
    ) -> anyhow::Result<Duration> {
        let started = Instant::now();
        self.stop_apiserver(i)?;
        if let Some(yaml) = yaml {
            self.write_authentication_config(i, yaml)?;
        }
        self.start_apiserver(i, timeout)?;
        Ok(started.elapsed())
    }

    /// Apiserver `i`'s process id, when it runs (a restart changes it).
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.apiservers[i].process.as_ref().map(Process::id)
    }

    /// etcd's process id.
    pub fn etcd_pid(&self) -> Option<u32> {
        self.etcd.as_ref().map(Process::id)
    }

    /// Apiserver `i`'s log so far.
    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(&self.apiservers[i].log).unwrap_or_default()
    }

    /// Apiserver `i`'s log with klog's quoting of structured values undone (`err="…\"x\"…"`
    /// reads `…"x"…`), so a message can be searched for as the apiserver wrote it.
    pub fn log_unquoted(&self, i: usize) -> String {
        self.log_unquoted_since(i, 0)
    }

    /// As [`ControlPlane::log_unquoted`], from byte `offset` of the log as written (a length
    /// of [`ControlPlane::log`] taken earlier).
    pub fn log_unquoted_since(&self, i: usize, offset: usize) -> String {
        let log = self.log(i);
        log.get(offset..)
            .unwrap_or_default()
            .replace("\\\"", "\"")
            .replace("\\\\", "\\")
    }

    /// The resident set of apiserver `i` and of etcd, in KiB (for the record).
    pub fn rss_kib(&self, i: usize) -> (u64, u64) {
        let a = self.apiservers[i].process.as_ref().map_or(0, Process::rss_kib);
        let e = self.etcd.as_ref().map_or(0, Process::rss_kib);
        (a, e)
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        for a in &mut self.apiservers {
            drop(a.process.take());
        }
        drop(self.etcd.take());
    }
}
