//! The admission webhooks' serving certificate (`ichor-webhook-tls`) and the `caBundle` of
//! their `ValidatingWebhookConfiguration`, decided in the graph like the issuer's leaf: pure,
//! with `now` as an input, so a replay shows every issuance and every bundle write with its
//! reason.
//!
//! - **Whose names.** The certificate carries the DNS names of every Service the observed
//!   configuration's webhooks call (`clientConfig.service`): those are the names the API server
//!   dials and verifies. Without a configuration nothing calls the webhooks, and nothing is
//!   issued.
//! - **When.** A certificate is issued when there is none, when it lacks its key, when the
//!   Ichor CA changed or did not issue it, when its names differ, or two thirds into its
//!   lifetime ([`decide_webhook_cert`]); it is signed by the CA as observed in `ichor-oidc-ca`
//!   (the `issue-webhook-leaf` effect waits for that CA, which the certificate node issues).
//! - **The bundle** is a desired object: the configuration's webhooks as observed, each with
//!   `clientConfig.caBundle` set to the CA. Lists are compared whole, so the object matches
//!   exactly when every bundle is current; the applier writes only the `caBundle`s.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ichor_graph::{Desired, EffectRequest, Object, ObjectKey, Timed};
use ichor_renderers::trust::tls::{CertFacts, San};
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::effects::{IssueLeafRequest, SanName};
use super::nodes::{CertState, Certificates};
use super::read::{SecretValue, secret_value};
use super::{CA_CERT_KEY, TLS_CERT_KEY, TLS_KEY_KEY};

/// The default name of the `ValidatingWebhookConfiguration` of the identity webhooks (the
/// controller watches the one its flag names).
pub use ichor_renderers::contract::WEBHOOK_CONFIGURATION;
/// The Secret holding the webhooks' serving certificate (`kubernetes.io/tls`).
pub use ichor_renderers::contract::WEBHOOK_TLS_SECRET;
/// The kind whose `caBundle`s the graph keeps.
pub const CONFIGURATION_KIND: &str = "ValidatingWebhookConfiguration";
/// Lifetime of a serving certificate (capped at the CA's expiry).
pub const WEBHOOK_CERT_LIFETIME: SignedDuration = SignedDuration::from_hours(365 * 24);
/// The id prefix of the effect issuing the serving certificate.
pub const ISSUE_WEBHOOK_LEAF: &str = "issue-webhook-leaf";

/// The DNS names a serving certificate for Service `service` in `namespace` carries, in the
/// order the API server may use them.
pub fn webhook_sans(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// Whether to keep the current serving certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertDecision {
    /// It is current; renew at this instant (two thirds of its lifetime).
    Keep {
        /// When to decide again.
        renew_at: Timestamp,
    },
    /// Issue a new one, for this reason.
    Issue {
        /// Why, in words.
        reason: String,
    },
}

/// Decides whether the serving certificate stored in `current` (the Secret's decoded data) is
/// current for the CA `ca_pem` and the DNS names `sans` at `now`: it must exist with its key,
/// carry exactly `sans`, carry `ca_pem` as `ca.crt`, be issued by that CA, and not be two
/// thirds into its lifetime.
pub fn decide_webhook_cert(
    current: Option<&BTreeMap<String, Vec<u8>>>,
    ca_pem: &str,
    sans: &[String],
    now: Timestamp,
) -> CertDecision {
    let issue = |reason: &str| CertDecision::Issue {
        reason: reason.to_owned(),
    };
    let Some(data) = current else {
        return issue("no serving certificate yet");
    };
    let text = |k: &str| data.get(k).and_then(|b| std::str::from_utf8(b).ok());
    let (Some(cert), Some(_key)) = (text(TLS_CERT_KEY), text(TLS_KEY_KEY)) else {
        return issue("the Secret lacks tls.crt or tls.key");
    };
    let Ok(leaf) = CertFacts::from_pem(cert, "tls.crt") else {
        return issue("tls.crt does not parse");
    };
    if text(CA_CERT_KEY) != Some(ca_pem) {
        return issue("the Ichor CA changed");
    }
    match CertFacts::from_pem(ca_pem, "ca.crt") {
        Ok(ca) if leaf.is_issued_by(&ca) => {}
        _ => return issue("the certificate is not issued by the current Ichor CA"),
    }
    let mut wanted: Vec<San> = sans.iter().map(|s| San::Dns(s.to_ascii_lowercase())).collect();
    wanted.sort();
    wanted.dedup();
    if leaf.sans != wanted {
        return issue("its DNS names differ from the webhook Service's");
    }
    let renew_at = leaf.renewal_point();
    if now >= renew_at {
        return issue("two thirds of its lifetime passed");
    }
    CertDecision::Keep { renew_at }
}

fn webhooks(configuration: &Object) -> &[Value] {
    configuration
        .value
        .get("webhooks")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The Services (namespace, name) the webhooks of `configurations` call, sorted and deduplicated.
fn services(configurations: &BTreeMap<ObjectKey, Object>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = configurations
        .values()
        .flat_map(webhooks)
        .filter_map(|w| {
            let svc = w.pointer("/clientConfig/service")?;
            Some((
                svc.get("namespace")?.as_str()?.to_owned(),
                svc.get("name")?.as_str()?.to_owned(),
            ))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The decoded data of the serving certificate's Secret; `Err(())` when a value is redacted or
/// undecodable (present but unreadable: decide nothing).
fn secret_data(secret: &Object) -> Result<BTreeMap<String, Vec<u8>>, ()> {
    let mut data = BTreeMap::new();
    for key in [TLS_CERT_KEY, TLS_KEY_KEY, CA_CERT_KEY] {
        match secret_value(secret, key) {
            SecretValue::Absent => {}
            SecretValue::Bytes(b) => {
                data.insert(key.to_owned(), b);
            }
            SecretValue::Redacted | SecretValue::Undecodable(_) => return Err(()),
        }
    }
    Ok(data)
}

/// The serving certificate: `now`, the certificates, `ichor-webhook-tls` and the webhook
/// configurations → an `issue-webhook-leaf` effect when one is due, with the renewal point as
/// deadline. Waits (no decision) without a readable CA, without a webhook Service to name, or
/// while the Secret is redacted.
pub(crate) fn webhook_certificate(
    now: Timestamp,
    certs: &Certificates,
    secret: &Option<Object>,
    configurations: &BTreeMap<ObjectKey, Object>,
) -> Timed<Desired> {
    let wait = || Timed::forever(Desired::default());
    let CertState::Read { pem: ca_pem, facts } = &certs.ca else {
        return wait();
    };
    let services = services(configurations);
    let Some((first_ns, first_name)) = services.first() else {
        return wait();
    };
    let sans: Vec<String> = services
        .iter()
        .flat_map(|(ns, name)| webhook_sans(name, ns))
        .collect();
    let current = match secret.as_ref().map(secret_data) {
        None => None,
        Some(Ok(data)) => Some(data),
        Some(Err(())) => return wait(),
    };
    match decide_webhook_cert(current.as_ref(), ca_pem, &sans, now) {
        CertDecision::Keep { renew_at } => Timed::until(Desired::default(), renew_at),
        CertDecision::Issue { reason } => {
            // Only when issuing: the fingerprint of the certificate it replaces, if readable.
            let replaces = current
                .as_ref()
                .and_then(|d| d.get(TLS_CERT_KEY))
                .and_then(|b| std::str::from_utf8(b).ok())
                .and_then(|pem| CertFacts::from_pem(pem, "tls.crt of ichor-webhook-tls").ok())
                .map(|f| f.sha256_fingerprint);
            let ca_not_after = CertFacts::from(facts.as_ref()).not_after;
            let request = IssueLeafRequest {
                common_name: format!("{first_name}.{first_ns}.svc"),
                sans: sans.into_iter().map(SanName::Dns).collect(),
                not_before: now,
                not_after: now
                    .checked_add(WEBHOOK_CERT_LIFETIME)
                    .unwrap_or(ca_not_after)
                    .min(ca_not_after),
                reason,
                replaces,
            };
            let mut desired = Desired::default();
            desired
                .effects
                .extend(EffectRequest::new(webhook_leaf_id(&request), &request).ok());
            Timed::forever(desired)
        }
    }
}

/// The id of an `issue-webhook-leaf` effect: `issue-webhook-leaf new` or
/// `issue-webhook-leaf replacing <sha256[..16]>`.
pub fn webhook_leaf_id(request: &IssueLeafRequest) -> String {
    match &request.replaces {
        Some(fp) => format!("{ISSUE_WEBHOOK_LEAF} replacing {}", fp.get(..16).unwrap_or(fp)),
        None => format!("{ISSUE_WEBHOOK_LEAF} new"),
    }
}

/// The `caBundle`s: the certificates and the webhook configurations → each configuration as
/// desired, its webhooks as observed with `clientConfig.caBundle` the Ichor CA. Nothing while
/// the CA is not readable.
pub(crate) fn webhook_ca_bundle(
    certs: &Certificates,
    configurations: &BTreeMap<ObjectKey, Object>,
) -> Desired {
    let mut desired = Desired::default();
    let CertState::Read { pem, .. } = &certs.ca else {
        return desired;
    };
    let bundle = json!(STANDARD.encode(pem));
    for configuration in configurations.values() {
        let hooks: Vec<Value> = webhooks(configuration)
            .iter()
            .filter(|w| w.is_object())
            .map(|w| {
                let mut w = w.clone();
                if !w["clientConfig"].is_object() {
                    w["clientConfig"] = json!({});
                }
                w["clientConfig"]["caBundle"] = bundle.clone();
                w
            })
            .collect();
        if hooks.is_empty() {
            continue;
        }
        desired.objects.push(Object::new(
            CONFIGURATION_KIND,
            configuration.namespace.clone(),
            configuration.name.clone(),
            json!({ "webhooks": hooks }),
        ));
    }
    desired
}

#[cfg(test)]
mod tests;
