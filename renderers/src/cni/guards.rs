//! The three guards that need a fact from outside the object (the cluster's effective machine
//! configuration or the live cluster). Each runs only when its fact is known; an unknown fact
//! passes its guard. The admission webhook knows none of them; the UI, the CLI and the
//! controller's re-check before a Helm Job pass what they could read.

use serde_json::Value;

use super::modes::KubeProxyMode;
use super::path::{KUBE_PROXY_FIELD, values_key};
use super::{CiliumFacts, CniViolation};

/// The port Ichor renders into `k8sServicePort` in replaced mode: Talos' default KubePrism port.
pub const KUBEPRISM_PORT: u16 = 7445;

/// Runs every guard whose fact is known (the KubePrism guard only for a known kube-proxy mode).
pub fn check(
    values: Option<&Value>,
    kube_proxy: Option<KubeProxyMode>,
    facts: &CiliumFacts,
    out: &mut Vec<CniViolation>,
) {
    if facts.forward_kube_dns_to_host == Some(true)
        && let Some((key, why)) = values.and_then(bpf_masquerade)
    {
        out.push(CniViolation::new(
            values_key(key),
            format!(
                "{why}, and the cluster forwards kube-dns to the Talos host DNS \
                 (hostDNS.forwardKubeDNSToHost: true), which stops CoreDNS from resolving; set \
                 forwardKubeDNSToHost: false in the machine configuration or turn BPF masquerading off"
            ),
        ));
    }
    if kube_proxy == Some(KubeProxyMode::Replaced)
        && let Some(port) = facts.kubeprism_port
        && port != KUBEPRISM_PORT
    {
        let found = if port == 0 {
            String::from("KubePrism is disabled")
        } else {
            format!("KubePrism listens on port {port}")
        };
        out.push(CniViolation::new(
            KUBE_PROXY_FIELD,
            format!(
                "is `replaced`, which needs Talos KubePrism on port {KUBEPRISM_PORT} (Cilium reaches the API \
                 servers at localhost:{KUBEPRISM_PORT}), but in the machine configuration {found}"
            ),
        ));
    }
    if facts.gateway_api_crds == Some(false)
        && values.and_then(|v| v.pointer("/gatewayAPI/enabled")) == Some(&Value::Bool(true))
    {
        out.push(CniViolation::new(
            values_key("gatewayAPI.enabled"),
            String::from(
                "needs the Gateway API CRDs (gateways.gateway.networking.k8s.io), which the cluster \
                 does not have; install them first",
            ),
        ));
    }
}

/// Whether the layer turns BPF masquerading on, and through which key: `bpf.masquerade: true`,
/// or (with `bpf.masquerade` unset or null) an `upgradeCompatibility` of 1.8 or 1.9, which
/// flips the chart's default to true.
fn bpf_masquerade(values: &Value) -> Option<(&'static str, &'static str)> {
    match values.pointer("/bpf/masquerade") {
        Some(Value::Bool(true)) => Some(("bpf.masquerade", "turns BPF masquerading on")),
        None | Some(Value::Null) => {
            let compat = values.get("upgradeCompatibility")?.as_str()?;
            is_1_8_or_1_9(compat).then_some((
                "upgradeCompatibility",
                "turns BPF masquerading on (the chart's default for 1.8 and 1.9 compatibility)",
            ))
        }
        Some(_) => None,
    }
}

/// `1.8`, `1.9`, `v1.9`, `1.8.3` and the like.
fn is_1_8_or_1_9(version: &str) -> bool {
    let version = version.trim().trim_start_matches('v');
    let mut parts = version.split('.');
    let major = parts.next();
    let minor = parts
        .next()
        .map(|m| m.split(|c: char| !c.is_ascii_digit()).next().unwrap_or(""));
    major == Some("1") && matches!(minor, Some("8") | Some("9"))
}

#[cfg(test)]
mod tests {
    use super::is_1_8_or_1_9;

    #[test]
    fn reads_1_8_and_1_9_compatibility_versions_only() {
        for yes in ["1.8", "1.9", "v1.9", "1.8.3", " 1.9.0-rc1"] {
            assert!(is_1_8_or_1_9(yes), "{yes}");
        }
        for no in ["1.10", "1.18", "2.8", "", "1", "1.", "18", "1.7"] {
            assert!(!is_1_8_or_1_9(no), "{no}");
        }
    }
}
