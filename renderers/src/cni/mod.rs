//! The static Cilium values validator (the seed's `pkg/cni/cilium` `ValidateValues`, ADR 0129
//! decision 1 and its amendments), called by the `TalosCluster` admission webhook with no facts
//! and by the UI, the CLI and the controller with what facts they could read.
//!
//! [`validate`] checks `spec.cni` as a whole:
//! - `spec.cni.kubeProxy` and `spec.cni.tunnel` are modes Ichor knows ([`KubeProxyMode`],
//!   [`TunnelMode`]);
//! - `spec.cni.cilium.values` is a JSON object within the size bounds ([`bounds`]);
//! - it sets no Ichor-owned key ([`owned::OWNED_KEYS`], the five `*.secretsNamespace.name`
//!   included);
//! - it has no key the chart does not know (the chart schema has no
//!   `additionalProperties: false`, so Helm would ignore a typo) and matches the chart's
//!   `values.schema.json` ([`schema`], Cilium [`schema::CHART_VERSION`]);
//! - it passes the render-time checks of the chart that read only the layer ([`chart`]);
//! - the fact-dependent guards ([`guards`]) hold for every fact that is known.
//!
//! Nothing is checked for preset `unmanaged`: Ichor leaves that CNI alone.
//! [`needs_validation`] is the webhook's ratchet and [`values_changed`] tells it when to ask for
//! `update` on `talosclusters/cilium-values`.
//!
//! Every walk is bounded: the depth, key-count and size caps are checked first without
//! recursion, and nothing else runs on a layer that breaks them.

pub mod bounds;
pub mod chart;
pub mod guards;
pub mod modes;
pub mod owned;
pub mod path;
pub mod schema;

#[cfg(test)]
mod tests;

use serde_json::Value;

use crate::crd::CniSpec;

pub use modes::{KubeProxyMode, TunnelMode};
pub use path::{KUBE_PROXY_FIELD, TUNNEL_FIELD, VALUES_FIELD};

/// The most findings [`validate`] returns; past it the last finding counts the rest, so an
/// admission response stays small whatever the layer holds.
pub const MAX_VIOLATIONS: usize = 64;

/// The preset for which Ichor leaves the CNI alone and checks nothing.
pub const UNMANAGED_PRESET: &str = "unmanaged";

/// Facts a caller may know about the cluster; None = unknown → the guard needing it passes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CiliumFacts {
    /// Talos `hostDNS.forwardKubeDNSToHost` in the effective machine configuration of a control
    /// plane (on by default since Talos 1.8). `Some(true)` refuses BPF masquerading.
    pub forward_kube_dns_to_host: Option<bool>,
    /// The Talos KubePrism port in the effective machine configuration, `Some(0)` when KubePrism
    /// is disabled. In replaced mode anything but 7445 is refused.
    pub kubeprism_port: Option<u16>,
    /// Whether the live cluster has the Gateway API CRDs. `Some(false)` refuses
    /// `gatewayAPI.enabled: true`.
    pub gateway_api_crds: Option<bool>,
}

/// One finding: the JSON path of the field (e.g. `spec.cni.cilium.values.bpf.masquerade`) and a sentence.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, thiserror::Error)]
#[error("{field} {message}")]
pub struct CniViolation {
    /// The path of the offending field inside the `TalosCluster`.
    pub field: String,
    /// What is wrong and, where there is one, how to fix it; reads as a sentence after the field.
    pub message: String,
}

impl CniViolation {
    /// A finding on `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Validates spec.cni as a whole (skips everything for preset `unmanaged`), returning every violation (empty = valid).
pub fn validate(cni: &CniSpec, facts: &CiliumFacts) -> Vec<CniViolation> {
    let mut out = Vec::new();
    if is_unmanaged(cni) {
        return out;
    }
    let kube_proxy = KubeProxyMode::parse(cni.kube_proxy.as_deref());
    if kube_proxy.is_none() {
        out.push(CniViolation::new(
            KUBE_PROXY_FIELD,
            format!(
                "is {:?}, which is not a kube-proxy mode Ichor knows; use {}",
                cni.kube_proxy.as_deref().unwrap_or(""),
                KubeProxyMode::KNOWN
            ),
        ));
    }
    if TunnelMode::parse(cni.tunnel.as_deref()).is_none() {
        out.push(CniViolation::new(
            TUNNEL_FIELD,
            format!(
                "is {:?}, which is not a tunnel mode Ichor knows; use {}",
                cni.tunnel.as_deref().unwrap_or(""),
                TunnelMode::KNOWN
            ),
        ));
    }
    let values = cni.cilium.as_ref().and_then(|c| c.values.as_ref());
    let values_ok = match values {
        None => true,
        Some(values) => check_values(values, &mut out),
    };
    // A guard reads the values, so it runs only on a layer that passed the bounds.
    if values_ok {
        guards::check(values, kube_proxy, facts, &mut out);
    }
    if out.len() > MAX_VIOLATIONS {
        let rest = out.len() - (MAX_VIOLATIONS - 1);
        out.truncate(MAX_VIOLATIONS - 1);
        out.push(CniViolation::new(
            VALUES_FIELD,
            format!("has {rest} more problems than those listed"),
        ));
    }
    out
}

/// The checks of the values layer itself; returns false when the layer could not be read
/// (not an object, or out of bounds), in which case nothing else looked at it.
fn check_values(values: &Value, out: &mut Vec<CniViolation>) -> bool {
    if !values.is_object() {
        out.push(CniViolation::new(
            VALUES_FIELD,
            format!(
                "must be a JSON object of Cilium chart values, not {}",
                kind(values)
            ),
        ));
        return false;
    }
    let breaches = bounds::measure(values);
    if !breaches.is_empty() {
        out.extend(breaches.into_iter().map(|breach| {
            CniViolation::new(
                VALUES_FIELD,
                match breach {
                    bounds::Breach::TooDeep => {
                        format!(
                            "nests deeper than {} levels; no chart value needs that",
                            bounds::MAX_DEPTH
                        )
                    }
                    bounds::Breach::TooManyKeys(n) => {
                        format!(
                            "has {n} keys, more than the {} allowed in one layer",
                            bounds::MAX_KEYS
                        )
                    }
                    bounds::Breach::TooLarge(n) => format!(
                        "is larger than {} bytes as compact JSON (at least {n}); keep the layer to the \
                         values that differ from the chart's defaults",
                        bounds::MAX_VALUES_BYTES
                    ),
                },
            )
        }));
        return false;
    }
    owned::check(values, out);
    schema::check(values, VALUES_FIELD, out);
    chart::check(values, out);
    true
}

/// Ratcheting: whether an update from `old` to `new` must be validated (only when values, kubeProxy or tunnel change; always on create = old None).
///
/// Equality is semantic: an absent field equals an empty one (`kubeProxy`, `tunnel`), absent,
/// `null` and `{}` values are the same empty layer, and key order does not matter. One more
/// case runs the check: leaving preset `unmanaged`, whose values were never checked.
pub fn needs_validation(old: Option<&CniSpec>, new: &CniSpec) -> bool {
    let Some(old) = old else { return true };
    values_changed(Some(old), new)
        || old.kube_proxy.as_deref().unwrap_or("") != new.kube_proxy.as_deref().unwrap_or("")
        || old.tunnel.as_deref().unwrap_or("") != new.tunnel.as_deref().unwrap_or("")
        || (is_unmanaged(old) && !is_unmanaged(new))
}

/// Whether the change from old to new touches the Cilium values (the webhook then requires `update` on `talosclusters/cilium-values`).
///
/// On create (`old` None) that is whenever the new object carries a non-empty layer.
pub fn values_changed(old: Option<&CniSpec>, new: &CniSpec) -> bool {
    layer(old) != layer(Some(new))
}

/// The values layer with absent, `null` and `{}` folded into `None`.
fn layer(cni: Option<&CniSpec>) -> Option<&Value> {
    let values = cni?.cilium.as_ref()?.values.as_ref()?;
    match values {
        Value::Null => None,
        Value::Object(map) if map.is_empty() => None,
        other => Some(other),
    }
}

fn is_unmanaged(cni: &CniSpec) -> bool {
    cni.preset.as_deref() == Some(UNMANAGED_PRESET)
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
