//! Checks the chart makes at render time (`templates/validate.yaml` calls `fail`), repeated
//! here so a layer that would fail the Helm Job is refused at admission instead. Only rules
//! that read nothing but the layer itself are here, and only for keys the layer sets (the
//! chart's defaults pass them).

use serde_json::Value;

use super::CniViolation;
use super::path::values_key;

/// The values `gatewayAPI.externalTrafficPolicy` may take (validate.yaml L126–130).
const TRAFFIC_POLICIES: &[&str] = &["Cluster", "Local"];

/// Runs every chart rule on the layer.
pub fn check(values: &Value, out: &mut Vec<CniViolation>) {
    if let Some(policy) = values
        .pointer("/gatewayAPI/externalTrafficPolicy")
        .and_then(Value::as_str)
        && !TRAFFIC_POLICIES.contains(&policy)
    {
        out.push(CniViolation::new(
            values_key("gatewayAPI.externalTrafficPolicy"),
            "must be `Cluster` or `Local` (the chart fails otherwise)",
        ));
    }
    // validate.yaml L112–117: the Envoy-based features need the L7 proxy when the key is set.
    if values.get("l7Proxy") == Some(&Value::Bool(false)) {
        let users: Vec<&str> = [
            (
                "ingressController.enabled",
                values.pointer("/ingressController/enabled") == Some(&Value::Bool(true)),
            ),
            (
                "gatewayAPI.enabled",
                values.pointer("/gatewayAPI/enabled") == Some(&Value::Bool(true)),
            ),
            (
                "loadBalancer.l7.backend: envoy",
                values.pointer("/loadBalancer/l7/backend").and_then(Value::as_str) == Some("envoy"),
            ),
        ]
        .into_iter()
        .filter_map(|(name, on)| on.then_some(name))
        .collect();
        if !users.is_empty() {
            out.push(CniViolation::new(
                values_key("l7Proxy"),
                format!(
                    "must be true for {} (the chart fails otherwise)",
                    users.join(", ")
                ),
            ));
        }
    }
}
