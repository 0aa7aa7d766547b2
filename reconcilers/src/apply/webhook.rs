//! The admission webhook's serving certificate, issued from the Ichor CA (`ichor-oidc-ca`), and
//! the `caBundle` of its `ValidatingWebhookConfiguration`, kept in step.
//!
//! The decisions are pure ([`decide_webhook_cert`], [`ca_bundle_patch`], [`webhook_sans`]); the
//! I/O is [`ensure_webhook_cert`]: read the Secret, issue when the decision says so (with
//! [`ichor_reconcile::perform::issue_leaf`], the issuer leaf's code), write it conditioned on the
//! resourceVersion read, then patch only the `caBundle` of the webhooks that differ,
//! conditioned on the configuration's resourceVersion (no write when every one is current).

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ichor_graph::Object;
use ichor_renderers::trust::tls::{CertFacts, San};
use jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::resources::{observed, resource_for};
use super::{ApplyError, Failure, RetryPolicy, classify, to_dynamic, to_value};
use ichor_reconcile::identity::effects::{IssueLeafRequest, SanName};
use ichor_reconcile::identity::{CA_CERT_KEY, TLS_CERT_KEY, TLS_KEY_KEY};
use ichor_reconcile::perform::{self, IssuedPair, SecretData, TLS_TYPE};

/// The Secret holding the webhook's serving certificate (`kubernetes.io/tls`).
pub const WEBHOOK_TLS_SECRET: &str = "ichor-webhook-tls";
/// The `ValidatingWebhookConfiguration` of the identity webhooks.
pub const WEBHOOK_CONFIGURATION: &str = "ichor-identity";
/// Lifetime of a serving certificate (capped at the CA's expiry).
pub const WEBHOOK_CERT_LIFETIME: SignedDuration = SignedDuration::from_hours(365 * 24);

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

/// The strategic merge patch setting `caBundle` (base64 of `ca_pem`) on every webhook of
/// `configuration` whose bundle differs, conditioned on its resourceVersion; `None` when every
/// webhook is current (no write). Only `caBundle` is set: webhooks merge by `name`.
pub fn ca_bundle_patch(configuration: &Value, ca_pem: &str) -> Option<Value> {
    let bundle = STANDARD.encode(ca_pem);
    let stale: Vec<Value> = configuration
        .get("webhooks")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|w| w.pointer("/clientConfig/caBundle").and_then(Value::as_str) != Some(bundle.as_str()))
        .filter_map(|w| w.get("name").and_then(Value::as_str))
        .map(|name| json!({"name": name, "clientConfig": {"caBundle": bundle}}))
        .collect();
    if stale.is_empty() {
        return None;
    }
    let mut patch = json!({"webhooks": stale});
    if let Some(rv) = configuration.pointer("/metadata/resourceVersion") {
        patch["metadata"] = json!({"resourceVersion": rv});
    }
    Some(patch)
}

/// The Ichor CA from its observed Secret (`tls.crt`, `tls.key`), `None` when it is not readable.
pub fn ca_from_secret(secret: &Object) -> Option<IssuedPair> {
    let data = SecretData::from_object(secret)?;
    let text = |k: &str| data.data.get(k).and_then(|b| String::from_utf8(b.clone()).ok());
    Some(IssuedPair {
        cert_pem: text(TLS_CERT_KEY)?,
        key_pem: text(TLS_KEY_KEY)?,
    })
}

/// What happened to the serving certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertificateAction {
    /// It was current.
    Kept,
    /// A new one was issued and written.
    Issued {
        /// Why.
        reason: String,
    },
}

/// What happened to the `caBundle`s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BundleAction {
    /// Every webhook already carried the CA.
    Current,
    /// These webhooks were patched.
    Patched {
        /// Their names.
        webhooks: Vec<String>,
    },
    /// The configuration does not exist (the chart installs it; nothing to keep in step).
    ConfigurationMissing,
}

/// What [`ensure_webhook_cert`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookCertOutcome {
    /// The serving certificate.
    pub certificate: CertificateAction,
    /// The `caBundle`s.
    pub ca_bundle: BundleAction,
    /// When to call again (the certificate's renewal point).
    pub renew_at: Timestamp,
    /// The resourceVersion of the Secret written, when one was.
    pub written: Option<String>,
}

/// Keeps the serving certificate of Service `webhook_service` in `namespace` (Secret
/// [`WEBHOOK_TLS_SECRET`]) issued by `ca`, and the `caBundle` of every webhook of the
/// `ValidatingWebhookConfiguration` `webhook_configuration` equal to the CA.
///
/// # Errors
/// The CA does not parse ([`ApplyError::Malformed`]), issuing failed ([`ApplyError::Perform`]),
/// the Secret changed since it was read ([`ApplyError::Stale`]: another replica wrote it; call
/// again), the configuration kept conflicting ([`ApplyError::Conflict`]), or the API refused.
pub async fn ensure_webhook_cert(
    client: &kube::Client,
    namespace: &str,
    webhook_service: &str,
    webhook_configuration: &str,
    ca: &IssuedPair,
    now: Timestamp,
) -> Result<WebhookCertOutcome, ApplyError> {
    let ca_facts =
        CertFacts::from_pem(&ca.cert_pem, "tls.crt of ichor-oidc-ca").map_err(|e| ApplyError::Malformed {
            what: "the Ichor CA".into(),
            message: e.to_string(),
        })?;
    let secrets = resource_for("Secret").ok_or_else(|| ApplyError::Task("no Secret resource".into()))?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &secrets.api);
    let what = format!("write of Secret {namespace}/{WEBHOOK_TLS_SECRET}");
    let current = match api.get_opt(WEBHOOK_TLS_SECRET).await {
        Ok(found) => found.map(|o| to_value(&what, o)).transpose()?,
        Err(e) => return Err(classify(&what, e).into_error(&what)),
    };
    let fallback = Object::new("Secret", namespace, WEBHOOK_TLS_SECRET, Value::Null);
    let current_data = current
        .as_ref()
        .and_then(|v| SecretData::from_object(&observed("Secret", &fallback, v.clone())));
    let sans = webhook_sans(webhook_service, namespace);
    let (certificate, renew_at, written) =
        match decide_webhook_cert(current_data.as_ref().map(|d| &d.data), &ca.cert_pem, &sans, now) {
            CertDecision::Keep { renew_at } => (CertificateAction::Kept, renew_at, None),
            CertDecision::Issue { reason } => {
                let not_after = now
                    .checked_add(WEBHOOK_CERT_LIFETIME)
                    .unwrap_or(ca_facts.not_after);
                let request = IssueLeafRequest {
                    common_name: format!("{webhook_service}.{namespace}.svc"),
                    sans: sans.iter().cloned().map(SanName::Dns).collect(),
                    not_before: now,
                    not_after: not_after.min(ca_facts.not_after),
                    reason: reason.clone(),
                    replaces: None,
                };
                let signer = ca.clone();
                let leaf = tokio::task::spawn_blocking(move || perform::issue_leaf(&request, &signer))
                    .await
                    .map_err(|e| ApplyError::Task(e.to_string()))??;
                let renew_at = CertFacts::from_pem(&leaf.cert_pem, "the new serving certificate")
                    .map(|f| f.renewal_point())
                    .unwrap_or(now);
                let data = SecretData {
                    name: WEBHOOK_TLS_SECRET.to_owned(),
                    type_: TLS_TYPE.to_owned(),
                    data: BTreeMap::from([
                        (TLS_CERT_KEY.to_owned(), leaf.cert_pem.into_bytes()),
                        (TLS_KEY_KEY.to_owned(), leaf.key_pem.into_bytes()),
                        (CA_CERT_KEY.to_owned(), ca.cert_pem.clone().into_bytes()),
                    ]),
                };
                let written = write_tls_secret(&api, namespace, current.as_ref(), &data, &what).await?;
                (
                    CertificateAction::Issued { reason },
                    renew_at,
                    observed("Secret", &fallback, written).resource_version,
                )
            }
        };
    let ca_bundle = keep_ca_bundle(client, webhook_configuration, &ca.cert_pem).await?;
    Ok(WebhookCertOutcome {
        certificate,
        ca_bundle,
        renew_at,
        written,
    })
}

async fn write_tls_secret(
    api: &Api<DynamicObject>,
    namespace: &str,
    current: Option<&Value>,
    data: &SecretData,
    what: &str,
) -> Result<Value, ApplyError> {
    let mut body = data.to_object().value;
    body["metadata"]["namespace"] = json!(namespace);
    let read = current
        .and_then(|c| c.pointer("/metadata/resourceVersion"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let result = match &read {
        None => api.create(&PostParams::default(), &to_dynamic(what, body)?).await,
        Some(rv) => {
            body["metadata"]["resourceVersion"] = json!(rv);
            api.replace(
                WEBHOOK_TLS_SECRET,
                &PostParams::default(),
                &to_dynamic(what, body)?,
            )
            .await
        }
    };
    match result {
        Ok(o) => to_value(what, o),
        Err(e) => match classify(what, e) {
            Failure::Conflict | Failure::AlreadyExists | Failure::NotFound => Err(ApplyError::Stale {
                name: WEBHOOK_TLS_SECRET.to_owned(),
                read,
            }),
            other => Err(other.into_error(what)),
        },
    }
}

async fn keep_ca_bundle(client: &kube::Client, name: &str, ca_pem: &str) -> Result<BundleAction, ApplyError> {
    let resource = resource_for("ValidatingWebhookConfiguration")
        .ok_or_else(|| ApplyError::Task("no ValidatingWebhookConfiguration resource".into()))?;
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource.api);
    let what = format!("caBundle of ValidatingWebhookConfiguration {name}");
    let retry = RetryPolicy::default();
    for attempt in 0..retry.attempts {
        tokio::time::sleep(retry.pause(attempt)).await;
        let configuration = match api.get_opt(name).await {
            Ok(Some(o)) => to_value(&what, o)?,
            Ok(None) => return Ok(BundleAction::ConfigurationMissing),
            Err(e) => return Err(classify(&what, e).into_error(&what)),
        };
        let Some(patch) = ca_bundle_patch(&configuration, ca_pem) else {
            return Ok(BundleAction::Current);
        };
        let webhooks: Vec<String> = patch
            .get("webhooks")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(|w| w.get("name").and_then(Value::as_str).map(str::to_owned))
            .collect();
        match api
            .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => return Ok(BundleAction::Patched { webhooks }),
            Err(e) => match classify(&what, e) {
                Failure::Conflict => continue,
                Failure::NotFound => return Ok(BundleAction::ConfigurationMissing),
                other => return Err(other.into_error(&what)),
            },
        }
    }
    Err(ApplyError::Conflict {
        what,
        attempts: retry.attempts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_serving_certificate_names_the_service_in_all_four_forms() {
        assert_eq!(
            webhook_sans("ichor-webhook", "ichor-system"),
            [
                "ichor-webhook",
                "ichor-webhook.ichor-system",
                "ichor-webhook.ichor-system.svc",
                "ichor-webhook.ichor-system.svc.cluster.local"
            ]
        );
    }

    #[test]
    fn no_secret_means_issue() {
        assert!(matches!(
            decide_webhook_cert(None, "ca", &[], Timestamp::UNIX_EPOCH),
            CertDecision::Issue { .. }
        ));
    }

    #[test]
    fn the_bundle_patch_sets_only_the_differing_webhooks_and_is_none_when_current() {
        let bundle = STANDARD.encode("CA");
        let config = json!({"metadata": {"resourceVersion": "9"}, "webhooks": [
            {"name": "a.ichor", "clientConfig": {"caBundle": bundle, "service": {"name": "s"}}},
            {"name": "b.ichor", "clientConfig": {"service": {"name": "s"}}}]});
        assert_eq!(
            ca_bundle_patch(&config, "CA"),
            Some(json!({"metadata": {"resourceVersion": "9"},
                "webhooks": [{"name": "b.ichor", "clientConfig": {"caBundle": bundle}}]}))
        );
        let current = json!({"webhooks": [{"name": "a.ichor", "clientConfig": {"caBundle": bundle}}]});
        assert_eq!(ca_bundle_patch(&current, "CA"), None);
    }
}
