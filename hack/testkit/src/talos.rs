//! A fake Talos API endpoint (apid) speaking the real protocol, for the tests of both Talos
//! clients (`ichor config apply` and the controller's rollout): gRPC over mutual TLS with an
//! Ed25519 Talos CA and client certificates whose Organization is the role, one endpoint on
//! 127.0.0.1 that routes every call by the `node` metadata key to one of several fake nodes.
//!
//! Each node has an in-memory current machine configuration, served by COSI `State.Get` (what
//! `talosctl get machineconfig` reads) and replaced by every successful `ApplyConfiguration` of
//! mode `NO_REBOOT` or `AUTO`. Every call is recorded ([`FakeTalos::calls`]); failures can be
//! injected per node and call ([`FakeTalos::fail`]); after an apply, the node's hook runs in the
//! background with the new configuration ([`FakeTalos::on_apply`],
//! [`FakeTalos::on_apply_blocking`]) — a test restarts a real kube-apiserver of its control plane
//! there with [`restart_apiserver_hook`], as Talos restarts the static pod. The talosconfig for
//! the client side is written to a file and kept as text ([`FakeTalos::talosconfig`]).
//!
//! The fake runs on its own tokio runtime, so it serves a synchronous test (one that runs the
//! `ichor` binary) and an async one alike; dropping it stops it.
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! use ichor_testkit::talos::{FakeTalos, NodeOptions, Options};
//! let talos = FakeTalos::start(Options {
//!     nodes: vec![
//!         NodeOptions::new("127.0.0.1").with_config("version: v1alpha1\n"),
//!         NodeOptions::new("127.0.0.2").with_config("version: v1alpha1\n"),
//!     ],
//!     ..Options::default()
//! })?;
//! talos.on_apply_blocking("127.0.0.1", |applied| {
//!     eprintln!("{} now runs {} bytes", applied.node, applied.config.len());
//!     Ok(())
//! });
//! std::fs::write("talosconfig", talos.talosconfig())?;
//! # Ok(()) }
//! ```

mod apid;
mod hooks;
mod pki;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use ichor_talos::proto::{cosi::state_server::StateServer, machine_service_server::MachineServiceServer};

pub use hooks::{Applied, HookRun, authentication_config_file, restart_apiserver_hook};
pub use ichor_talos::proto::apply_configuration_request::Mode;
pub use tonic::Code;

use hooks::Hook;

/// The Talos version every fake node reports unless told otherwise.
pub const DEFAULT_VERSION: &str = "v1.14.3";

/// One fake node.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// The address a client names in the `node` metadata key.
    pub address: String,
    /// Its machine configuration; `None`: `State.Get` answers `NotFound` until an apply.
    pub config: Option<Vec<u8>>,
    /// The Talos version tag `Version` reports.
    pub version: String,
}

impl NodeOptions {
    /// A node at `address` without a configuration, reporting [`DEFAULT_VERSION`].
    pub fn new(address: &str) -> Self {
        Self {
            address: address.to_owned(),
            config: None,
            version: DEFAULT_VERSION.to_owned(),
        }
    }

    /// With `config` as its initial machine configuration.
    #[must_use]
    pub fn with_config(mut self, config: impl Into<Vec<u8>>) -> Self {
        self.config = Some(config.into());
        self
    }
}

/// How to start a [`FakeTalos`].
#[derive(Clone, Debug)]
pub struct Options {
    /// The nodes behind the endpoint.
    pub nodes: Vec<NodeOptions>,
    /// The role (client certificate Organization) of [`FakeTalos::talosconfig`].
    pub role: String,
    /// The address the endpoint listens on (a free port of it), also in apid's certificate:
    /// 127.0.0.1, or a node's address that pods reach (the test kit's real node).
    pub listen: std::net::IpAddr,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            nodes: Vec::new(),
            role: "os:admin".to_owned(),
            listen: std::net::Ipv4Addr::LOCALHOST.into(),
        }
    }
}

/// Which call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rpc {
    /// `machine.MachineService/Version`.
    Version,
    /// `machine.MachineService/ApplyConfiguration`.
    ApplyConfiguration,
    /// `cosi.resource.State/Get` (of the machine configuration, or anything else asked).
    GetMachineConfig,
}

/// One recorded call, recorded before it is answered (refused calls too).
#[derive(Clone, Debug)]
pub struct Call {
    /// The `node` metadata value.
    pub node: String,
    /// The call.
    pub rpc: Rpc,
    /// `ApplyConfiguration`'s mode as sent (`Mode as i32`).
    pub mode: Option<i32>,
    /// `ApplyConfiguration`'s configuration as sent (empty for the other calls).
    pub data: Vec<u8>,
    /// The Organizations of the client certificate (its roles).
    pub organizations: Vec<String>,
    /// When it arrived.
    pub at: Instant,
}

impl Call {
    /// [`Call::data`] as text (lossy UTF-8).
    pub fn data_text(&self) -> String {
        String::from_utf8_lossy(&self.data).into_owned()
    }
}

/// An injected failure.
struct Failure {
    node: String,
    rpc: Rpc,
    code: Code,
    message: String,
    /// `None`: until cleared.
    remaining: Option<usize>,
}

/// One node's state.
struct Node {
    config: Option<Vec<u8>>,
    /// Bumped by every replacement of the configuration (the COSI resource version).
    config_version: u64,
    version: String,
    hook: Option<Hook>,
    /// Serializes the node's hooks.
    hook_lock: Arc<tokio::sync::Mutex<()>>,
}

/// What the services and the test share.
struct Shared {
    nodes: Mutex<BTreeMap<String, Node>>,
    calls: Mutex<Vec<Call>>,
    failures: Mutex<Vec<Failure>>,
    hook_runs: Arc<Mutex<Vec<HookRun>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    fn record(&self, call: Call) {
        lock(&self.calls).push(call);
    }

    fn knows(&self, node: &str) -> bool {
        lock(&self.nodes).contains_key(node)
    }

    fn injected_failure(&self, node: &str, rpc: Rpc) -> Option<tonic::Status> {
        let mut failures = lock(&self.failures);
        let i = failures.iter().position(|f| f.node == node && f.rpc == rpc)?;
        let status = tonic::Status::new(failures[i].code, failures[i].message.clone());
        match &mut failures[i].remaining {
            Some(1) => {
                failures.remove(i);
            }
            Some(n) => *n -= 1,
            None => {}
        }
        Some(status)
    }

    fn version(&self, node: &str) -> String {
        lock(&self.nodes)
            .get(node)
            .map_or_else(|| DEFAULT_VERSION.to_owned(), |n| n.version.clone())
    }

    fn config_and_version(&self, node: &str) -> Option<(Vec<u8>, u64)> {
        let nodes = lock(&self.nodes);
        let n = nodes.get(node)?;
        Some((n.config.clone()?, n.config_version))
    }

    /// Replaces `node`'s configuration and starts its hook (in the caller's runtime).
    fn replace_config(&self, node: &str, config: Vec<u8>) {
        let mut nodes = lock(&self.nodes);
        let Some(n) = nodes.get_mut(node) else {
            return;
        };
        n.config = Some(config.clone());
        n.config_version += 1;
        if let Some(hook) = n.hook.clone() {
            let applied = Applied {
                node: node.to_owned(),
                config,
            };
            hooks::spawn(hook, applied, n.hook_lock.clone(), self.hook_runs.clone());
        }
    }
}

/// A running fake apid; dropping it stops it.
pub struct FakeTalos {
    runtime: Option<tokio::runtime::Runtime>,
    shared: Arc<Shared>,
    pki: pki::TalosPki,
    endpoint: SocketAddr,
    talosconfig: String,
    talosconfig_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl FakeTalos {
    /// Starts the endpoint on a free port of `options.listen` (127.0.0.1 by default) with `options.nodes` behind it and
    /// writes the talosconfig (role `options.role`, the first node as its default node).
    ///
    /// # Errors
    /// When the certificates, the listener, the runtime or the file cannot be made.
    pub fn start(options: Options) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("fake-talos")
            .enable_all()
            .build()
            .context("starting the fake Talos runtime")?;
        let pki = pki::TalosPki::new(options.listen)?;
        let nodes = options
            .nodes
            .iter()
            .map(|n| {
                let node = Node {
                    config: n.config.clone(),
                    config_version: u64::from(n.config.is_some()),
                    version: n.version.clone(),
                    hook: None,
                    hook_lock: Arc::default(),
                };
                (n.address.clone(), node)
            })
            .collect();
        let shared = Arc::new(Shared {
            nodes: Mutex::new(nodes),
            calls: Mutex::default(),
            failures: Mutex::default(),
            hook_runs: Arc::default(),
        });

        let listener = std::net::TcpListener::bind((options.listen, 0))
            .with_context(|| format!("binding the fake apid on {}", options.listen))?;
        listener.set_nonblocking(true)?;
        let endpoint = listener.local_addr()?;
        let tls = tonic::transport::ServerTlsConfig::new()
            .identity(tonic::transport::Identity::from_pem(
                &pki.apid_cert_pem,
                &pki.apid_key_pem,
            ))
            .client_ca_root(tonic::transport::Certificate::from_pem(&pki.ca_pem));
        let router = tonic::transport::Server::builder()
            .tls_config(tls)
            .context("the fake apid's TLS settings")?
            .add_service(
                MachineServiceServer::new(apid::Apid(shared.clone()))
                    .max_decoding_message_size(ichor_talos::client::MAX_MESSAGE_BYTES),
            )
            .add_service(StateServer::new(apid::Apid(shared.clone())));
        runtime.spawn(async move {
            let listener = match tokio::net::TcpListener::from_std(listener) {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("fake apid: cannot listen: {e}");
                    return;
                }
            };
            let incoming = tonic::transport::server::TcpIncoming::from(listener);
            if let Err(e) = router.serve_with_incoming(incoming).await {
                eprintln!("fake apid: stopped: {e}");
            }
        });

        let dir = tempfile::Builder::new().prefix("ichor-fake-talos-").tempdir()?;
        let first = options.nodes.first().map_or("127.0.0.1", |n| n.address.as_str());
        let talosconfig = pki.talosconfig(&options.role, &endpoint.to_string(), first)?;
        let talosconfig_path = dir.path().join("talosconfig");
        std::fs::write(&talosconfig_path, &talosconfig)
            .with_context(|| format!("writing {}", talosconfig_path.display()))?;
        Ok(Self {
            runtime: Some(runtime),
            shared,
            pki,
            endpoint,
            talosconfig,
            talosconfig_path,
            _dir: dir,
        })
    }

    /// [`FakeTalos::start`] with nodes at `addresses`, each with `config`.
    ///
    /// # Errors
    /// As [`FakeTalos::start`].
    pub fn with_nodes(addresses: &[&str], config: Option<&str>) -> anyhow::Result<Self> {
        Self::start(Options {
            nodes: addresses
                .iter()
                .map(|a| {
                    let node = NodeOptions::new(a);
                    match config {
                        Some(c) => node.with_config(c),
                        None => node,
                    }
                })
                .collect(),
            ..Options::default()
        })
    }

    /// The endpoint (`<listen>:port`), as the talosconfig names it.
    pub fn endpoint(&self) -> SocketAddr {
        self.endpoint
    }

    /// The talosconfig text (context `test`).
    pub fn talosconfig(&self) -> &str {
        &self.talosconfig
    }

    /// The file holding [`FakeTalos::talosconfig`].
    pub fn talosconfig_path(&self) -> &Path {
        &self.talosconfig_path
    }

    /// Another talosconfig for this endpoint whose certificate has the role `role`.
    ///
    /// # Errors
    /// When the certificate cannot be made.
    pub fn talosconfig_for_role(&self, role: &str) -> anyhow::Result<String> {
        let first = lock(&self.shared.nodes).keys().next().cloned();
        self.pki.talosconfig(
            role,
            &self.endpoint.to_string(),
            first.as_deref().unwrap_or("127.0.0.1"),
        )
    }

    /// The Talos CA, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.pki.ca_pem
    }

    /// Node `node`'s current machine configuration.
    pub fn config(&self, node: &str) -> Option<Vec<u8>> {
        lock(&self.shared.nodes).get(node)?.config.clone()
    }

    /// Sets node `node`'s machine configuration (a new node when it is unknown); no hook runs.
    pub fn set_config(&self, node: &str, config: Option<Vec<u8>>) {
        let mut nodes = lock(&self.shared.nodes);
        let n = nodes.entry(node.to_owned()).or_insert_with(|| Node {
            config: None,
            config_version: 0,
            version: DEFAULT_VERSION.to_owned(),
            hook: None,
            hook_lock: Arc::default(),
        });
        n.config = config;
        n.config_version += 1;
    }

    /// Sets the Talos version tag node `node` reports.
    pub fn set_version(&self, node: &str, tag: &str) {
        if let Some(n) = lock(&self.shared.nodes).get_mut(node) {
            tag.clone_into(&mut n.version);
        }
    }

    /// Runs `hook` after every successful apply to `node` (replacing an earlier hook), in the
    /// background once the apply is accepted; a node's hooks run one at a time.
    pub fn on_apply<F, Fut>(&self, node: &str, hook: F)
    where
        F: Fn(Applied) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<(), String>> + Send + 'static,
    {
        self.set_hook(node, Hook::asynchronous(hook));
    }

    /// As [`FakeTalos::on_apply`] with a blocking `hook`, run on a thread of its own (a real
    /// kube-apiserver restart: [`restart_apiserver_hook`]).
    pub fn on_apply_blocking<F>(&self, node: &str, hook: F)
    where
        F: Fn(Applied) -> Result<(), String> + Send + Sync + 'static,
    {
        self.set_hook(node, Hook::Blocking(Arc::new(hook)));
    }

    fn set_hook(&self, node: &str, hook: Hook) {
        if let Some(n) = lock(&self.shared.nodes).get_mut(node) {
            n.hook = Some(hook);
        }
    }

    /// Makes `rpc` to `node` fail with `code` and `message` until [`FakeTalos::clear_failures`]
    /// (`times: None`) or for the next `times` calls.
    pub fn fail(&self, node: &str, rpc: Rpc, code: Code, message: &str, times: Option<usize>) {
        lock(&self.shared.failures).push(Failure {
            node: node.to_owned(),
            rpc,
            code,
            message: message.to_owned(),
            remaining: times.filter(|t| *t > 0),
        });
    }

    /// Removes every injected failure.
    pub fn clear_failures(&self) {
        lock(&self.shared.failures).clear();
    }

    /// Every call so far, in arrival order.
    pub fn calls(&self) -> Vec<Call> {
        lock(&self.shared.calls).clone()
    }

    /// The `ApplyConfiguration` calls so far (refused ones too).
    pub fn applies(&self) -> Vec<Call> {
        self.calls_of(Rpc::ApplyConfiguration)
    }

    /// The calls of one kind so far.
    pub fn calls_of(&self, rpc: Rpc) -> Vec<Call> {
        lock(&self.shared.calls)
            .iter()
            .filter(|c| c.rpc == rpc)
            .cloned()
            .collect()
    }

    /// The hooks that have finished so far, in order.
    pub fn hook_runs(&self) -> Vec<HookRun> {
        lock(&self.shared.hook_runs).clone()
    }

    /// Waits (blocking the thread) until `count` hooks have finished or `timeout` has passed;
    /// the runs so far.
    pub fn wait_for_hooks(&self, count: usize, timeout: Duration) -> Vec<HookRun> {
        let deadline = Instant::now() + timeout;
        loop {
            let runs = self.hook_runs();
            if runs.len() >= count || Instant::now() >= deadline {
                return runs;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for FakeTalos {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
