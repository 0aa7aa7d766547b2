//! The pure functions of the identity graph's nodes, and their serializable outputs.
//!
//! Every function here takes its inputs as values and returns its output (and, for timed nodes,
//! the instant it would change): no clock, no randomness, no I/O.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ichor_graph::{Desired, EffectRequest, Object, ObjectKey, Timed};
use ichor_renderers::contract::COMPONENT_LABEL;
use ichor_renderers::trust::keys::KeysDocument;
use ichor_renderers::trust::timeline::{TimelineSettings, plan};
use ichor_renderers::trust::tls::IssuerService;
use ichor_renderers::trust::{KEYS_JSON, NAMESPACE};
use jiff::{SignedDuration, Timestamp};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::effects::GenerateKeyRequest;
use super::read::{self, SecretValue, secret_value};
use super::{ISSUER_COMPONENT, LEGACY_ISSUER_COMPONENT};

mod certs;
mod settings;
mod status;
mod trust;

pub use certs::{CertState, CertSummary, Certificates};
pub(crate) use certs::{certificate_effects, certificates};
pub use settings::{USERS_FALLBACK_KIND, USERS_FALLBACK_NAME, users_fallback_object, with_publish_lead};
pub(crate) use settings::{second_factor, settings};
pub use status::still_a_user;
pub(crate) use status::{credentials_gc, machine_cluster, machine_condition, status_object, user_status};
pub use trust::{ClusterAuth, TrustOut, TrustSource};
pub(crate) use trust::{cluster_auth, trust, trust_configmap, ui_ca_configmap};

/// The issuer settings the key timeline uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// The largest ID token TTL, in seconds.
    pub max_id_token_ttl_secs: i64,
    /// The longest refresh lifetime, in seconds.
    pub max_refresh_lifetime_secs: i64,
    /// Why the defaults are used instead of the installation's values, if they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// The controller's `--key-publish-lead`, in seconds (the timeline's default without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish_lead_secs: Option<i64>,
}

impl Settings {
    /// The timeline settings (the defaults, which take the upper bounds, if out of range).
    pub fn timeline(&self) -> TimelineSettings {
        let timeline = TimelineSettings::new(
            SignedDuration::from_secs(self.max_id_token_ttl_secs),
            SignedDuration::from_secs(self.max_refresh_lifetime_secs),
        )
        .unwrap_or_default();
        match self.publish_lead_secs {
            // Out of range (a journal edited by hand): the default lead.
            Some(secs) => timeline
                .with_publish_lead(SignedDuration::from_secs(secs))
                .unwrap_or(timeline),
            None => timeline,
        }
    }
}

fn decode<T: DeserializeOwned>(v: Option<&Value>) -> Result<T, serde_json::Error> {
    T::deserialize(v.unwrap_or(&Value::Null))
}

/// The issuer Service as the graph uses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceFacts {
    /// The ClusterIP.
    pub cluster_ip: IpAddr,
    /// The Service's name.
    pub name: String,
    /// The Service's namespace.
    pub namespace: String,
}

impl From<&ServiceFacts> for IssuerService {
    fn from(s: &ServiceFacts) -> Self {
        IssuerService {
            cluster_ip: s.cluster_ip,
            name: s.name.clone(),
            namespace: s.namespace.clone(),
        }
    }
}

/// The issuer Service selection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssuerServiceOut {
    /// The selected Service, when one is usable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceFacts>,
    /// Why none or another was selected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Services → the issuer Service: in `ichor-system`, labelled
/// `app.kubernetes.io/component=ui` (or the earlier `issuer`, [`LEGACY_ISSUER_COMPONENT`]), and
/// the only one. The controller watches the chart's
/// Service by its name (`ichor-issuer`) as well as the label, so in a cluster no other Service
/// reaches here; should several all the same (another source, a replayed journal), the choice
/// is ambiguous and none is used: the Service chosen steers the leaf's SANs and every
/// cluster's `discoveryURL`, so it is never picked by an order an attacker can name into.
pub(crate) fn issuer_service(services: &BTreeMap<ObjectKey, Object>) -> IssuerServiceOut {
    let candidates: Vec<&Object> = services
        .values()
        .filter(|s| {
            s.namespace == NAMESPACE
                && matches!(
                    read::label(s, COMPONENT_LABEL),
                    Some(ISSUER_COMPONENT | LEGACY_ISSUER_COMPONENT)
                )
        })
        .collect();
    let first = match candidates.as_slice() {
        [] => {
            return IssuerServiceOut {
                service: None,
                problem: Some(format!(
                    "no Service in {NAMESPACE} is labelled app.kubernetes.io/component={ISSUER_COMPONENT}; the \
                     issuer certificates and ichor-oidc-trust wait for it"
                )),
            };
        }
        [one] => *one,
        several => {
            let names: Vec<&str> = several.iter().map(|s| &*s.name).collect();
            return IssuerServiceOut {
                service: None,
                problem: Some(format!(
                    "{} Services in {NAMESPACE} are labelled app.kubernetes.io/component={ISSUER_COMPONENT} \
                     ({}): which one is the issuer's is ambiguous, so none is used (the issuer certificates \
                     and ichor-oidc-trust stay as they are); remove the label from all but the chart's \
                     Service",
                    several.len(),
                    names.join(", ")
                )),
            };
        }
    };
    let svc: Result<k8s_openapi::api::core::v1::Service, _> = serde_json::from_value(first.value.clone());
    let parsed = svc
        .map_err(|e| format!("Service {}/{}: does not decode: {e}", first.namespace, first.name))
        .and_then(|s| IssuerService::from_service(&s).map_err(|e| e.to_string()));
    match parsed {
        Ok(s) => IssuerServiceOut {
            service: Some(ServiceFacts {
                cluster_ip: s.cluster_ip,
                name: s.name,
                namespace: s.namespace,
            }),
            problem: None,
        },
        Err(e) => IssuerServiceOut {
            service: None,
            problem: Some(e),
        },
    }
}

fn effect<T: Serialize>(id: String, request: &T) -> Option<EffectRequest> {
    EffectRequest::new(id, request).ok()
}

/// The key timeline: `now`, the signing Secret and the settings → the desired `keys.json`
/// (only when keys are dropped or retired and nothing is generated) and key generation effects.
///
/// An absent Secret or an absent `keys.json` is an empty document (the first keys are
/// generated). A redacted, undecodable or invalid `keys.json` is *present but unreadable*:
/// nothing is planned (never replace live keys because they cannot be read).
pub(crate) fn signing_keys(now: Timestamp, secret: &Option<Object>, settings: &Settings) -> Timed<Desired> {
    let doc = match secret.as_ref().map(|s| secret_value(s, KEYS_JSON)) {
        None | Some(SecretValue::Absent) => None,
        Some(SecretValue::Bytes(bytes)) => match KeysDocument::parse(&bytes) {
            Ok(d) => Some(d),
            Err(_) => return Timed::forever(Desired::default()),
        },
        Some(SecretValue::Redacted | SecretValue::Undecodable(_)) => {
            return Timed::forever(Desired::default());
        }
    };
    let p = plan(now, doc.as_ref(), &settings.timeline());
    let mut desired = Desired::default();
    if p.effects.is_empty() {
        if !p.changes.is_empty() {
            let json = p.apply_changes(doc.as_ref()).to_json();
            desired.objects.push(Object::new(
                "Secret",
                NAMESPACE,
                ichor_renderers::trust::SIGNING_SECRET,
                json!({ "data": { KEYS_JSON: read::base64(json.as_bytes()) } }),
            ));
        }
    } else {
        let based_on = secret.as_ref().and_then(|s| s.resource_version.clone());
        for e in &p.effects {
            let request = GenerateKeyRequest::new(e, based_on.clone(), &p.changes);
            desired.effects.extend(effect(request.id(), &request));
        }
    }
    Timed {
        value: desired,
        deadline: p.next_deadline,
    }
}
