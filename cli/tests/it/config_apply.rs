//! `ichor config apply` through the real binary against servers that speak the Talos machine
//! API over mutual TLS (a tonic server with an Ed25519 Talos CA and an `os:admin` client
//! certificate whose key is labelled `ED25519 PRIVATE KEY`, as talosctl writes it) and one
//! kube-apiserver `/readyz` per node (127.0.0.1, .2, .3 on the same port) that goes down after
//! an apply and comes back. Every request is recorded: the order, the mode, the target node,
//! the data, the client certificate's role, and when each `/readyz` came back.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::{
    collections::{HashMap, HashSet},
    net::SocketAddr,
    path::PathBuf,
    process::{Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use base64::{Engine, engine::general_purpose::STANDARD};
use ichor_cli::talos::proto::{
    ApplyConfiguration, ApplyConfigurationRequest, ApplyConfigurationResponse, Version, VersionInfo,
    VersionResponse,
    apply_configuration_request::Mode,
    machine_service_server::{MachineService, MachineServiceServer},
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::{Request, Response, Status};

const NODES: [(&str, &str); 3] = [
    ("cp-1", "127.0.0.1"),
    ("cp-2", "127.0.0.2"),
    ("cp-3", "127.0.0.3"),
];
/// How long a fake apiserver stays down after an apply.
const DOWN_FOR: Duration = Duration::from_millis(300);

const MAIN_DOC: &str = "version: v1alpha1\nmachine:\n  type: controlplane\n";
const OLD_AUTH_DOC: &str =
    "apiVersion: v1alpha1\nkind: KubeAuthenticationConfig\nconfig:\n  marker: old-trust\n";
const HOSTNAME_DOC: &str = "apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: keep-me # as written\n";

// ---------------------------------------------------------------------------------------------
// The fake kube-apiserver /readyz of one node.

#[derive(Default)]
struct Apiserver {
    /// An apply does not restart it (it stays ready throughout).
    no_restart: Mutex<bool>,
    /// `None`: up. `Some(None)`: down for good. `Some(Some(t))`: down until `t`.
    down: Mutex<Option<Option<Instant>>>,
    /// When it first answered 200 after having been down.
    came_back_at: Mutex<Option<Instant>>,
    never_back: Mutex<bool>,
    hits: Mutex<usize>,
    /// Whether a probe saw it down since its last restart: a restarting apiserver is seen down
    /// at least once, however late the first probe comes on a loaded machine.
    seen_down: Mutex<bool>,
}

impl Apiserver {
    fn restart(&self) {
        if *self.no_restart.lock().unwrap() {
            return;
        }
        let never = *self.never_back.lock().unwrap();
        *self.down.lock().unwrap() = Some(if never {
            None
        } else {
            Some(Instant::now() + DOWN_FOR)
        });
        *self.came_back_at.lock().unwrap() = None;
        *self.seen_down.lock().unwrap() = false;
    }
    fn ready_now(&self) -> bool {
        *self.hits.lock().unwrap() += 1;
        let mut down = self.down.lock().unwrap();
        match *down {
            None => true,
            Some(None) => false,
            Some(Some(until)) if Instant::now() < until || !*self.seen_down.lock().unwrap() => {
                *self.seen_down.lock().unwrap() = true;
                false
            }
            Some(Some(_)) => {
                *down = None;
                *self.came_back_at.lock().unwrap() = Some(Instant::now());
                true
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The fake Talos API (apid): routes by the `node` metadata.

#[derive(Debug, Clone)]
struct Applied {
    node: String,
    mode: i32,
    data: String,
    organizations: Vec<String>,
    at: Instant,
}

#[derive(Default)]
struct Talos {
    applies: Mutex<Vec<Applied>>,
    versions: Mutex<Vec<String>>,
    /// Nodes whose ApplyConfiguration fails.
    failing: Mutex<HashSet<String>>,
    apiservers: HashMap<String, Arc<Apiserver>>,
}

fn target_node<T>(request: &Request<T>) -> Result<String, Status> {
    let values: Vec<_> = request.metadata().get_all("node").iter().collect();
    assert!(
        request.metadata().get("nodes").is_none(),
        "the deprecated `nodes` key is never sent"
    );
    match values.as_slice() {
        [one] => Ok(one.to_str().unwrap().to_owned()),
        _ => Err(Status::invalid_argument(
            "exactly one `node` metadata value is expected",
        )),
    }
}

fn organizations<T>(request: &Request<T>) -> Vec<String> {
    let certs = request.peer_certs().expect("a client certificate (mutual TLS)");
    let (_, cert) = x509_parser::parse_x509_certificate(certs[0].as_ref()).unwrap();
    cert.subject()
        .iter_organization()
        .map(|o| o.as_str().unwrap().to_owned())
        .collect()
}

struct Apid(Arc<Talos>);

#[tonic::async_trait]
impl MachineService for Apid {
    async fn apply_configuration(
        &self,
        request: Request<ApplyConfigurationRequest>,
    ) -> Result<Response<ApplyConfigurationResponse>, Status> {
        let node = target_node(&request)?;
        let organizations = organizations(&request);
        let body = request.into_inner();
        self.0.applies.lock().unwrap().push(Applied {
            node: node.clone(),
            mode: body.mode,
            data: String::from_utf8(body.data).unwrap(),
            organizations: organizations.clone(),
            at: Instant::now(),
        });
        if !organizations.iter().any(|o| o == "os:admin") {
            return Err(Status::permission_denied("not authorized"));
        }
        if body.mode == Mode::Reboot as i32 {
            return Err(Status::unimplemented(
                "apply configuration with reboot is not supported",
            ));
        }
        if self.0.failing.lock().unwrap().contains(&node) {
            return Err(Status::invalid_argument(
                "1 error occurred:\n\t* fake validation failure",
            ));
        }
        self.0.apiservers[&node].restart();
        Ok(Response::new(ApplyConfigurationResponse {
            messages: vec![ApplyConfiguration {
                metadata: None,
                warnings: vec![],
                mode: Mode::NoReboot as i32,
                mode_details: "Applied configuration without a reboot".to_owned(),
            }],
        }))
    }

    async fn version(&self, request: Request<()>) -> Result<Response<VersionResponse>, Status> {
        let node = target_node(&request)?;
        self.0.versions.lock().unwrap().push(node);
        Ok(Response::new(VersionResponse {
            messages: vec![Version {
                metadata: None,
                version: Some(VersionInfo {
                    tag: "v1.14.3".to_owned(),
                    sha: "abc".to_owned(),
                }),
            }],
        }))
    }
}

// ---------------------------------------------------------------------------------------------
// The harness: certificates, files, servers.

struct Harness {
    _runtime: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
    talos: Arc<Talos>,
    apiservers: Vec<Arc<Apiserver>>,
    apiserver_port: u16,
}

fn ed25519_key() -> rcgen::KeyPair {
    rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap()
}

/// Binds 127.0.0.1, .2 and .3 on one port.
fn bind_three(runtime: &tokio::runtime::Runtime) -> (Vec<tokio::net::TcpListener>, u16) {
    for _ in 0..50 {
        let first = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let port = first.local_addr().unwrap().port();
        let rest: Vec<_> = ["127.0.0.2", "127.0.0.3"]
            .iter()
            .map(|ip| {
                runtime.block_on(tokio::net::TcpListener::bind(SocketAddr::new(
                    ip.parse().unwrap(),
                    port,
                )))
            })
            .collect();
        if rest.iter().all(Result::is_ok) {
            let mut all = vec![first];
            all.extend(rest.into_iter().map(Result::unwrap));
            return (all, port);
        }
    }
    panic!("no port free on 127.0.0.1-3");
}

impl Harness {
    fn start() -> Self {
        Self::start_with_role("os:admin")
    }

    /// The harness, with a talosconfig whose client certificate has the role `role`.
    fn start_with_role(role: &str) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();

        // Talos PKI: Ed25519 like `talosctl gen config`.
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "talos");
        let talos_ca = rcgen::CertifiedIssuer::self_signed(ca_params, ed25519_key()).unwrap();
        let apid_key = ed25519_key();
        let mut apid_params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        apid_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let apid_cert = apid_params.signed_by(&apid_key, &talos_ca).unwrap();
        let admin_key = ed25519_key();
        let mut admin_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        admin_params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, role);
        admin_params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
        admin_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let admin_cert = admin_params.signed_by(&admin_key, &talos_ca).unwrap();
        let admin_key_pem = admin_key
            .serialize_pem()
            .replace("PRIVATE KEY", "ED25519 PRIVATE KEY");

        // Kubernetes PKI: ECDSA; one serving certificate for the three node addresses.
        let mut kca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        kca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let kube_ca =
            rcgen::CertifiedIssuer::self_signed(kca_params, rcgen::KeyPair::generate().unwrap()).unwrap();
        let kas_key = rcgen::KeyPair::generate().unwrap();
        let kas_cert = rcgen::CertificateParams::new(NODES.map(|(_, a)| a.to_owned()).to_vec())
            .unwrap()
            .signed_by(&kas_key, &kube_ca)
            .unwrap();
        std::fs::write(dir.path().join("kube-ca.pem"), kube_ca.pem()).unwrap();

        // The apiservers.
        let apiservers: Vec<Arc<Apiserver>> = NODES.iter().map(|_| Arc::new(Apiserver::default())).collect();
        let (listeners, apiserver_port) = bind_three(&runtime);
        let tls =
            rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(
                    vec![kas_cert.der().clone()],
                    rustls::pki_types::PrivateKeyDer::Pkcs8(kas_key.serialize_der().into()),
                )
                .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        for (listener, apiserver) in listeners.into_iter().zip(&apiservers) {
            let (acceptor, apiserver) = (acceptor.clone(), apiserver.clone());
            runtime.spawn(async move {
                loop {
                    let Ok((tcp, _)) = listener.accept().await else { return };
                    let (acceptor, apiserver) = (acceptor.clone(), apiserver.clone());
                    tokio::spawn(async move {
                        let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                        let mut buf = Vec::new();
                        let mut chunk = [0u8; 1024];
                        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            match tls.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        assert!(buf.starts_with(b"GET /readyz "), "only /readyz is asked");
                        let reply: &[u8] = if apiserver.ready_now() {
                            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
                        } else {
                            b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 20\r\nconnection: close\r\n\r\n[-]etcd failed: down"
                        };
                        let _ = tls.write_all(reply).await;
                        let _ = tls.shutdown().await;
                    });
                }
            });
        }

        // The Talos API endpoint.
        let talos = Arc::new(Talos {
            apiservers: NODES
                .iter()
                .zip(&apiservers)
                .map(|((_, a), s)| ((*a).to_owned(), s.clone()))
                .collect(),
            ..Default::default()
        });
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let talos_port = listener.local_addr().unwrap().port();
        let server_tls = tonic::transport::ServerTlsConfig::new()
            .identity(tonic::transport::Identity::from_pem(
                apid_cert.pem(),
                apid_key.serialize_pem(),
            ))
            .client_ca_root(tonic::transport::Certificate::from_pem(talos_ca.pem()));
        let service = MachineServiceServer::new(Apid(talos.clone()));
        runtime.spawn(async move {
            tonic::transport::Server::builder()
                .tls_config(server_tls)
                .unwrap()
                .add_service(service)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
                .await
                .unwrap();
        });

        // The talosconfig.
        let talosconfig = format!(
            "context: test\ncontexts:\n  test:\n    endpoints: [\"127.0.0.1:{talos_port}\"]\n    nodes: [127.0.0.1]\n    ca: {}\n    crt: {}\n    key: {}\n",
            STANDARD.encode(talos_ca.pem()),
            STANDARD.encode(admin_cert.pem()),
            STANDARD.encode(&admin_key_pem),
        );
        std::fs::write(dir.path().join("talosconfig"), talosconfig).unwrap();

        // The manifests and the machine configurations.
        let manifests = dir.path().join("manifests");
        std::fs::create_dir_all(&manifests).unwrap();
        std::fs::write(
            manifests.join("cluster.yaml"),
            include_str!("../../../golden/fixtures/ichor-only/cluster.yaml"),
        )
        .unwrap();
        std::fs::write(
            manifests.join("trust.yaml"),
            include_str!("../../../golden/fixtures/ichor-only/trust.yaml"),
        )
        .unwrap();
        let mut machines = String::new();
        for (name, address) in NODES {
            machines.push_str(&format!(
                "---\napiVersion: ichor.maesh.dev/v1alpha1\nkind: TalosMachine\nmetadata:\n  name: {name}\n  namespace: ichor-system\nspec:\n  cluster: prod\n  role: controlplane\n  address: {address}\nstatus:\n  appliedDocumentHashes:\n    KubeAuthenticationConfig: \"0000\"\n"
            ));
        }
        machines.push_str("---\napiVersion: ichor.maesh.dev/v1alpha1\nkind: TalosMachine\nmetadata:\n  name: w-1\n  namespace: ichor-system\nspec:\n  cluster: prod\n  role: worker\n  address: 127.0.0.9\n");
        std::fs::write(manifests.join("machines.yaml"), machines).unwrap();
        let configs = dir.path().join("machineconfigs");
        std::fs::create_dir_all(&configs).unwrap();
        for (name, _) in NODES {
            std::fs::write(
                configs.join(format!("{name}.yaml")),
                format!("{MAIN_DOC}---\n{OLD_AUTH_DOC}---\n{HOSTNAME_DOC}"),
            )
            .unwrap();
        }

        Self {
            _runtime: runtime,
            dir,
            talos,
            apiservers,
            apiserver_port,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The flags every real run takes (short waits).
    fn args(&self, node_timeout: &str) -> Vec<String> {
        [
            "config",
            "apply",
            "--dir",
            self.path("manifests").to_str().unwrap(),
            "--cluster",
            "prod",
            "--machine-config-dir",
            self.path("machineconfigs").to_str().unwrap(),
            "--talosconfig",
            self.path("talosconfig").to_str().unwrap(),
            "--kube-ca-file",
            self.path("kube-ca.pem").to_str().unwrap(),
            "--apiserver-port",
            &self.apiserver_port.to_string(),
            "--poll-interval",
            "50ms",
            "--restart-grace",
            "20s",
            "--node-timeout",
            node_timeout,
        ]
        .map(str::to_owned)
        .to_vec()
    }

    fn run(&self, args: &[String], extra: &[&str]) -> (i32, String, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_ichor"))
            .args(args)
            .args(extra)
            .env("HOME", self.dir.path())
            .env_remove("TALOSCONFIG")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn applied_nodes(&self) -> Vec<String> {
        self.talos
            .applies
            .lock()
            .unwrap()
            .iter()
            .map(|a| a.node.clone())
            .collect()
    }

    fn operation(&self) -> serde_yaml::Value {
        let text = std::fs::read_to_string(self.path("manifests/.ichor/operations/prod.yaml")).unwrap();
        serde_yaml::from_str(&text).unwrap()
    }

    fn node_states(&self) -> Vec<String> {
        self.operation()["status"]["nodes"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|n| {
                format!(
                    "{}={}",
                    n["machine"].as_str().unwrap(),
                    n["state"].as_str().unwrap()
                )
            })
            .collect()
    }

    /// The rendered KubeAuthenticationConfig, as the renderer makes it.
    fn rendered_document(&self) -> String {
        let manifests = ichor_server::manifest_files::load_dir(&self.path("manifests")).unwrap();
        let report = ichor_renderers::cluster::render_manifests(&manifests);
        report.clusters[0].yaml.clone().unwrap()
    }
}

fn addresses(names: &[&str]) -> Vec<String> {
    names
        .iter()
        .map(|n| NODES.iter().find(|(m, _)| m == n).unwrap().1.to_owned())
        .collect()
}

// ---------------------------------------------------------------------------------------------

#[test]
fn applies_to_one_control_plane_at_a_time_in_plan_order_waiting_for_each_readyz() {
    let h = Harness::start();
    let (code, stdout, stderr) = h.run(&h.args("5s"), &["--yes"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");

    assert_eq!(h.applied_nodes(), addresses(&["cp-1", "cp-2", "cp-3"]));
    assert_eq!(
        *h.talos.versions.lock().unwrap(),
        addresses(&["cp-1", "cp-2", "cp-3"])
    );
    let applies = h.talos.applies.lock().unwrap().clone();
    let rendered = h.rendered_document();
    for a in &applies {
        assert_eq!(a.mode, Mode::NoReboot as i32, "mode NO_REBOOT, never REBOOT (0)");
        assert_eq!(
            a.organizations,
            ["os:admin"],
            "the talosconfig's admin certificate was presented"
        );
        assert_eq!(
            a.data,
            format!("{MAIN_DOC}---\n{rendered}---\n{HOSTNAME_DOC}"),
            "the full configuration with only the KubeAuthenticationConfig document replaced"
        );
        assert!(!a.data.contains("old-trust"));
    }
    // The next apply happens only after the previous node's /readyz was back.
    for i in 0..2 {
        let back = h.apiservers[i]
            .came_back_at
            .lock()
            .unwrap()
            .expect("readyz came back");
        assert!(
            applies[i].at + DOWN_FOR <= back,
            "node {i} was waited for while down"
        );
        assert!(
            back <= applies[i + 1].at,
            "node {} was applied before node {i} was ready",
            i + 1
        );
    }

    assert!(
        stdout
            .contains("Restarts the Kubernetes API server on each control plane, one at a time; no reboot.")
    );
    assert!(stdout.contains("1. cp-1 (127.0.0.1)"), "{stdout}");
    for line in [
        "[1/3] cp-1: Talos v1.14.3",
        "[1/3] cp-1: applied: Applied configuration without a reboot",
        "[1/3] cp-1: /readyz not ready: HTTP 503",
        "[1/3] cp-1: the API server restarted and is ready",
        "[3/3] cp-3: done in ",
        "Done: 3 control plane(s) of prod run the rendered configuration.",
    ] {
        assert!(stderr.contains(line), "missing {line:?} in:\n{stderr}");
    }
    assert_eq!(h.node_states(), ["cp-1=Done", "cp-2=Done", "cp-3=Done"]);
    assert_eq!(h.operation()["status"]["phase"], "Succeeded");
    assert_eq!(h.operation()["spec"]["kind"], "config");

    // The manifests still show the old hashes (a GitOps tree lags); the record says it is done.
    let (code, _, again) = h.run(&h.args("5s"), &["--yes"]);
    assert_eq!(code, 0, "{again}");
    assert!(again.contains("already applied this render"), "{again}");
    assert_eq!(h.talos.applies.lock().unwrap().len(), 3, "nothing applied again");
    eprintln!("--- progress as printed ---\n{stderr}");
}

#[test]
fn a_node_whose_readyz_never_returns_stops_the_rollout_and_a_rerun_resumes_there() {
    let h = Harness::start();
    *h.apiservers[1].never_back.lock().unwrap() = true;
    let started = Instant::now();
    let (code, stdout, stderr) = h.run(&h.args("1500ms"), &["--yes"]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the node timeout bounds the wait"
    );
    assert_eq!(h.applied_nodes(), addresses(&["cp-1", "cp-2"]), "cp-3 untouched");
    assert!(
        stderr.contains(
            "[2/3] cp-2: FAILED: timed out after 1.5s (--node-timeout) waiting for /readyz (last: HTTP 503)"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("Not touched: cp-3."), "{stderr}");
    assert!(
        stderr.contains("--resume"),
        "the message says how to resume:\n{stderr}"
    );
    assert_eq!(h.node_states(), ["cp-1=Done", "cp-2=Failed", "cp-3=Pending"]);
    assert_eq!(h.operation()["status"]["phase"], "Failed");
    assert_eq!(h.operation()["status"]["currentStep"], 1);

    // The apiserver is fixed; a plain re-run for the same render offers to resume (--yes takes it).
    *h.apiservers[1].never_back.lock().unwrap() = false;
    *h.apiservers[1].down.lock().unwrap() = None;
    let (code, stdout, stderr) = h.run(&h.args("5s"), &["--yes"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("Resuming the operation"), "{stdout}");
    assert!(stderr.contains("[1/3] cp-1: done earlier; skipped"), "{stderr}");
    assert_eq!(
        h.applied_nodes(),
        addresses(&["cp-1", "cp-2", "cp-2", "cp-3"]),
        "cp-1 is not applied again"
    );
    assert_eq!(h.node_states(), ["cp-1=Done", "cp-2=Done", "cp-3=Done"]);
}

#[test]
fn a_failed_apply_stops_before_later_nodes_and_resume_continues_at_the_failed_node() {
    let h = Harness::start();
    h.talos.failing.lock().unwrap().insert("127.0.0.2".to_owned());
    let (code, stdout, stderr) = h.run(&h.args("5s"), &["--yes"]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert_eq!(h.applied_nodes(), addresses(&["cp-1", "cp-2"]));
    assert!(stderr.contains("InvalidArgument: 1 error occurred"), "{stderr}");
    assert!(
        stderr.contains("check the file in --machine-config-dir"),
        "{stderr}"
    );
    assert!(stderr.contains("Not touched: cp-3."), "{stderr}");
    assert_eq!(
        *h.apiservers[2].hits.lock().unwrap(),
        0,
        "cp-3's apiserver was not even probed"
    );
    assert_eq!(h.node_states(), ["cp-1=Done", "cp-2=Failed", "cp-3=Pending"]);
    let message = h.operation()["status"]["message"].as_str().unwrap().to_owned();
    assert!(message.starts_with("stopped at cp-2: "), "{message}");

    h.talos.failing.lock().unwrap().clear();
    let (code, stdout, stderr) = h.run(&h.args("5s"), &["--yes", "--resume"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(h.applied_nodes(), addresses(&["cp-1", "cp-2", "cp-2", "cp-3"]));
    assert_eq!(h.node_states(), ["cp-1=Done", "cp-2=Done", "cp-3=Done"]);
    assert_eq!(h.operation()["status"]["phase"], "Succeeded");

    // Nothing left to resume.
    let (code, _, stderr) = h.run(&h.args("5s"), &["--yes", "--resume"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("there is no interrupted operation for cluster prod"),
        "{stderr}"
    );
}

#[test]
fn a_dry_run_prints_the_plan_and_sends_nothing() {
    let h = Harness::start();
    let (code, stdout, stderr) = h.run(&h.args("5s"), &["--dry-run"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("Cluster prod: Restarts the Kubernetes API server"),
        "{stdout}"
    );
    for (i, (name, address)) in NODES.iter().enumerate() {
        assert!(
            stdout.contains(&format!("{}. {name} ({address})", i + 1)),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!(
                "{name}: in {}",
                h.path("machineconfigs").join(format!("{name}.yaml")).display()
            )),
            "{stdout}"
        );
    }
    assert!(stdout.contains("replaces the KubeAuthenticationConfig document"));
    assert!(stderr.contains("dry run: nothing was sent to any node"));
    assert!(h.talos.applies.lock().unwrap().is_empty());
    assert!(h.talos.versions.lock().unwrap().is_empty());
    assert!(h.apiservers.iter().all(|a| *a.hits.lock().unwrap() == 0));
    assert!(!h.path("manifests/.ichor").exists(), "a dry run records nothing");
}

#[test]
fn without_a_terminal_and_without_yes_it_refuses_and_touches_nothing() {
    let h = Harness::start();
    let (code, stdout, stderr) = h.run(&h.args("5s"), &[]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("1. cp-1 (127.0.0.1)"),
        "the plan is shown first:\n{stdout}"
    );
    assert!(stderr.contains("there is no terminal to ask on"), "{stderr}");
    assert!(stderr.contains("pass --yes"), "{stderr}");
    assert!(h.talos.applies.lock().unwrap().is_empty());
    assert!(h.talos.versions.lock().unwrap().is_empty());
}

#[test]
fn a_missing_machine_configuration_is_found_before_any_node_is_touched() {
    let h = Harness::start();
    std::fs::remove_file(h.path("machineconfigs/cp-3.yaml")).unwrap();
    let (code, _, stderr) = h.run(&h.args("5s"), &["--yes"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("cp-3.yaml: cannot read control plane cp-3's current machine configuration"),
        "{stderr}"
    );
    assert!(stderr.contains("nothing applied"));
    assert!(h.talos.applies.lock().unwrap().is_empty());
}

#[test]
fn without_the_kubernetes_ca_it_asks_for_it_or_the_explicit_skip_flag() {
    let h = Harness::start();
    let args: Vec<String> = h.args("5s");
    let i = args.iter().position(|a| a == "--kube-ca-file").unwrap();
    let mut args = args;
    args.drain(i..i + 2);
    let (code, _, stderr) = h.run(&args, &["--yes"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("--kube-ca-file FILE"), "{stderr}");
    assert!(stderr.contains("--insecure-skip-readyz-tls-verify"), "{stderr}");
    assert!(h.talos.applies.lock().unwrap().is_empty());

    let (code, _, stderr) = h.run(&args, &["--yes", "--insecure-skip-readyz-tls-verify"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(h.applied_nodes(), addresses(&["cp-1", "cp-2", "cp-3"]));
}

#[test]
fn a_readyz_never_seen_down_counts_as_restarted_after_the_restart_grace() {
    let h = Harness::start();
    for a in &h.apiservers {
        *a.no_restart.lock().unwrap() = true;
    }
    let mut args = h.args("5s");
    let i = args.iter().position(|a| a == "--restart-grace").unwrap();
    args[i + 1] = "400ms".to_owned();
    let (code, stdout, stderr) = h.run(&args, &["--yes"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("[1/3] cp-1: /readyz stayed ready for 0.4s: no restart was seen"),
        "{stderr}"
    );
    let applies = h.talos.applies.lock().unwrap().clone();
    for pair in applies.windows(2) {
        assert!(
            pair[1].at - pair[0].at >= Duration::from_millis(400),
            "each node waited the grace"
        );
    }
    assert_eq!(h.node_states(), ["cp-1=Done", "cp-2=Done", "cp-3=Done"]);
}

#[test]
fn a_talosconfig_without_the_os_admin_role_is_refused_by_the_node_and_stops_at_the_first() {
    let h = Harness::start_with_role("os:reader");
    let (code, stdout, stderr) = h.run(&h.args("5s"), &["--yes"]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stderr.contains("PermissionDenied: not authorized"), "{stderr}");
    assert!(
        stderr.contains("needs a talosconfig whose certificate has the role os:admin"),
        "{stderr}"
    );
    assert!(stderr.contains("Not touched: cp-2, cp-3."), "{stderr}");
    assert_eq!(h.applied_nodes(), addresses(&["cp-1"]));
    assert_eq!(h.node_states(), ["cp-1=Failed", "cp-2=Pending", "cp-3=Pending"]);
}
