//! Helpers shared by the `server_*` tests: a test CA and leaves (rcgen), `keys.json` documents
//! over a committed test key, file writes as Kubernetes does them, a TLS client that reports the
//! certificate it was served, and an HTTPS client trusting the test CA.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use base64::Engine as _;
use ichor_testkit::pki::TestCa;
use jiff::Timestamp;
use rcgen::KeyPair;
use rustls::pki_types::{CertificateDer, ServerName};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub const RSA_PKCS8: &str = include_str!("../fixtures/rsa2048.pkcs8.pem");
pub const RSA_PKCS1: &str = include_str!("../fixtures/rsa2048.pkcs1.pem");
pub const P256_PKCS8: &str = include_str!("../fixtures/p256.pkcs8.pem");
pub const P256_SEC1: &str = include_str!("../fixtures/p256.sec1.pem");

pub use ichor_testkit::pki::Pair as Leaf;

/// The kit's test CA, issuing leaves for `localhost` and 127.0.0.1 with a year of expiry.
pub struct Ca(TestCa);

impl std::ops::Deref for Ca {
    type Target = TestCa;
    fn deref(&self) -> &TestCa {
        &self.0
    }
}

impl Ca {
    pub fn new() -> Self {
        Ca(TestCa::new("test CA").unwrap())
    }

    /// A leaf valid until January 1st of `until_year`, with a fresh P-256 key.
    pub fn leaf(&self, until_year: i32) -> Leaf {
        self.leaf_with_key(until_year, KeyPair::generate().unwrap())
    }

    pub fn leaf_with_key(&self, until_year: i32, key: KeyPair) -> Leaf {
        self.0.serving_until("localhost", until_year, key).unwrap()
    }
}

/// Writes `content` to `path` through a temporary file and a rename (as a careful writer does).
pub fn write_atomic(path: &Path, content: &[u8]) {
    let tmp = path.with_extension("tmp-write");
    std::fs::write(&tmp, content).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Writes a pair as `tls.crt`/`tls.key` in `dir`.
pub fn write_pair(dir: &Path, leaf: &Leaf) {
    write_atomic(&dir.join("tls.crt"), leaf.cert_pem.as_bytes());
    write_atomic(&dir.join("tls.key"), leaf.key_pem.as_bytes());
}

/// A `keys.json` with one RSA key (the committed test key) and one HMAC key, both created at
/// `created` and active at once.
pub fn keys_json(rsa_kid: &str, created: &str) -> String {
    let secret = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
    serde_json::json!({
        "v": 1,
        "keys": [{"kid": rsa_kid, "alg": "RS256", "pem": RSA_PKCS8, "createdAt": created, "activeFrom": created}],
        "hmac": [{"kid": "h-1", "secret": secret, "createdAt": created, "activeFrom": created}],
    })
    .to_string()
}

/// The kid of the only RSA key of a loaded document.
pub fn rsa_kid(doc: &ichor_renderers::trust::KeysDocument) -> String {
    use ichor_renderers::trust::keys::KeyTimes as _;
    doc.keys()[0].kid().to_owned()
}

pub fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// Connects with TLS (trusting `ca_pem`, SNI `localhost`) and returns the leaf the server
/// presented, or the handshake error.
pub async fn presented_leaf(addr: SocketAddr, ca_pem: &str) -> Result<Vec<u8>, String> {
    let tls = tls_connect(addr, ca_pem).await.map_err(|e| e.to_string())?;
    let (_, conn) = tls.get_ref();
    Ok(conn.peer_certificates().unwrap()[0].to_vec())
}

/// A raw TLS connection to `addr` trusting `ca_pem`, SNI `localhost`.
pub async fn tls_connect(
    addr: SocketAddr,
    ca_pem: &str,
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    let ca: CertificateDer<'static> = rustls_pemfile::certs(&mut ca_pem.as_bytes())
        .next()
        .unwrap()
        .unwrap();
    roots.add(ca).unwrap();
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
}

/// An HTTPS client trusting `ca_pem`, sending `localhost` to `addr`.
pub fn https_client(ca_pem: &str, addr: SocketAddr) -> reqwest::Client {
    ichor_testkit::issuer::https::client_builder(ca_pem)
        .resolve("localhost", addr)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// Polls `f` every 20 ms until it returns true, failing after `secs` seconds.
pub async fn eventually<F, Fut>(what: &str, secs: u64, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if f().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
