//! The harness of the `config apply` tests: certificates, files, the fake servers on 127.0.0.1-3, and the real binary run against them.

use super::*;

pub(super) struct Harness {
    _runtime: tokio::runtime::Runtime,
    pub(super) dir: tempfile::TempDir,
    pub(super) talos: FakeTalos,
    pub(super) apiservers: Vec<Arc<Apiserver>>,
    pub(super) apiserver_port: u16,
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
    pub(super) fn start() -> Self {
        Self::start_with_role("os:admin")
    }

    /// The harness, with a talosconfig whose client certificate has the role `role`.
    pub(super) fn start_with_role(role: &str) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();

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

        // The Talos API endpoint: each node's apply restarts its fake apiserver.
        let initial = format!("{MAIN_DOC}---\n{OLD_AUTH_DOC}---\n{HOSTNAME_DOC}");
        let talos = FakeTalos::start(ichor_testkit::talos::Options {
            nodes: NODES
                .iter()
                .map(|(_, a)| ichor_testkit::talos::NodeOptions::new(a).with_config(initial.clone()))
                .collect(),
            role: role.to_owned(),
            ..ichor_testkit::talos::Options::default()
        })
        .unwrap();
        for ((_, address), apiserver) in NODES.iter().zip(&apiservers) {
            let apiserver = apiserver.clone();
            talos.on_apply_blocking(address, move |_| {
                apiserver.restart();
                Ok(())
            });
        }
        std::fs::write(dir.path().join("talosconfig"), talos.talosconfig()).unwrap();

        // The manifests and the machine configurations.
        let manifests = dir.path().join("manifests");
        std::fs::create_dir_all(&manifests).unwrap();
        std::fs::write(
            manifests.join("cluster.yaml"),
            include_str!("../../../../golden/fixtures/ichor-only/cluster.yaml"),
        )
        .unwrap();
        std::fs::write(
            manifests.join("trust.yaml"),
            include_str!("../../../../golden/fixtures/ichor-only/trust.yaml"),
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
            std::fs::write(configs.join(format!("{name}.yaml")), &initial).unwrap();
        }

        Self {
            _runtime: runtime,
            dir,
            talos,
            apiservers,
            apiserver_port,
        }
    }

    pub(super) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The flags every real run takes (short waits).
    pub(super) fn args(&self, node_timeout: &str) -> Vec<String> {
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

    pub(super) fn run(&self, args: &[String], extra: &[&str]) -> (i32, String, String) {
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

    /// cp-2's node refuses `ApplyConfiguration` as Talos's validation does (`InvalidArgument`).
    pub(super) fn refuse_cp2_apply(&self) {
        self.talos.fail(
            "127.0.0.2",
            Rpc::ApplyConfiguration,
            ichor_testkit::talos::Code::InvalidArgument,
            "1 error occurred:\n\t* fake validation failure",
            None,
        );
    }

    /// cp-2's apiserver stays down after its first apply and comes back after the next one (the
    /// rollback).
    pub(super) fn cp2_back_only_after_the_rollback(&self) {
        let apiserver = self.apiservers[1].clone();
        let applies = Arc::new(std::sync::Mutex::new(0usize));
        self.talos.on_apply_blocking("127.0.0.2", move |_| {
            let mut n = applies.lock().unwrap();
            *apiserver.never_back.lock().unwrap() = *n == 0;
            *n += 1;
            apiserver.restart();
            Ok(())
        });
    }

    pub(super) fn applied_nodes(&self) -> Vec<String> {
        self.talos.applies().into_iter().map(|a| a.node).collect()
    }

    /// The nodes asked for their `Version`, in order.
    pub(super) fn version_nodes(&self) -> Vec<String> {
        self.talos
            .calls_of(Rpc::Version)
            .into_iter()
            .map(|c| c.node)
            .collect()
    }

    pub(super) fn operation(&self) -> serde_yaml::Value {
        let text = std::fs::read_to_string(self.path("manifests/.ichor/operations/prod.yaml")).unwrap();
        serde_yaml::from_str(&text).unwrap()
    }

    pub(super) fn node_states(&self) -> Vec<String> {
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
    pub(super) fn rendered_document(&self) -> String {
        let manifests = ichor_server::manifest_files::load_dir(&self.path("manifests")).unwrap();
        let report = ichor_renderers::cluster::render_manifests(&manifests);
        report.clusters[0].yaml.clone().unwrap()
    }
}

pub(super) fn addresses(names: &[&str]) -> Vec<String> {
    names
        .iter()
        .map(|n| NODES.iter().find(|(m, _)| m == n).unwrap().1.to_owned())
        .collect()
}
