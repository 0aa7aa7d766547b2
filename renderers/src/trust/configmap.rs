//! The ConfigMap `ichor-oidc-trust` (namespace `ichor-system`): the public facts the
//! kube-apiserver needs to reach and trust Ichor's issuer, `discoveryURL` (the issuer Service's
//! ClusterIP on the internal listener) and `ca.crt` (the issuer CA). It is a render input of the
//! `AuthenticationConfiguration`, so a new ClusterIP or CA is a desired-state change like any
//! other; a leaf renewal changes nothing here. Beside it, `ichor-ui-ca` publishes the CA alone for
//! what must trust the UI's listener.

use crate::contract::{CONTROLLER_MANAGER, MANAGED_BY_LABEL, PART_OF_LABEL, PART_OF_VALUE};
use crate::trust::tls::IssuerService;
use crate::trust::{INTERNAL_PORT, NAMESPACE, TRUST_CONFIGMAP, UI_CA_CONFIGMAP};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// Key of the discovery URL in the ConfigMap.
pub const DISCOVERY_URL_KEY: &str = "discoveryURL";
/// Key of the CA PEM in the ConfigMap.
pub const CA_CRT_KEY: &str = "ca.crt";

/// The trust facts of Ichor's issuer, as the `AuthenticationConfiguration` renderer consumes
/// them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerTrust {
    /// `https://<ClusterIP>:8444/.well-known/openid-configuration` (IPv6 in brackets).
    pub discovery_url: String,
    /// The issuer CA, PEM (one or more `CERTIFICATE` blocks).
    pub ca_pem: String,
}

/// Why a ConfigMap is not a valid `ichor-oidc-trust`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustConfigMapError {
    /// A data key is absent.
    #[error("ConfigMap ichor-oidc-trust: data.{key} is missing (the controller writes it)")]
    Missing {
        /// The missing key.
        key: &'static str,
    },
    /// `discoveryURL` is not an absolute https URL with a host.
    #[error("ConfigMap ichor-oidc-trust: data.discoveryURL must be an absolute https:// URL with a host")]
    NotHttps,
    /// `ca.crt` holds no certificate.
    #[error("ConfigMap ichor-oidc-trust: data.ca.crt must hold at least one PEM \"CERTIFICATE\" block")]
    NoCertificate,
}

impl IssuerTrust {
    /// The trust facts for the issuer Service and the CA PEM.
    pub fn for_service(service: &IssuerService, ca_pem: impl Into<String>) -> Self {
        let addr = SocketAddr::new(service.cluster_ip, INTERNAL_PORT);
        IssuerTrust {
            discovery_url: format!("https://{addr}/.well-known/openid-configuration"),
            ca_pem: ca_pem.into(),
        }
    }

    /// Reads the trust facts from `ichor-oidc-trust`, strictly: both keys required,
    /// `discoveryURL` https with a host, `ca.crt` with a `CERTIFICATE` block.
    pub fn from_configmap(cm: &ConfigMap) -> Result<Self, TrustConfigMapError> {
        let data = cm.data.as_ref();
        let get = |key: &'static str| {
            data.and_then(|d| d.get(key))
                .ok_or(TrustConfigMapError::Missing { key })
        };
        let discovery_url = get(DISCOVERY_URL_KEY)?;
        let ca_pem = get(CA_CRT_KEY)?;
        let url = url::Url::parse(discovery_url).map_err(|_| TrustConfigMapError::NotHttps)?;
        if url.scheme() != "https" || url.host().is_none() {
            return Err(TrustConfigMapError::NotHttps);
        }
        let has_cert = pem::parse_many(ca_pem)
            .map(|blocks| blocks.iter().any(|b| b.tag() == "CERTIFICATE"))
            .unwrap_or(false);
        if !has_cert {
            return Err(TrustConfigMapError::NoCertificate);
        }
        Ok(IssuerTrust {
            discovery_url: discovery_url.clone(),
            ca_pem: ca_pem.clone(),
        })
    }
}

/// The labels of the ConfigMaps the controller renders: managed by it, part of Ichor.
fn controller_labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY_LABEL.to_owned(), CONTROLLER_MANAGER.to_owned()),
        (PART_OF_LABEL.to_owned(), PART_OF_VALUE.to_owned()),
    ])
}

/// Renders `ichor-oidc-trust` in `ichor-system`, labelled as managed by the controller.
pub fn render_trust_configmap(trust: &IssuerTrust) -> ConfigMap {
    let labels = controller_labels();
    let data = BTreeMap::from([
        (DISCOVERY_URL_KEY.to_owned(), trust.discovery_url.clone()),
        (CA_CRT_KEY.to_owned(), trust.ca_pem.clone()),
    ]);
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(TRUST_CONFIGMAP.to_owned()),
            namespace: Some(NAMESPACE.to_owned()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    }
}

/// Renders `ichor-ui-ca` in `ichor-system`: the issuer CA alone (`ca.crt`), for what must trust
/// the UI's HTTPS listener when it serves the Ichor leaf (an Ingress controller's backend TLS
/// policy, a browser's trust store, `ichor` pointed at the UI). It carries the same CA as
/// `ichor-oidc-trust` without the issuer's in-cluster address.
pub fn render_ui_ca_configmap(ca_pem: &str) -> ConfigMap {
    let labels = controller_labels();
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(UI_CA_CONFIGMAP.to_owned()),
            namespace: Some(NAMESPACE.to_owned()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(CA_CRT_KEY.to_owned(), ca_pem.to_owned())])),
        ..ConfigMap::default()
    }
}
