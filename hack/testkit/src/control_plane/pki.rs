//! The control plane's PKI, made fresh for each control plane: one test CA ([`crate::pki`])
//! that signs the apiservers' serving certificates and the admin's client certificate (it is
//! also the `--client-ca-file`), and the service-account signing key.

use rcgen::KeyPair;

pub use crate::pki::Pair;
use crate::pki::TestCa;

/// The admin's user name (its certificate's CN).
pub const ADMIN_USER: &str = "ichor-test-admin";
/// The admin's group: the certificate's O, bound to cluster-admin by the bootstrap RBAC policy.
pub const ADMIN_GROUP: &str = "system:masters";

/// What one control plane trusts and presents.
pub struct Pki {
    ca: TestCa,
    /// The CA certificate, PEM.
    pub ca_pem: String,
    /// The client certificate of the admin (`system:masters`).
    pub admin: Pair,
    /// The service-account signing key (ECDSA P-256, PKCS#8).
    pub service_account_key_pem: String,
    /// Its public key (SubjectPublicKeyInfo PEM), which `--service-account-key-file` reads.
    pub service_account_public_pem: String,
}

impl Pki {
    /// A new CA, admin certificate and service-account key.
    pub fn new() -> anyhow::Result<Self> {
        let ca = TestCa::new("ichor-test-control-plane-ca")?;
        let admin = ca.client(ADMIN_USER, ADMIN_GROUP)?;
        let service_account = KeyPair::generate()?;
        Ok(Self {
            ca_pem: ca.pem.clone(),
            ca,
            admin,
            service_account_key_pem: service_account.serialize_pem(),
            service_account_public_pem: service_account.public_key_pem(),
        })
    }

    /// A serving certificate for `127.0.0.1` and `localhost`.
    pub fn serving(&self, name: &str) -> anyhow::Result<Pair> {
        self.ca.serving(name)
    }

    /// A serving certificate for `ip` as well as `127.0.0.1` and `localhost`.
    pub fn serving_for_ip(&self, name: &str, ip: std::net::IpAddr) -> anyhow::Result<Pair> {
        self.ca.serving_for_ip(name, ip)
    }

    /// A serving certificate for every one of `ips` as well as `127.0.0.1` and `localhost`.
    pub fn serving_for_ips(&self, name: &str, ips: &[std::net::IpAddr]) -> anyhow::Result<Pair> {
        self.ca.serving_for_ips(name, ips)
    }
}
