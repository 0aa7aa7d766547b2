//! The two CNI modes Ichor itself sets on `spec.cni` and renders into the chart values:
//! the kube-proxy mode and the tunnel mode. Only the modes below are known; anything else is
//! refused, because the controller would not know which chart values to render for it.

use std::fmt;

/// `spec.cni.kubeProxy`: whether Talos runs kube-proxy or Cilium replaces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KubeProxyMode {
    /// Talos runs kube-proxy (`enabled`, or the field empty/absent): `kubeProxyReplacement: false`.
    Enabled,
    /// Cilium replaces kube-proxy (`replaced`): `kubeProxyReplacement: true`, and Cilium reaches
    /// the API servers through Talos KubePrism on `localhost:7445`.
    Replaced,
}

impl KubeProxyMode {
    /// The spellings `spec.cni.kubeProxy` accepts, for messages.
    pub const KNOWN: &'static str = "`enabled` (or empty) or `replaced`";

    /// Reads the field; `None` or `""` is [`KubeProxyMode::Enabled`], as the UI reads it.
    /// Returns `None` for a mode Ichor does not know.
    pub fn parse(field: Option<&str>) -> Option<Self> {
        match field.unwrap_or("") {
            "" | "enabled" => Some(Self::Enabled),
            "replaced" => Some(Self::Replaced),
            _ => None,
        }
    }
}

impl fmt::Display for KubeProxyMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Enabled => "enabled",
            Self::Replaced => "replaced",
        })
    }
}

/// `spec.cni.tunnel`: how pod traffic crosses between nodes (Cilium `routingMode` and
/// `tunnelProtocol`, which Ichor renders from it and therefore owns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TunnelMode {
    /// VXLAN encapsulation (`vxlan`, or the field empty/absent: the chart's default,
    /// `routingMode: tunnel`, `tunnelProtocol: vxlan`, 8472/UDP).
    Vxlan,
    /// Geneve encapsulation (`geneve`: `routingMode: tunnel`, `tunnelProtocol: geneve`, 6081/UDP).
    Geneve,
    /// No encapsulation (`native`: `routingMode: native`); the underlay routes the PodCIDRs.
    Native,
}

impl TunnelMode {
    /// The spellings `spec.cni.tunnel` accepts, for messages.
    pub const KNOWN: &'static str = "`vxlan` (or empty), `geneve` or `native`";

    /// Reads the field; `None` or `""` is the chart's default, [`TunnelMode::Vxlan`].
    /// Returns `None` for a mode Ichor does not know.
    pub fn parse(field: Option<&str>) -> Option<Self> {
        match field.unwrap_or("") {
            "" | "vxlan" => Some(Self::Vxlan),
            "geneve" => Some(Self::Geneve),
            "native" => Some(Self::Native),
            _ => None,
        }
    }
}

impl fmt::Display for TunnelMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Vxlan => "vxlan",
            Self::Geneve => "geneve",
            Self::Native => "native",
        })
    }
}
