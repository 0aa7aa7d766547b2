//! The write of the webhook configuration's `caBundle`s. The graph decides them
//! ([`ichor_controller_core::identity::webhook`]: the configuration as observed, each webhook's
//! `clientConfig.caBundle` the Ichor CA) and the serving certificate (the `issue-webhook-leaf`
//! effect, written like every effect's Secret); this module only carries the bundles out.
//!
//! The write is a strategic merge patch holding, for each webhook whose bundle differs from the
//! observed one, only its `name` (the merge key) and `clientConfig.caBundle`, conditioned on the
//! observed resourceVersion: the chart's fields are never written, and a configuration changed
//! meanwhile (a `helm upgrade`) is a stale write the graph decides again from.

use ichor_graph::{Event, Object, World};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

pub use ichor_controller_core::identity::webhook::{
    CONFIGURATION_KIND, CertDecision, WEBHOOK_CERT_LIFETIME, WEBHOOK_CONFIGURATION, WEBHOOK_TLS_SECRET,
    decide_webhook_cert, webhook_sans,
};

use super::error::ApplyError;
use super::resources::Resource;
use super::{KubeApplier, Written};

/// The strategic merge patch carrying the `caBundle` of every webhook of `desired` whose bundle
/// differs from the one in `observed` (the configuration as last seen), with `resource_version`
/// as precondition; `None` when every bundle is current (no write).
pub fn ca_bundle_patch(
    desired: &Value,
    observed: Option<&Value>,
    resource_version: Option<&str>,
) -> Option<Value> {
    let hooks = |v: Option<&Value>| -> Vec<Value> {
        v.and_then(|v| v.get("webhooks"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let bundle_of = |w: &Value| w.pointer("/clientConfig/caBundle").cloned();
    let seen = hooks(observed);
    let stale: Vec<Value> = hooks(Some(desired))
        .iter()
        .filter_map(|w| {
            let name = w.get("name")?.as_str()?;
            let bundle = bundle_of(w)?;
            let current = seen
                .iter()
                .find(|s| s.get("name").and_then(Value::as_str) == Some(name))
                .and_then(bundle_of);
            (current.as_ref() != Some(&bundle))
                .then(|| json!({"name": name, "clientConfig": {"caBundle": bundle}}))
        })
        .collect();
    if stale.is_empty() {
        return None;
    }
    let mut patch = json!({ "webhooks": stale });
    if let Some(rv) = resource_version {
        patch["metadata"] = json!({ "resourceVersion": rv });
    }
    Some(patch)
}

impl KubeApplier {
    /// Patches the `caBundle`s the graph desires onto the configuration it observed.
    pub(super) async fn write_ca_bundle(
        &self,
        world: &World,
        object: &Object,
        resource: &Resource,
    ) -> Result<Written, ApplyError> {
        let key = object.key();
        let what = format!("caBundle of {key}");
        let seen = world.get(&key);
        let Some(patch) = ca_bundle_patch(
            &object.value,
            seen.map(|o| &o.value),
            seen.and_then(|o| o.resource_version.as_deref()),
        ) else {
            return Ok(Written::Done(Event::Applied(
                seen.cloned().unwrap_or_else(|| object.clone()),
            )));
        };
        let result = self
            .api(resource, &key.namespace)
            .patch(&key.name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await;
        self.conditional(resource, object, &what, result).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundle_patch_sets_only_the_differing_webhooks_and_is_none_when_current() {
        let desired = json!({"webhooks": [
            {"name": "a.ichor", "clientConfig": {"caBundle": "Q0E=", "service": {"name": "s"}}, "rules": []},
            {"name": "b.ichor", "clientConfig": {"caBundle": "Q0E=", "service": {"name": "s"}}}]});
        let observed = json!({"webhooks": [
            {"name": "a.ichor", "clientConfig": {"caBundle": "Q0E=", "service": {"name": "s"}}},
            {"name": "b.ichor", "clientConfig": {"service": {"name": "s"}}}]});
        assert_eq!(
            ca_bundle_patch(&desired, Some(&observed), Some("9")),
            Some(json!({"metadata": {"resourceVersion": "9"},
                "webhooks": [{"name": "b.ichor", "clientConfig": {"caBundle": "Q0E="}}]}))
        );
        assert_eq!(ca_bundle_patch(&desired, Some(&desired), Some("9")), None);
    }
}
