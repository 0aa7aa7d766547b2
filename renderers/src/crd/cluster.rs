//! The parts of `TalosCluster` identity reads and validates: the version contract, the
//! endpoint, `spec.authentication` and `spec.cni`.

use std::{fmt, str::FromStr};

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A Talos Kubernetes cluster managed by Ichor (only the fields identity reads are modelled).
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "ichor.maesh.dev",
    version = "v1alpha1",
    kind = "TalosCluster",
    plural = "talosclusters",
    namespaced,
    derive = "PartialEq",
    doc = "A Talos Kubernetes cluster managed by Ichor (identity's view: contract, endpoint, authentication, CNI)."
)]
#[serde(rename_all = "camelCase")]
pub struct TalosClusterSpec {
    /// The Talos machine-configuration version contract, for example `v1.14`. Structured
    /// authentication (`KubeAuthenticationConfig`) exists from `v1.14`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_contract: Option<VersionContract>,

    /// The control-plane endpoint URL (`https://host:6443`). It is also the cluster's
    /// service-account issuer, which no JWT issuer may equal, and the server of the kubeconfigs
    /// the issuer serves when no `kubeAPIServerURL` is set. Changing it needs `update` on
    /// `talosclusters/endpoint`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 2048))]
    pub endpoint: String,

    /// Which OpenID Connect issuers the kube-apiserver trusts. Changing it needs `update` on
    /// `talosclusters/authentication`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<AuthenticationSpec>,

    /// The CNI settings (identity validates the Cilium values statically).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cni: Option<CniSpec>,
}

/// `spec.authentication`: Ichor's own issuer and up to three external identity providers.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticationSpec {
    /// Ichor's own issuer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ichor: Option<IchorIssuerSpec>,

    /// External OpenID Connect providers, at most three.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 3))]
    pub external: Vec<ExternalIssuerSpec>,
}

/// `spec.authentication.ichor`: whether the kube-apiserver trusts Ichor's own issuer.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IchorIssuerSpec {
    /// Whether Ichor's issuer is trusted.
    #[serde(default)]
    pub enabled: bool,
    /// The issuer's external https URL: the `iss` of every token, what browsers and the CLI use.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 2048))]
    pub url: String,
}

/// One external OpenID Connect provider the kube-apiserver trusts.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ExternalIssuerSpec {
    /// The issuer URL (`iss`), https.
    #[serde(rename = "issuerURL", default)]
    #[schemars(length(max = 2048))]
    pub issuer_url: String,
    /// Accepted audiences, at least one.
    #[serde(default)]
    #[schemars(length(max = 16))]
    pub audiences: Vec<String>,
    /// The claim that names the user (default `email`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username_claim: Option<String>,
    /// The claim that lists the groups (default `groups`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups_claim: Option<String>,
    /// Prefix of user names (default `oidc:`). May not be empty, and no name made of it may
    /// start with `ichor:` or `system:` (so not `ichor`, `sys`, nor anything under them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username_prefix: Option<String>,
    /// Prefix of group names (default `oidc:`). May not be empty, and no name made of it may
    /// start with `ichor:` or `system:` (so not `ichor`, `sys`, nor anything under them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups_prefix: Option<String>,
    /// PEM CA bundle for TLS to the provider (public data). Unset: the host's roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 65536))]
    pub certificate_authority: Option<String>,
}

impl ExternalIssuerSpec {
    /// Default user-name claim of an external provider.
    pub const DEFAULT_USERNAME_CLAIM: &'static str = "email";
    /// Default groups claim of an external provider.
    pub const DEFAULT_GROUPS_CLAIM: &'static str = "groups";
    /// Default prefix (users and groups) of an external provider.
    pub const DEFAULT_PREFIX: &'static str = "oidc:";

    /// The user-name claim, defaulted.
    pub fn username_claim(&self) -> &str {
        self.username_claim
            .as_deref()
            .unwrap_or(Self::DEFAULT_USERNAME_CLAIM)
    }
    /// The groups claim, defaulted.
    pub fn groups_claim(&self) -> &str {
        self.groups_claim.as_deref().unwrap_or(Self::DEFAULT_GROUPS_CLAIM)
    }
    /// The user-name prefix, defaulted.
    pub fn username_prefix(&self) -> &str {
        self.username_prefix.as_deref().unwrap_or(Self::DEFAULT_PREFIX)
    }
    /// The groups prefix, defaulted.
    pub fn groups_prefix(&self) -> &str {
        self.groups_prefix.as_deref().unwrap_or(Self::DEFAULT_PREFIX)
    }
}

/// `spec.cni`: the CNI preset and, for Cilium, the user's chart values.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CniSpec {
    /// The preset (`cilium`, `flannel`, `unmanaged`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// kube-proxy mode (empty means enabled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_proxy: Option<String>,
    /// Tunnel mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<String>,
    /// Cilium settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cilium: Option<CiliumSpec>,
}

/// `spec.cni.cilium`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CiliumSpec {
    /// The user's Cilium chart values layer (a JSON object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
    pub values: Option<serde_json::Value>,
}

/// A Talos version contract such as `v1.14`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VersionContract {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl VersionContract {
    /// The first contract with the multi-document Kubernetes configuration and so
    /// `KubeAuthenticationConfig`.
    pub const STRUCTURED_AUTHENTICATION: Self = Self { major: 1, minor: 14 };

    /// Whether this contract carries `KubeAuthenticationConfig` (v1.14 and later).
    pub fn supports_structured_authentication(&self) -> bool {
        *self >= Self::STRUCTURED_AUTHENTICATION
    }
}

/// Why a version contract was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid version contract {0:?}: write v<major>.<minor>, for example v1.14")]
pub struct VersionContractError(pub String);

impl FromStr for VersionContract {
    type Err = VersionContractError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || VersionContractError(s.chars().take(32).collect());
        let rest = s.strip_prefix('v').ok_or_else(err)?;
        let (major, minor) = rest.split_once('.').ok_or_else(err)?;
        let num = |p: &str| {
            if p.is_empty() || p.len() > 4 || !p.bytes().all(|b| b.is_ascii_digit()) {
                Err(err())
            } else {
                p.parse::<u32>().map_err(|_| err())
            }
        };
        Ok(Self {
            major: num(major)?,
            minor: num(minor)?,
        })
    }
}

impl fmt::Display for VersionContract {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}", self.major, self.minor)
    }
}

impl Serialize for VersionContract {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for VersionContract {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for VersionContract {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "VersionContract".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "pattern": "^v[0-9]{1,4}\\.[0-9]{1,4}$"})
    }
    fn inline_schema() -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_contracts_order_numerically() {
        let v = |s: &str| s.parse::<VersionContract>().unwrap();
        assert!(v("v1.14") > v("v1.9"));
        assert!(v("v1.14").supports_structured_authentication());
        assert!(v("v2.0").supports_structured_authentication());
        assert!(!v("v1.13").supports_structured_authentication());
    }

    #[test]
    fn refuses_contracts_not_written_v_major_minor() {
        for bad in ["1.14", "v1", "v1.14.0", "v1.x", "", "v.14", "v99999.1"] {
            assert!(bad.parse::<VersionContract>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn external_issuer_defaults_are_the_seeds() {
        let e = ExternalIssuerSpec::default();
        assert_eq!((e.username_claim(), e.groups_claim()), ("email", "groups"));
        assert_eq!((e.username_prefix(), e.groups_prefix()), ("oidc:", "oidc:"));
    }
}
