//! What the walkthrough reads and does on the node without holding it: kubectl as the cluster's
//! admin (the node's apiserver restarts under a rollout while the test polls), the Ichor core
//! objects a site has before it installs identity, and the clients of the issuer as the public
//! host name resolves for its users.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use ichor_testkit::control_plane::Kubectl;
use serde_json::Value;

/// The namespace Ichor installs into.
pub const NAMESPACE: &str = "ichor-system";

/// kubectl as the node's admin, by path: usable while a hook holds the node.
#[derive(Clone, Debug)]
pub struct Admin {
    pub kubectl: PathBuf,
    pub kubeconfig: PathBuf,
}

impl Admin {
    /// This kubectl, as the test kit runs it.
    fn kubectl(&self) -> Kubectl {
        Kubectl::new(&self.kubectl, &self.kubeconfig)
    }

    /// `kubectl ARGS` with `stdin`; its stdout, or an error quoting its stderr.
    pub fn run(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
        self.kubectl().run(args, stdin)
    }

    /// `kubectl apply -f -` of `yaml` (JSON is YAML).
    pub fn apply(&self, yaml: &str) -> anyhow::Result<String> {
        self.run(&["apply", "-f", "-"], Some(yaml))
    }

    /// The object as JSON; `None` when it does not exist.
    pub fn get(&self, kind: &str, name: &str) -> anyhow::Result<Option<Value>> {
        self.kubectl().get(kind, NAMESPACE, name)
    }

    /// The ClusterIP of Service `name` in [`NAMESPACE`].
    pub fn cluster_ip(&self, name: &str) -> anyhow::Result<IpAddr> {
        let svc = self
            .get("service", name)?
            .with_context(|| format!("no Service {NAMESPACE}/{name}"))?;
        let ip = svc["spec"]["clusterIP"]
            .as_str()
            .with_context(|| format!("Service {name} has no clusterIP"))?;
        Ok(ip.parse()?)
    }

    /// Waits as an operator does, `kubectl rollout status`, until Deployment `name`'s rollout
    /// is complete (every replica updated and available); how long it took.
    pub fn wait_ready(&self, name: &str, timeout: Duration) -> anyhow::Result<Duration> {
        let started = Instant::now();
        ichor_testkit::wait::until(&format!("deployment {name} to exist"), timeout, || {
            self.get("deployment", name)
        })?;
        let left = timeout.saturating_sub(started.elapsed()).as_secs().max(1);
        self.run(
            &[
                "rollout",
                "status",
                &format!("deployment/{name}"),
                "-n",
                NAMESPACE,
                &format!("--timeout={left}s"),
            ],
            None,
        )
        .map_err(|e| e.context(self.describe_pods()))?;
        Ok(started.elapsed())
    }

    /// The pods of [`NAMESPACE`], their events and the end of each container's log: what a
    /// failed wait says.
    pub fn describe_pods(&self) -> String {
        let mut out = String::new();
        for args in [
            &["get", "pods", "-n", NAMESPACE, "-o", "wide"][..],
            &["get", "events", "-n", NAMESPACE, "--sort-by=.lastTimestamp"][..],
        ] {
            out.push_str(&self.run(args, None).unwrap_or_else(|e| format!("{e:#}")));
        }
        if let Ok(names) = self.run(
            &[
                "get",
                "pods",
                "-n",
                NAMESPACE,
                "-o",
                "jsonpath={.items[*].metadata.name}",
            ],
            None,
        ) {
            for pod in names.split_whitespace() {
                out.push_str(&format!("\n--- {pod}\n"));
                out.push_str(
                    &self
                        .run(
                            &["logs", "-n", NAMESPACE, pod, "--all-containers", "--tail=30"],
                            None,
                        )
                        .unwrap_or_else(|e| format!("{e:#}")),
                );
            }
        }
        out
    }

    /// The pods of [`NAMESPACE`] with label `component`, by name.
    pub fn pods(&self, component: &str) -> anyhow::Result<Vec<String>> {
        let names = self.run(
            &[
                "get",
                "pods",
                "-n",
                NAMESPACE,
                "-l",
                &format!("app.kubernetes.io/component={component}"),
                "-o",
                "jsonpath={.items[*].metadata.name}",
            ],
            None,
        )?;
        Ok(names.split_whitespace().map(str::to_owned).collect())
    }
}

/// The Ichor core kinds identity depends on, as a site has them (identity's views in
/// `hack/crds/`), and the namespace.
pub fn core_objects() -> anyhow::Result<String> {
    let namespace = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NAMESPACE}\n");
    Ok(namespace + &ichor_testkit::install::crd_dir_manifests("hack/crds")?)
}

/// The TalosCluster `cluster` whose endpoint is the node's apiserver, and its one control plane,
/// the node itself (applied once the core kinds are served).
pub fn talos_objects(cluster: &str, apiserver: SocketAddr) -> String {
    format!(
        "apiVersion: ichor.maesh.dev/v1alpha1\nkind: TalosCluster\nmetadata:\n  name: {cluster}\n  namespace: {NAMESPACE}\n\
spec:\n  versionContract: v1.14\n  endpoint: https://{apiserver}\n---\n\
apiVersion: ichor.maesh.dev/v1alpha1\nkind: TalosMachine\nmetadata:\n  name: {cluster}-cp-1\n  namespace: {NAMESPACE}\n\
spec:\n  cluster: {cluster}\n  role: controlplane\n  address: {}\n",
        apiserver.ip()
    )
}

/// A reqwest client that trusts `ca_pem` only and resolves `host` to `to` (the Service's
/// ClusterIP, as the site's DNS would).
pub fn http_client(ca_pem: &str, host: &str, to: SocketAddr) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes())?)
        .resolve(host, to)
        .timeout(Duration::from_secs(30))
        .build()?)
}

/// A gRPC channel to the issuer's public listener at `to`, verified as `host` against `ca_pem`.
pub async fn channel(ca_pem: &str, host: &str, to: SocketAddr) -> anyhow::Result<tonic::transport::Channel> {
    use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};
    Ok(Endpoint::from_shared(format!("https://{to}"))?
        .origin(format!("https://{host}:{}", to.port()).parse()?)
        .tls_config(
            ClientTlsConfig::new()
                .domain_name(host)
                .ca_certificate(Certificate::from_pem(ca_pem)),
        )?
        .connect_timeout(Duration::from_secs(10))
        .connect()
        .await?)
}

/// Where the walkthrough's steps and figures are kept, printed at the end for the record.
#[derive(Default)]
pub struct Record {
    lines: Vec<String>,
    step_started: Option<(String, Instant)>,
}

impl Record {
    /// Starts step `name` (ending the one before).
    pub fn step(&mut self, name: &str) {
        self.end_step();
        eprintln!("walkthrough: {name}");
        self.step_started = Some((name.to_owned(), Instant::now()));
    }

    /// Ends the current step.
    pub fn end_step(&mut self) {
        if let Some((name, started)) = self.step_started.take() {
            self.lines
                .push(format!("step {name}: {:.1} s", started.elapsed().as_secs_f64()));
        }
    }

    /// A figure.
    pub fn figure(&mut self, what: &str, value: impl std::fmt::Display) {
        eprintln!("walkthrough: {what}: {value}");
        self.lines.push(format!("{what}: {value}"));
    }

    /// Prints everything recorded.
    pub fn print(&mut self) {
        self.end_step();
        eprintln!("\n== walkthrough record ==");
        for line in &self.lines {
            eprintln!("{line}");
        }
    }
}

/// The image archive `name` written by `hack/images/build.sh`.
pub fn image(name: &str) -> Option<PathBuf> {
    ichor_testkit::consumers::require_path(
        ichor_testkit::consumers::build_dir()
            .join("images")
            .join(format!("{name}.tar")),
        "hack/images/build.sh",
    )
}

/// The repository's chart.
pub fn chart() -> PathBuf {
    ichor_testkit::consumers::repo_root().join("helm/ichor")
}

/// Writes `contents` to `dir/name` (0600); its path.
pub fn write(dir: &Path, name: &str, contents: &str) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(name);
    std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    Ok(path)
}
