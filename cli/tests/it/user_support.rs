//! Test support shared by `tests/user_*.rs` and `tests/kubectl.rs`: a fresh CA and an https
//! server on 127.0.0.1 for any axum router, the login cache of a temporary `$HOME`, and the real
//! binary with that `$HOME`.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, missing_docs)]

use std::{
    path::Path,
    process::{Command, Stdio},
    sync::Arc,
};

use ichor_cli::commands::auth::{
    cache::{CACHE_VERSION, CacheDir, CacheEntry, Endpoints},
    secret::Secret,
};

/// A CA and a leaf for 127.0.0.1 signed by it.
pub struct TestCa {
    pub ca_pem: String,
    pub server_config: Arc<rustls::ServerConfig>,
}

impl TestCa {
    pub fn new() -> Self {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .unwrap()
            .signed_by(&leaf_key, &ca)
            .unwrap();
        let mut config =
            rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(
                    vec![leaf.der().clone()],
                    rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
                )
                .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Self {
            ca_pem: ca.pem(),
            server_config: Arc::new(config),
        }
    }
}

/// Serves `app` over https on 127.0.0.1 from `runtime`; returns the base URL.
pub fn serve_https(runtime: &tokio::runtime::Runtime, ca: &TestCa, app: axum::Router) -> String {
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let base = format!("https://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::clone(&ca.server_config));
    runtime.spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper_util::service::TowerToHyperService::new(app);
                let _ = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    base
}

/// A runtime for test servers.
pub fn server_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The login cache of `home`.
pub fn cache_dir(home: &Path) -> CacheDir {
    CacheDir::new(home.join(".ichor/auth"))
}

/// Stores a login for (`issuer`, `ichor-cli`, `audience`) in `home`'s cache.
pub fn seed_login(
    home: &Path,
    issuer: &str,
    audience: &str,
    id_token: &str,
    exp: i64,
    refresh_token: Option<&str>,
) {
    cache_dir(home)
        .store(&CacheEntry {
            v: CACHE_VERSION,
            issuer: issuer.into(),
            client_id: "ichor-cli".into(),
            audience: audience.into(),
            endpoints: Some(Endpoints {
                authorization: format!("{issuer}/oidc/authorize"),
                token: format!("{issuer}/oidc/token"),
                revocation: Some(format!("{issuer}/oidc/revoke")),
            }),
            subject: "alice".into(),
            groups: vec!["ichor:viewer".into()],
            id_token: Secret::new(id_token.into()),
            id_token_exp: exp,
            refresh_token: refresh_token.map(|t| Secret::new(t.into())),
        })
        .unwrap();
}

/// `ichor` with `HOME=home`, stdin not a terminal, no inherited Ichor or kube settings.
pub fn ichor_command(home: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ichor"));
    cmd.args(args)
        .env("HOME", home)
        .env_remove("KUBERNETES_EXEC_INFO")
        .env_remove("ICHOR_CA_FILE")
        .env_remove("ICHOR_ISSUER")
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null());
    cmd
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
