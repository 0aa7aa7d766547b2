//! The desired trust (discovery URL and CA), its ConfigMap, and each cluster's rendered
//! authentication.

use super::certs::{CertState, Certificates};
use super::{IssuerServiceOut, decode};
use crate::identity::{OWNER_LABEL, OWNER_VALUE};
use ichor_graph::{Desired, Object, ObjectKey};
use ichor_renderers::auth::second_factor_policy::SecondFactorPolicy;
use ichor_renderers::cluster::render_cluster;
use ichor_renderers::crd::{TalosCluster, TalosClusterSpec};
use ichor_renderers::trust::{IssuerTrust, NAMESPACE, render_trust_configmap, render_ui_ca_configmap};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Where the trust facts come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TrustSource {
    /// Rendered from the issuer Service and the CA.
    Rendered,
    /// The Service or the CA is not readable now: the observed ConfigMap is kept as it is.
    KeptObserved,
    /// Nothing to render and nothing observed.
    Unavailable,
}

/// The desired trust facts (what `ichor-oidc-trust` must say).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustOut {
    /// The discovery URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery_url: Option<String>,
    /// The CA PEM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_pem: Option<String>,
    /// Where they come from.
    pub source: TrustSource,
}

impl TrustOut {
    /// The trust facts, when known.
    pub fn trust(&self) -> Option<IssuerTrust> {
        Some(IssuerTrust {
            discovery_url: self.discovery_url.clone()?,
            ca_pem: self.ca_pem.clone()?,
        })
    }
}

/// The issuer Service, the CA and the observed `ichor-oidc-trust` → the desired trust facts.
/// Rendered when the Service and the CA are readable; otherwise the observed ConfigMap is kept
/// (a missing Service for a moment must not remove the trust of every cluster).
pub(crate) fn trust(service: &IssuerServiceOut, certs: &Certificates, observed: &Option<Object>) -> TrustOut {
    if let (Some(svc), CertState::Read { pem, .. }) = (&service.service, &certs.ca) {
        let t = IssuerTrust::for_service(&svc.into(), pem.clone());
        return TrustOut {
            discovery_url: Some(t.discovery_url),
            ca_pem: Some(t.ca_pem),
            source: TrustSource::Rendered,
        };
    }
    let kept = observed
        .as_ref()
        .and_then(|o| serde_json::from_value::<k8s_openapi::api::core::v1::ConfigMap>(o.value.clone()).ok())
        .and_then(|cm| IssuerTrust::from_configmap(&cm).ok());
    match kept {
        Some(t) => TrustOut {
            discovery_url: Some(t.discovery_url),
            ca_pem: Some(t.ca_pem),
            source: TrustSource::KeptObserved,
        },
        None => TrustOut {
            discovery_url: None,
            ca_pem: None,
            source: TrustSource::Unavailable,
        },
    }
}

/// The desired `ichor-oidc-trust` ConfigMap, labelled as owned by this graph.
pub(crate) fn trust_configmap(trust: &TrustOut) -> Desired {
    let Some(t) = trust.trust() else {
        return Desired::default();
    };
    let mut value = serde_json::to_value(render_trust_configmap(&t)).unwrap_or(Value::Null);
    if let Some(labels) = value
        .get_mut("metadata")
        .and_then(|m| m.get_mut("labels"))
        .and_then(Value::as_object_mut)
    {
        labels.insert(OWNER_LABEL.to_owned(), json!(OWNER_VALUE));
    }
    let cm = Object::new(
        "ConfigMap",
        NAMESPACE,
        ichor_renderers::trust::TRUST_CONFIGMAP,
        value,
    );
    Desired {
        objects: vec![cm],
        effects: Vec::new(),
    }
}

/// The certificates → the desired `ichor-ui-ca` ConfigMap (the CA alone), when the CA is
/// readable. It is not owner-labelled: what trusts the UI through it (an Ingress's backend TLS
/// policy) must keep it while the CA is unreadable for a moment, so it is never deleted.
pub(crate) fn ui_ca_configmap(certs: &Certificates) -> Desired {
    let CertState::Read { pem, .. } = &certs.ca else {
        return Desired::default();
    };
    let value = serde_json::to_value(render_ui_ca_configmap(pem)).unwrap_or(Value::Null);
    Desired {
        objects: vec![Object::new(
            "ConfigMap",
            NAMESPACE,
            ichor_renderers::trust::UI_CA_CONFIGMAP,
            value,
        )],
        effects: Vec::new(),
    }
}

/// One cluster's rendered authentication document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAuth {
    /// Document kind → sha256 of the rendered document (empty when nothing was rendered).
    pub documents: BTreeMap<String, String>,
    /// The rendered `KubeAuthenticationConfig` document as it is applied (YAML), when rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub yaml: Option<String>,
    /// Why nothing was rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A `TalosCluster`, the desired trust and the second-factor policy in force → its rendered
/// document hashes.
pub(crate) fn cluster_auth(
    key: &ObjectKey,
    cluster: &Object,
    trust: &TrustOut,
    second_factor: &SecondFactorPolicy,
) -> ClusterAuth {
    let spec: TalosClusterSpec = match decode(cluster.value.get("spec")) {
        Ok(s) => s,
        Err(e) => {
            return ClusterAuth {
                documents: BTreeMap::new(),
                yaml: None,
                error: Some(format!("TalosCluster {key}: spec does not decode: {e}")),
            };
        }
    };
    let mut tc = TalosCluster::new(&key.name, spec);
    tc.metadata.namespace = Some(key.namespace.to_string());
    let trust = trust.trust();
    let render = render_cluster(&tc, &[], trust.as_ref(), second_factor);
    let documents = render.desired_hashes();
    match render.authentication {
        Ok(rendered) => ClusterAuth {
            documents,
            yaml: Some(rendered.yaml),
            error: None,
        },
        Err(e) => ClusterAuth {
            documents,
            yaml: None,
            error: Some(e.to_string()),
        },
    }
}
