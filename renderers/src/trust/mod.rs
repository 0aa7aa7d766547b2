//! The OIDC issuer's trust material, as pure functions: the `keys.json` format of the signing
//! Secret and its key timeline, the decisions about the issuer's CA and TLS leaf, and the
//! `ichor-oidc-trust` ConfigMap that tells the kube-apiserver where the issuer is and which CA to
//! trust.
//!
//! Nothing here is random or reads a clock. Key generation and certificate issuance are *effects*
//! the functions here request ([`timeline::KeyEffect`], [`tls::TlsEffect`]); the controller's
//! applier performs them and writes the result, and the next evaluation sees it.
//!
//! - [`keys`]: the one `keys.json` parser used by the controller and the issuer, and the queries
//!   the issuer signs and verifies with.
//! - [`timeline`]: when keys are generated, activated, retired and dropped.
//! - [`tls`]: when the CA and the leaf are (re)issued.
//! - [`configmap`]: the rendered `ichor-oidc-trust` ConfigMap and its strict reader, and
//!   `ichor-ui-ca`.

pub mod configmap;
mod json;
pub mod keys;
pub mod timeline;
pub mod tls;

pub use configmap::{IssuerTrust, render_trust_configmap, render_ui_ca_configmap};
pub use keys::{HmacKey, KeysDocument, KeysError, RsaKey};
pub use timeline::{KeyEffect, KeysPlan, TimelineSettings, plan};
pub use tls::{CertFacts, IssuerService, TlsDecision, TlsEffect, decide, decide_ca};

/// The namespace of every object of this module, and the names of its Secrets and ConfigMaps
/// (defined in [`crate::contract`]).
pub use crate::contract::{
    CA_SECRET, NAMESPACE, SIGNING_SECRET, TLS_SECRET, TRUST_CONFIGMAP, UI_CA_CONFIGMAP,
};
/// Key of [`SIGNING_SECRET`] holding the keys document.
pub const KEYS_JSON: &str = "keys.json";
/// Port of the issuer's internal HTTPS listener (discovery and JWKS for the kube-apiserver).
pub const INTERNAL_PORT: u16 = 8444;

#[cfg(test)]
mod configmap_tests;
#[cfg(test)]
mod keys_tests;
#[cfg(test)]
mod testdata;
#[cfg(test)]
mod timeline_tests;
#[cfg(test)]
mod tls_tests;
