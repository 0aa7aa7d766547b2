//! Chart values Ichor owns: it renders them itself (from Talos' requirements, `spec.cni` and
//! its security policy), so a user layer may not set them, nor replace an object holding one.

use serde_json::Value;

use super::CniViolation;
use super::path::values_key;

/// Every Ichor-owned key, dotted, with why Ichor owns it.
pub const OWNED_KEYS: &[(&str, &str)] = &[
    (
        "ipam.mode",
        "Talos requires Kubernetes host-scope IPAM, `kubernetes`",
    ),
    ("kubeProxyReplacement", "Ichor renders it from spec.cni.kubeProxy"),
    (
        "securityContext.capabilities.ciliumAgent",
        "Talos forbids loading kernel modules, so Ichor sets the capability list without SYS_MODULE",
    ),
    (
        "securityContext.capabilities.cleanCiliumState",
        "Talos forbids loading kernel modules, so Ichor sets the capability list without SYS_MODULE",
    ),
    ("cgroup.autoMount.enabled", "Talos mounts cgroup v2 itself"),
    ("cgroup.hostRoot", "Talos mounts cgroup v2 at /sys/fs/cgroup"),
    (
        "k8sServiceHost",
        "Ichor points Cilium at Talos KubePrism (from spec.cni.kubeProxy)",
    ),
    (
        "k8sServicePort",
        "Ichor points Cilium at Talos KubePrism (from spec.cni.kubeProxy)",
    ),
    ("routingMode", "Ichor renders it from spec.cni.tunnel"),
    ("tunnelProtocol", "Ichor renders it from spec.cni.tunnel"),
    (
        "bgpControlPlane.secretsNamespace.name",
        "the Cilium agent may read every Secret in that namespace, so Ichor pins it",
    ),
    (
        "envoyConfig.secretsNamespace.name",
        "the Cilium agent may read every Secret in that namespace, so Ichor pins it",
    ),
    (
        "ingressController.secretsNamespace.name",
        "the Cilium agent may read and the operator write every Secret in that namespace, so Ichor pins it",
    ),
    (
        "gatewayAPI.secretsNamespace.name",
        "the Cilium agent may read and the operator write every Secret in that namespace, so Ichor pins it",
    ),
    (
        "tls.secretsNamespace.name",
        "the Cilium agent may read every Secret in that namespace, so Ichor pins it",
    ),
];

/// How a finding on a non-object ancestor of an owned key starts.
const ANCESTOR: &str = "must be an object";

/// Refuses every owned key the layer sets (whatever its value, `null` included) and every
/// non-object value on the way to one (which would replace the object holding it).
pub fn check(values: &Value, out: &mut Vec<CniViolation>) {
    for (dotted, why) in OWNED_KEYS {
        let mut node = values;
        let mut walked: Vec<&str> = Vec::new();
        for key in dotted.split('.') {
            let Value::Object(map) = node else {
                // An ancestor is set to something that is not an object.
                // One finding per ancestor, even when it holds several owned keys.
                let field = values_key(&walked.join("."));
                if !out
                    .iter()
                    .any(|v| v.field == field && v.message.starts_with(ANCESTOR))
                {
                    out.push(CniViolation::new(
                        field,
                        format!("{ANCESTOR}: it would replace `{dotted}`, which Ichor owns ({why})"),
                    ));
                }
                break;
            };
            let Some(child) = map.get(key) else { break };
            walked.push(key);
            node = child;
            if walked.len() == dotted.split('.').count() {
                out.push(CniViolation::new(
                    values_key(dotted),
                    format!("is owned by Ichor and may not be set in the values ({why})"),
                ));
            }
        }
    }
}
