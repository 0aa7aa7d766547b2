//! The leader's keeper of the webhook serving certificate: issues `ichor-webhook-tls` from the
//! Ichor CA once the CA exists, renews it at two thirds of its life or when the CA or the
//! Service's names change, and keeps the `caBundle` of the webhook configuration in step
//! ([`crate::apply::webhook`] decides and writes; this task only schedules it).

use std::sync::Arc;
use std::time::Duration;

use ichor_renderers::trust::CA_SECRET;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use tokio::sync::watch as signal;

use super::convert::to_object;
use super::leader::LeaderFlag;
use crate::apply::webhook::{CertificateAction, WebhookCertOutcome, ca_from_secret, ensure_webhook_cert};

/// How often a settled certificate is looked at again (a changed CA or a deleted Secret is
/// noticed within this time).
pub const CHECK_EVERY: Duration = Duration::from_secs(60);
/// The pause after a failure, and while the CA does not exist yet.
pub const RETRY_EVERY: Duration = Duration::from_secs(10);
/// How often a standby looks whether it became the leader.
pub const STANDBY_EVERY: Duration = Duration::from_secs(5);

/// Where the certificate goes and what it names.
#[derive(Debug, Clone)]
pub struct WebhookCertTarget {
    /// The controller's namespace (the CA, the Secret, the Service).
    pub namespace: String,
    /// The webhook Service (the certificate's DNS names).
    pub service: String,
    /// The ValidatingWebhookConfiguration whose `caBundle`s are kept.
    pub configuration: String,
}

/// One pass: `Ok(None)` while the Ichor CA does not exist yet.
///
/// # Errors
/// Why the certificate or the bundle could not be checked or written, as a sentence.
pub async fn ensure_once(
    client: &Client,
    target: &WebhookCertTarget,
    now: Timestamp,
) -> Result<Option<WebhookCertOutcome>, String> {
    let resource = ApiResource::erase::<Secret>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &target.namespace, &resource);
    let secret = api
        .get_opt(CA_SECRET)
        .await
        .map_err(|e| format!("cannot read the Secret {CA_SECRET}: {e}"))?;
    let Some(secret) = secret else {
        return Ok(None);
    };
    let ca = to_object(&resource, &secret)
        .as_ref()
        .and_then(ca_from_secret)
        .ok_or_else(|| format!("the Secret {CA_SECRET} has no tls.crt and tls.key"))?;
    ensure_webhook_cert(
        client,
        &target.namespace,
        &target.service,
        &target.configuration,
        &ca,
        now,
    )
    .await
    .map(Some)
    .map_err(|e| e.to_string())
}

/// The delay before the next pass after `outcome` at `now`: the renewal point, at most
/// [`CHECK_EVERY`] away.
pub fn next_check(outcome: &WebhookCertOutcome, now: Timestamp) -> Duration {
    let until = outcome.renew_at.duration_since(now);
    Duration::try_from(until)
        .unwrap_or(Duration::ZERO)
        .clamp(Duration::from_secs(1), CHECK_EVERY)
}

/// Runs passes while this replica leads, until `shutdown`.
pub async fn keep(
    client: Client,
    target: WebhookCertTarget,
    leader: Arc<LeaderFlag>,
    mut shutdown: signal::Receiver<bool>,
) {
    loop {
        let wait = if leader.is_leader() {
            let now = Timestamp::now();
            match ensure_once(&client, &target, now).await {
                Ok(Some(outcome)) => {
                    if let CertificateAction::Issued { reason } = &outcome.certificate {
                        tracing::info!(reason = %reason, renew_at = %outcome.renew_at,
                            "webhook serving certificate issued");
                    }
                    tracing::debug!(bundle = ?outcome.ca_bundle, "webhook caBundle checked");
                    next_check(&outcome, now)
                }
                Ok(None) => {
                    tracing::debug!("the Ichor CA does not exist yet: no webhook certificate");
                    RETRY_EVERY
                }
                Err(problem) => {
                    tracing::warn!(problem = %problem, "webhook certificate not kept");
                    RETRY_EVERY
                }
            }
        } else {
            STANDBY_EVERY
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = shutdown.wait_for(|v| *v) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::apply::webhook::BundleAction;

    fn outcome(renew_at: Timestamp) -> WebhookCertOutcome {
        WebhookCertOutcome {
            certificate: CertificateAction::Kept,
            ca_bundle: BundleAction::Current,
            renew_at,
            written: None,
        }
    }

    #[test]
    fn a_far_renewal_is_checked_again_within_a_minute_and_a_due_one_at_once() {
        let now: Timestamp = "2026-11-29T00:00:00Z".parse().unwrap();
        let far = now + jiff::SignedDuration::from_hours(24 * 200);
        assert_eq!(next_check(&outcome(far), now), CHECK_EVERY);
        let soon = now + jiff::SignedDuration::from_secs(20);
        assert_eq!(next_check(&outcome(soon), now), Duration::from_secs(20));
        let past = now - jiff::SignedDuration::from_secs(20);
        assert_eq!(next_check(&outcome(past), now), Duration::from_secs(1));
    }
}
