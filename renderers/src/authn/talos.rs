//! The Talos machine-config document `KubeAuthenticationConfig` that carries the
//! `AuthenticationConfiguration` to every control plane (Talos contract v1.14 and later).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::model::AuthenticationConfiguration;

/// The Talos document version (not the Kubernetes one).
pub const TALOS_API_VERSION: &str = "v1alpha1";
/// The Talos document kind.
pub const TALOS_KIND: &str = "KubeAuthenticationConfig";

/// sha256 (hex) of a document as a machine's `appliedDocumentHashes` and a rollout's
/// `previousDocument` record it: the canonical form of a `KubeAuthenticationConfig` (as the
/// renderer hashes its own), else the document's bytes.
pub fn document_sha256(yaml: &str) -> String {
    serde_yaml::from_str::<KubeAuthenticationConfig>(yaml)
        .ok()
        .and_then(|d| d.sha256_hex().ok())
        .unwrap_or_else(|| hex::encode(Sha256::digest(yaml.as_bytes())))
}

/// `{apiVersion: v1alpha1, kind: KubeAuthenticationConfig, configuration: {...}}`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeAuthenticationConfig {
    /// `v1alpha1`.
    pub api_version: String,
    /// `KubeAuthenticationConfig`.
    pub kind: String,
    /// The complete configuration: Talos replaces the whole map on patch (`merge:"replace"`).
    pub configuration: AuthenticationConfiguration,
}

impl KubeAuthenticationConfig {
    /// Wraps a configuration in the Talos document.
    pub fn new(configuration: AuthenticationConfiguration) -> Self {
        Self {
            api_version: TALOS_API_VERSION.into(),
            kind: TALOS_KIND.into(),
            configuration,
        }
    }

    /// The document as YAML (strings such as `!user...` and `ichor:` come out quoted).
    pub fn to_yaml(&self) -> Result<String, serde_yaml::Error> {
        serde_yaml::to_string(self)
    }

    /// The canonical form: compact JSON in field declaration order, unset fields omitted.
    pub fn canonical_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(self)
    }

    /// The lower-case hex sha256 of [`Self::canonical_json`], for applied-vs-desired comparison.
    pub fn sha256_hex(&self) -> Result<String, serde_json::Error> {
        Ok(hex::encode(Sha256::digest(self.canonical_json()?)))
    }
}
