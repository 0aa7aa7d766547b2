//! The typed Kubernetes `AuthenticationConfiguration` (`apiserver.config.k8s.io/v1beta1`) and
//! its strict parser.
//!
//! Serialisation writes only what is set (so a rendered file holds exactly the fields the
//! renderer chose); `anonymous.enabled` and `jwt` are always written. Deserialisation is strict
//! like the kube-apiserver's: unknown and duplicated fields are errors, `null` counts as unset.

use serde::{Deserialize, Deserializer, Serialize};

mod parser;

pub use parser::{ParseError, parse};

/// The API version this project writes (the one Talos forces as well).
pub const API_VERSION: &str = "apiserver.config.k8s.io/v1beta1";
/// The kind of the object.
pub const KIND: &str = "AuthenticationConfiguration";
/// The versions the kube-apiserver serves for this kind; all decode to the same type.
pub const SERVED_API_VERSIONS: [&str; 3] = [
    "apiserver.config.k8s.io/v1",
    "apiserver.config.k8s.io/v1beta1",
    "apiserver.config.k8s.io/v1alpha1",
];
/// The largest file [`parse`] reads.
pub const MAX_CONFIG_BYTES: usize = 1024 * 1024;
/// The one audience match policy Kubernetes defines.
pub const AUDIENCE_MATCH_ANY: &str = "MatchAny";

fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A list whose `null` items are their type's zero value, as Go's JSON decoding leaves them.
fn nullable_items<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    let items = Option::<Vec<Option<T>>>::deserialize(d)?.unwrap_or_default();
    Ok(items.into_iter().map(Option::unwrap_or_default).collect())
}

/// The kube-apiserver's structured authentication configuration.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuthenticationConfiguration {
    /// `apiserver.config.k8s.io/v1beta1` (any served version is accepted when parsing).
    #[serde(default, deserialize_with = "nullable")]
    pub api_version: String,
    /// `AuthenticationConfiguration`.
    #[serde(default, deserialize_with = "nullable")]
    pub kind: String,
    /// The JWT authenticators, tried in order; at most 64.
    #[serde(default, deserialize_with = "nullable_items")]
    pub jwt: Vec<JwtAuthenticator>,
    /// The anonymous authenticator; absent leaves it to the `--anonymous-auth` flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anonymous: Option<AnonymousAuthConfig>,
}

impl Default for AuthenticationConfiguration {
    fn default() -> Self {
        Self {
            api_version: API_VERSION.into(),
            kind: KIND.into(),
            jwt: Vec::new(),
            anonymous: None,
        }
    }
}

/// One JWT authenticator: an issuer and how its tokens map to a Kubernetes user.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JwtAuthenticator {
    /// The issuer and how to reach and trust it.
    #[serde(default, deserialize_with = "nullable")]
    pub issuer: Issuer,
    /// Rules every token's claims must pass.
    #[serde(
        default,
        deserialize_with = "nullable_items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub claim_validation_rules: Vec<ClaimValidationRule>,
    /// How claims become the user name, groups, uid and extra.
    #[serde(default, deserialize_with = "nullable")]
    pub claim_mappings: ClaimMappings,
    /// Rules the mapped user must pass.
    #[serde(
        default,
        deserialize_with = "nullable_items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub user_validation_rules: Vec<UserValidationRule>,
}

/// `jwt[].issuer`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Issuer {
    /// The issuer identifier: must equal the tokens' `iss` exactly.
    #[serde(default, deserialize_with = "nullable")]
    pub url: String,
    /// Where the discovery document is fetched instead of `<url>/.well-known/...`.
    #[serde(rename = "discoveryURL", default, skip_serializing_if = "Option::is_none")]
    pub discovery_url: Option<String>,
    /// PEM CA bundle for TLS to the discovery URL; empty means the host's roots.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub certificate_authority: String,
    /// Acceptable audiences, at least one.
    #[serde(default, deserialize_with = "nullable_items")]
    pub audiences: Vec<String>,
    /// `MatchAny` (required with more than one audience) or empty.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub audience_match_policy: String,
    /// `controlplane` or `cluster`: the egress selector for traffic to the issuer.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub egress_selector_type: String,
}

impl Issuer {
    /// The discovery URL, `""` when unset (Kubernetes treats the two alike).
    pub fn discovery_url(&self) -> &str {
        self.discovery_url.as_deref().unwrap_or("")
    }
}

/// `jwt[].claimValidationRules[]`: the claim form (`claim` + `requiredValue`) or the expression
/// form (`expression` + `message`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimValidationRule {
    /// A string claim that must be present.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub claim: String,
    /// The value the claim must have.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub required_value: String,
    /// A CEL expression over `claims` that must be true.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub expression: String,
    /// The error text when the expression is false.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub message: String,
}

/// `jwt[].claimMappings`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimMappings {
    /// The user name (required).
    #[serde(default, deserialize_with = "nullable")]
    pub username: PrefixedClaimOrExpression,
    /// The groups (optional).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "PrefixedClaimOrExpression::is_empty"
    )]
    pub groups: PrefixedClaimOrExpression,
    /// The uid (optional).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "ClaimOrExpression::is_empty"
    )]
    pub uid: ClaimOrExpression,
    /// Extra attributes (optional).
    #[serde(
        default,
        deserialize_with = "nullable_items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub extra: Vec<ExtraMapping>,
}

/// A claim with a prefix, or a CEL expression.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrefixedClaimOrExpression {
    /// The claim to read.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub claim: String,
    /// The prefix: `None` (absent or null) differs from `Some("")` (no prefixing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// A CEL expression over `claims`.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub expression: String,
}

impl PrefixedClaimOrExpression {
    /// Whether nothing is set (the mapping is omitted when rendered).
    pub fn is_empty(&self) -> bool {
        self.claim.is_empty() && self.prefix.is_none() && self.expression.is_empty()
    }
}

/// A claim or a CEL expression (no prefix).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimOrExpression {
    /// The claim to read.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub claim: String,
    /// A CEL expression over `claims`.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub expression: String,
}

impl ClaimOrExpression {
    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        self.claim.is_empty() && self.expression.is_empty()
    }
}

/// `claimMappings.extra[]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtraMapping {
    /// A lowercase domain-prefixed key (`example.org/foo`).
    #[serde(default, deserialize_with = "nullable")]
    pub key: String,
    /// A CEL expression over `claims` giving a string or a list of strings.
    #[serde(default, deserialize_with = "nullable")]
    pub value_expression: String,
}

/// `jwt[].userValidationRules[]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UserValidationRule {
    /// A CEL expression over `user` that must be true.
    #[serde(default, deserialize_with = "nullable")]
    pub expression: String,
    /// The error text when it is false.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub message: String,
}

/// `anonymous`: which requests may be anonymous.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnonymousAuthConfig {
    /// Whether anonymous requests are allowed (always written).
    #[serde(default, deserialize_with = "nullable")]
    pub enabled: bool,
    /// Exact request paths that may be anonymous; empty means every path.
    #[serde(
        default,
        deserialize_with = "nullable_items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<AnonymousAuthCondition>,
}

/// `anonymous.conditions[]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnonymousAuthCondition {
    /// The exact request path.
    #[serde(default, deserialize_with = "nullable")]
    pub path: String,
}

#[cfg(test)]
mod tests;
