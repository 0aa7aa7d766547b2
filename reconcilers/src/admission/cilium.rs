//! The seam to the static Cilium values checks of `renderers::cni` (ADR 0129 decision 1 and the
//! ADR 0131 amendment): which changes are validated (ratcheting), the violations of a `spec.cni`,
//! and whether the values changed (which needs `update` on `talosclusters/cilium-values`).
//!
//! The webhook calls the validator with no facts (`CiliumFacts::default()`): the guards that need
//! the machine configuration or the live cluster pass.

use ichor_renderers::crd::CniSpec;

/// One violation of the Cilium values checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CiliumViolation {
    /// The field (`spec.cni.cilium.values.bpf.masquerade`).
    pub field: String,
    /// What is wrong, as advice.
    pub message: String,
}

impl std::fmt::Display for CiliumViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// The Cilium values rules the TalosCluster webhook applies.
pub trait CiliumRules: Send + Sync {
    /// Whether the change from `old` (absent on create) to `new` must be validated: on create when
    /// values are set, on update when the values, `kubeProxy` or `tunnel` change (ratcheting, so
    /// a stricter check never blocks unrelated writes of stored objects).
    fn needs_validation(&self, old: Option<&CniSpec>, new: &CniSpec) -> bool;

    /// The violations of `cni`, checked with no facts about the cluster.
    fn validate(&self, cni: &CniSpec) -> Vec<CiliumViolation>;

    /// Whether the change from `old` to `new` changes `spec.cni.cilium.values`.
    fn values_changed(&self, old: Option<&CniSpec>, new: &CniSpec) -> bool;
}

/// The stand-in used until `renderers::cni` is wired: it validates nothing (no violation), but
/// still reports a change of `spec.cni.cilium.values`, so the `talosclusters/cilium-values` right
/// holds from the start.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCiliumValidation;

fn values(cni: Option<&CniSpec>) -> Option<&serde_json::Value> {
    cni.and_then(|c| c.cilium.as_ref())
        .and_then(|c| c.values.as_ref())
}

impl CiliumRules for NoCiliumValidation {
    fn needs_validation(&self, _old: Option<&CniSpec>, _new: &CniSpec) -> bool {
        false
    }

    fn validate(&self, _cni: &CniSpec) -> Vec<CiliumViolation> {
        Vec::new()
    }

    fn values_changed(&self, old: Option<&CniSpec>, new: &CniSpec) -> bool {
        values(old) != values(Some(new))
    }
}
