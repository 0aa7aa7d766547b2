//! The Talos PKI of a fake node, made as `talosctl gen config` makes it: an Ed25519 Talos CA,
//! the apid serving certificate (ServerAuth, for 127.0.0.1 and `localhost`), and client
//! certificates whose Organization is the role (ClientAuth only), their keys in PEM blocks
//! labelled `ED25519 PRIVATE KEY` inside the talosconfig, as talosctl writes them.

use anyhow::Context as _;
use base64::{Engine as _, engine::general_purpose::STANDARD};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

/// The Talos CA and apid's serving certificate.
pub(super) struct TalosPki {
    ca: CertifiedIssuer<'static, KeyPair>,
    /// The CA certificate, PEM.
    pub(super) ca_pem: String,
    /// apid's serving certificate, PEM.
    pub(super) apid_cert_pem: String,
    /// Its key (PKCS#8, standard label), PEM.
    pub(super) apid_key_pem: String,
}

fn ed25519() -> anyhow::Result<KeyPair> {
    KeyPair::generate_for(&rcgen::PKCS_ED25519).context("generating an Ed25519 key")
}

impl TalosPki {
    /// A fresh CA and apid certificate.
    /// A new CA, and apid's certificate for 127.0.0.1, `localhost` and `listen`.
    pub(super) fn new(listen: std::net::IpAddr) -> anyhow::Result<Self> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::OrganizationName, "talos");
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca_params, ed25519()?).context("self-signing the Talos CA")?;
        let apid_key = ed25519()?;
        let mut names = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
        if !listen.is_loopback() {
            names.push(listen.to_string());
        }
        let mut apid_params = CertificateParams::new(names)?;
        apid_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let apid_cert = apid_params
            .signed_by(&apid_key, &ca)
            .context("signing apid's certificate")?;
        Ok(Self {
            ca_pem: ca.pem(),
            ca,
            apid_cert_pem: apid_cert.pem(),
            apid_key_pem: apid_key.serialize_pem(),
        })
    }

    /// A client certificate with Organization `role` and its key, PEM, the key labelled
    /// `ED25519 PRIVATE KEY`.
    fn client(&self, role: &str) -> anyhow::Result<(String, String)> {
        let key = ed25519()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::OrganizationName, role);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params
            .signed_by(&key, &self.ca)
            .with_context(|| format!("signing a Talos client certificate for {role}"))?;
        let key_pem = key.serialize_pem().replace("PRIVATE KEY", "ED25519 PRIVATE KEY");
        Ok((cert.pem(), key_pem))
    }

    /// A talosconfig (context `test`) whose client certificate has the role `role`, with the
    /// one `endpoint` and `node` as its default node.
    pub(super) fn talosconfig(&self, role: &str, endpoint: &str, node: &str) -> anyhow::Result<String> {
        let (crt, key) = self.client(role)?;
        Ok(format!(
            "context: test\ncontexts:\n  test:\n    endpoints: [\"{endpoint}\"]\n    nodes: [\"{node}\"]\n    \
             ca: {}\n    crt: {}\n    key: {}\n",
            STANDARD.encode(&self.ca_pem),
            STANDARD.encode(crt),
            STANDARD.encode(key),
        ))
    }
}
