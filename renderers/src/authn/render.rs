//! `render`: from a `TalosCluster` and the Ichor trust to a validated `KubeAuthenticationConfig`.
//! An invalid configuration never leaves this function: Talos does not validate the document
//! and an invalid one crash-loops every kube-apiserver.

use super::{
    build::{IchorTrust, build},
    field::{FieldError, aggregate},
    model::AuthenticationConfiguration,
    prefix::{self, PrefixError},
    talos::KubeAuthenticationConfig,
    validate::{ValidationOptions, validate},
};
use crate::{
    auth::second_factor_policy::SecondFactorPolicy,
    crd::{AuthenticationSpec, TalosCluster, VersionContract},
};

/// The most external providers `spec.authentication.external` may list.
pub const MAX_EXTERNAL_ISSUERS: usize = 3;
/// The ConfigMap the controller publishes the Ichor issuer's trust in.
pub use crate::contract::TRUST_CONFIGMAP;

/// A validated, rendered authentication configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    /// The kube-apiserver configuration.
    pub configuration: AuthenticationConfiguration,
    /// The Talos document that carries it.
    pub document: KubeAuthenticationConfig,
    /// The document as YAML, as it is applied.
    pub yaml: String,
    /// sha256 (hex) of the document's canonical JSON ([`KubeAuthenticationConfig::sha256_hex`]).
    pub sha256: String,
}

/// Why no configuration was rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The cluster has no version contract.
    #[error("spec.versionContract: required: structured authentication needs contract v1.14 or later")]
    ContractMissing,
    /// The contract predates `KubeAuthenticationConfig`.
    #[error(
        "spec.versionContract: {0} is too old: structured authentication needs contract v1.14 or later; raise spec.versionContract or remove spec.authentication"
    )]
    ContractTooOld(VersionContract),
    /// More than three external providers.
    #[error("spec.authentication.external: {0} providers listed, at most 3 are allowed")]
    TooManyExternal(usize),
    /// Ichor's issuer is enabled without a URL.
    #[error(
        "spec.authentication.ichor.url: required when spec.authentication.ichor.enabled is true: set the external https URL of ichor-ui"
    )]
    IchorUrlMissing,
    /// Ichor's issuer is enabled but the controller has not published its trust yet.
    #[error(
        "spec.authentication.ichor: waiting for ichor-oidc-trust: the controller has not published the issuer's discoveryURL and CA yet"
    )]
    WaitingForIchorTrust,
    /// An external prefix is refused.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Prefix(Vec<PrefixError>),
    /// The built configuration fails the kube-apiserver's validation.
    #[error("invalid authentication configuration: {}", aggregate(.0))]
    Invalid(Vec<FieldError>),
    /// The document could not be serialised (not expected for these types).
    #[error("the KubeAuthenticationConfig document could not be serialised: {0}")]
    Serialize(String),
}

/// Renders the `KubeAuthenticationConfig` of a cluster. A cluster without `spec.authentication`
/// gets Talos's default content (no issuer, anonymous access to the health endpoints only).
/// `second_factor` is the installation's policy: where it requires a second factor, Ichor's
/// entry carries the rules that make the kube-apiserver require one too
/// ([`super::second_factor`]); the default policy renders what was rendered before it existed.
pub fn render(
    cluster: &TalosCluster,
    ichor_trust: Option<&IchorTrust>,
    second_factor: &SecondFactorPolicy,
) -> Result<Rendered, RenderError> {
    let spec = &cluster.spec;
    match spec.version_contract {
        None => return Err(RenderError::ContractMissing),
        Some(c) if !c.supports_structured_authentication() => return Err(RenderError::ContractTooOld(c)),
        Some(_) => {}
    }
    let default = AuthenticationSpec::default();
    let auth = spec.authentication.as_ref().unwrap_or(&default);
    if auth.external.len() > MAX_EXTERNAL_ISSUERS {
        return Err(RenderError::TooManyExternal(auth.external.len()));
    }
    let prefix_errors = prefix::check(auth);
    if !prefix_errors.is_empty() {
        return Err(RenderError::Prefix(prefix_errors));
    }
    if let Some(ichor) = auth.ichor.as_ref().filter(|i| i.enabled) {
        if ichor.url.is_empty() {
            return Err(RenderError::IchorUrlMissing);
        }
        if !ichor_trust.is_some_and(IchorTrust::is_complete) {
            return Err(RenderError::WaitingForIchorTrust);
        }
    }

    let configuration = build(auth, ichor_trust, second_factor);
    let options = ValidationOptions {
        disallowed_issuers: if spec.endpoint.is_empty() {
            vec![]
        } else {
            vec![spec.endpoint.clone()]
        },
    };
    let errors = validate(&configuration, &options);
    if !errors.is_empty() {
        return Err(RenderError::Invalid(errors));
    }
    let document = KubeAuthenticationConfig::new(configuration.clone());
    let yaml = document
        .to_yaml()
        .map_err(|e| RenderError::Serialize(e.to_string()))?;
    let sha256 = document
        .sha256_hex()
        .map_err(|e| RenderError::Serialize(e.to_string()))?;
    Ok(Rendered {
        configuration,
        document,
        yaml,
        sha256,
    })
}
