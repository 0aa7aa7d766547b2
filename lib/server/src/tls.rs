//! TLS for the listeners: a certificate and key pair read from PEM files ([`TlsPair`]), followed
//! on change through a [`Watched`] value, and a rustls [`ServerConfig`] whose certificate
//! resolver asks that value at each handshake — so a renewal (cert-manager, or the controller
//! reissuing the Ichor leaf) reaches new connections without a restart, and a pair that fails to
//! load (unreadable, half written, cert and key not matching) keeps the previous one serving.
//!
//! Crypto provider: ring. Protocols: TLS 1.3 and 1.2. ALPN: `h2`, `http/1.1`.

use super::reload::{WatchError, WatchOptions, Watched};
use jiff::Timestamp;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::CertificateDer;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// File name of the certificate chain in a Kubernetes TLS Secret volume.
pub const TLS_CERT_FILE: &str = "tls.crt";
/// File name of the private key in a Kubernetes TLS Secret volume.
pub const TLS_KEY_FILE: &str = "tls.key";

/// Why a certificate and key pair was refused. Never contains key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsPairError {
    /// The certificate file is not well-formed PEM.
    #[error("the certificate file is not well-formed PEM; it must hold CERTIFICATE blocks, leaf first")]
    CertificatePem,
    /// The certificate file holds no certificate.
    #[error("the certificate file holds no CERTIFICATE block; it must hold the chain, leaf first")]
    NoCertificate,
    /// The leaf certificate is not a well-formed X.509 certificate.
    #[error("the first certificate of the chain is not a well-formed X.509 certificate")]
    BadCertificate,
    /// The key file is not well-formed PEM.
    #[error("the key file is not well-formed PEM")]
    KeyPem,
    /// The key file holds no private key.
    #[error(
        "the key file holds no private key; a PKCS#8 \"PRIVATE KEY\", PKCS#1 \"RSA PRIVATE KEY\" or SEC1 \
         \"EC PRIVATE KEY\" block is required"
    )]
    NoKey,
    /// The key is of a type or size ring cannot sign with.
    #[error(
        "the private key is not usable: {0}; RSA (2048 bits or more), ECDSA P-256/P-384 or Ed25519 is required"
    )]
    UnsupportedKey(String),
    /// The key is not the key of the leaf certificate.
    #[error("the private key does not match the leaf certificate's public key; the files are not one pair")]
    Mismatch,
}

/// A loaded certificate chain and its private key, checked to match.
pub struct TlsPair {
    certified: Arc<CertifiedKey>,
    not_after: Timestamp,
}

impl fmt::Debug for TlsPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsPair")
            .field("chain_len", &self.certified.cert.len())
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

impl TlsPair {
    /// Parses a PEM certificate chain (leaf first) and a PEM private key (PKCS#8, PKCS#1 or
    /// SEC1), refusing a key that is not the leaf's.
    pub fn parse(cert_pem: &[u8], key_pem: &[u8]) -> Result<Self, TlsPairError> {
        let chain: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut &cert_pem[..])
            .collect::<Result<_, _>>()
            .map_err(|_| TlsPairError::CertificatePem)?;
        let leaf = chain.first().ok_or(TlsPairError::NoCertificate)?;
        let (_, parsed) =
            x509_parser::parse_x509_certificate(leaf).map_err(|_| TlsPairError::BadCertificate)?;
        let not_after = Timestamp::from_second(parsed.validity().not_after.timestamp())
            .map_err(|_| TlsPairError::BadCertificate)?;
        let key = rustls_pemfile::private_key(&mut &key_pem[..])
            .map_err(|_| TlsPairError::KeyPem)?
            .ok_or(TlsPairError::NoKey)?;
        let provider = rustls::crypto::ring::default_provider();
        let signing = provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| TlsPairError::UnsupportedKey(e.to_string()))?;
        let certified = CertifiedKey::new(chain, signing);
        // Strict: a key whose public half is unknown is refused too.
        certified.keys_match().map_err(|_| TlsPairError::Mismatch)?;
        Ok(TlsPair {
            certified: Arc::new(certified),
            not_after,
        })
    }

    /// The chain and signing key, as rustls serves them.
    pub fn certified_key(&self) -> &Arc<CertifiedKey> {
        &self.certified
    }

    /// The leaf certificate's `notAfter` (for the certificate-expiry metric).
    pub fn not_after(&self) -> Timestamp {
        self.not_after
    }

    /// The leaf certificate, DER.
    pub fn leaf_der(&self) -> Option<&CertificateDer<'static>> {
        self.certified.cert.first()
    }
}

/// Where a listener's pair is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairFiles {
    /// The PEM certificate chain.
    pub cert: PathBuf,
    /// The PEM private key.
    pub key: PathBuf,
}

impl PairFiles {
    /// The `tls.crt` / `tls.key` pair of a mounted Kubernetes TLS Secret.
    pub fn in_secret_dir(dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        PairFiles {
            cert: dir.join(TLS_CERT_FILE),
            key: dir.join(TLS_KEY_FILE),
        }
    }
}

/// Watches a certificate and key pair (see the module documentation).
pub fn watch_pair(
    name: impl Into<String>,
    files: &PairFiles,
    options: WatchOptions,
) -> Result<Watched<TlsPair>, WatchError> {
    Watched::files(
        name,
        vec![files.cert.clone(), files.key.clone()],
        |contents: &[Vec<u8>]| match contents {
            [cert, key] => TlsPair::parse(cert, key),
            _ => Err(TlsPairError::NoCertificate),
        },
        options,
    )
}

/// A rustls certificate resolver serving the current pair of a [`Watched`] value (no
/// certificate, so a failed handshake, until one is loaded).
pub struct WatchedCertResolver {
    pair: Watched<TlsPair>,
}

impl WatchedCertResolver {
    /// A resolver over `pair`.
    pub fn new(pair: Watched<TlsPair>) -> Self {
        WatchedCertResolver { pair }
    }
}

impl fmt::Debug for WatchedCertResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchedCertResolver")
            .field("pair", &self.pair)
            .finish()
    }
}

impl ResolvesServerCert for WatchedCertResolver {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.pair.current().map(|p| Arc::clone(p.certified_key()))
    }
}

/// A server configuration over a watched pair: ring, TLS 1.3 and 1.2, ALPN h2 and http/1.1,
/// no client authentication.
pub fn server_config(pair: Watched<TlsPair>) -> Result<Arc<ServerConfig>, rustls::Error> {
    let provider: Arc<CryptoProvider> = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(WatchedCertResolver::new(pair)));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
