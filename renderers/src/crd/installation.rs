//! The part of `IchorInstallation` identity reads: `spec.users`, the runtime settings of the
//! issuer (token TTL, refresh lifetime, kubeconfig server) and the credentials layout asked
//! for; and the part it writes: `status.credentials`, where the credentials are and how far a
//! move between layouts has come (docs/credentials-sharding.md, "Migration").

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::GoDuration;
use crate::auth::second_factor_policy::{SecondFactorLevel, SecondFactorPolicy, SecondFactorPolicyError};

/// The Ichor installation (identity's view: `spec.users`).
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "ichor.maesh.dev",
    version = "v1alpha1",
    kind = "IchorInstallation",
    plural = "ichorinstallations",
    status = "IchorInstallationStatus",
    derive = "PartialEq",
    doc = "The Ichor installation (identity's view: spec.users, the issuer's runtime settings)."
)]
#[serde(rename_all = "camelCase")]
pub struct IchorInstallationSpec {
    /// Built-in users and the issuer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<UsersSpec>,
}

/// `spec.users`: read by the issuer for every token it issues; its flags are the fallback.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UsersSpec {
    /// ID-token lifetime, 1 to 15 minutes (default `5m`).
    #[serde(default, rename = "tokenTTL", skip_serializing_if = "Option::is_none")]
    pub token_ttl: Option<GoDuration>,
    /// Absolute refresh-token lifetime from sign-in, 1 hour to 30 days (default `12h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_lifetime: Option<GoDuration>,
    /// The server URL written into kubeconfigs (default: the cluster endpoint).
    #[serde(default, rename = "kubeAPIServerURL", skip_serializing_if = "Option::is_none")]
    pub kube_api_server_url: Option<String>,
    /// `tls-server-name` written into kubeconfigs when the server host is not in the
    /// apiserver certificate.
    #[serde(
        default,
        rename = "kubeAPITLSServerName",
        skip_serializing_if = "Option::is_none"
    )]
    pub kube_api_tls_server_name: Option<String>,
    /// Where users' credentials are to be kept: `perUser` (the default: one Secret per user in
    /// the credentials namespace) or `legacy` (the one Secret `ichor-user-credentials`; asking
    /// for it after the move moves every entry back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_layout: Option<CredentialsLayout>,
    /// Who must have a second factor: a level (`off`, `optional`, `required`) by default and per
    /// role; a user's level is the strictest of the default and their roles'. Absent: `off` for
    /// everyone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub second_factor: Option<SecondFactorSpec>,
}

/// `spec.users.secondFactor`: the second-factor policy as written.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SecondFactorSpec {
    /// The level of every user whose roles ask for nothing stricter: `off` (enrolment not
    /// offered), `optional` (offered) or `required` (no Kubernetes token until the user has a
    /// factor). Default `off`. Quote `"off"` in YAML.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<SecondFactorLevel>,
    /// A level per role name (at most 16 roles, each `^[a-z][a-z0-9-]{0,30}$`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 16))]
    #[x_kube(
        validation = Rule::new("self.all(r, size(r) <= 31 && r.matches('^[a-z][a-z0-9-]{0,30}$'))")
            .message("each role must match ^[a-z][a-z0-9-]{0,30}$"),
    )]
    pub roles: BTreeMap<String, SecondFactorLevel>,
}

impl SecondFactorSpec {
    /// The policy this spec asks for, checked.
    ///
    /// # Errors
    /// [`SecondFactorPolicyError`], naming the field.
    pub fn policy(&self) -> Result<SecondFactorPolicy, SecondFactorPolicyError> {
        SecondFactorPolicy::new(self.default.unwrap_or_default(), self.roles.clone())
    }
}

/// A credentials layout an installation asks for (`spec.users.credentialsLayout`; `perUser` when
/// unset).
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum CredentialsLayout {
    /// Every entry in the one Secret `ichor-user-credentials`.
    Legacy,
    /// One Secret per user in the credentials namespace.
    #[default]
    PerUser,
}

impl UsersSpec {
    /// The credentials layout asked for, `perUser` when unset.
    pub fn credentials_layout(&self) -> CredentialsLayout {
        self.credentials_layout.unwrap_or_default()
    }
}

/// What identity reports on the installation.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IchorInstallationStatus {
    /// `CredentialsNamespaceDedicated`: whether the credentials namespace holds nothing but
    /// users' credentials Secrets (the move to one Secret per user waits while it is false).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    /// Where users' credentials are and how far a move between layouts has come.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<CredentialsStatus>,
}

/// `status.credentials`: the controller's account of the credentials layout.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CredentialsStatus {
    /// Where the credentials are now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<CredentialsPhase>,
    /// Entries moved to the layout asked for so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved: Option<u64>,
    /// Entries still to move.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining: Option<u64>,
}

/// Where the credentials are (`status.credentials.layout`).
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum CredentialsPhase {
    /// In the one Secret `ichor-user-credentials`.
    Legacy,
    /// Moving to one Secret per user: the legacy Secret's keys are only removed.
    Migrating,
    /// Moving back into the one Secret: no per-user Secret is made.
    Returning,
    /// One Secret per user; the legacy Secret is gone.
    PerUser,
}

/// The issuer settings after defaulting and range checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsersSettings {
    /// ID-token lifetime.
    pub token_ttl: GoDuration,
    /// Absolute refresh-token lifetime.
    pub refresh_lifetime: GoDuration,
    /// Kubeconfig server override.
    pub kube_api_server_url: Option<String>,
    /// Kubeconfig `tls-server-name`.
    pub kube_api_tls_server_name: Option<String>,
    /// The second-factor policy (`off` for everyone when unset).
    pub second_factor: SecondFactorPolicy,
}

/// Why `spec.users` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UsersSettingsError {
    /// The token TTL is out of range.
    #[error("spec.users.tokenTTL: {0} is out of range: use 1m to 15m")]
    TokenTtl(GoDuration),
    /// The refresh lifetime is out of range.
    #[error("spec.users.refreshLifetime: {0} is out of range: use 1h to 720h (30 days)")]
    RefreshLifetime(GoDuration),
    /// The kube API server URL is not an https URL.
    #[error("spec.users.kubeAPIServerURL: {0:?} must be an https URL")]
    KubeApiServerUrl(String),
    /// The second-factor policy is not usable.
    #[error(transparent)]
    SecondFactor(#[from] SecondFactorPolicyError),
}

impl UsersSettings {
    /// Default ID-token lifetime: 5 minutes.
    pub const DEFAULT_TOKEN_TTL: GoDuration = GoDuration::from_secs(5 * 60);
    /// Default refresh lifetime: 12 hours.
    pub const DEFAULT_REFRESH_LIFETIME: GoDuration = GoDuration::from_secs(12 * 3600);
    /// The longest ID-token lifetime any setting can give (the key timeline relies on it).
    pub const MAX_TOKEN_TTL: GoDuration = GoDuration::from_secs(15 * 60);
    /// The longest refresh lifetime any setting can give (the key timeline relies on it).
    pub const MAX_REFRESH_LIFETIME: GoDuration = GoDuration::from_secs(30 * 24 * 3600);

    /// Default and check `spec.users` (absent: every default).
    ///
    /// # Errors
    /// A value out of its range, naming the field.
    pub fn resolve(spec: Option<&UsersSpec>) -> Result<Self, UsersSettingsError> {
        let spec = spec.cloned().unwrap_or_default();
        let token_ttl = spec.token_ttl.unwrap_or(Self::DEFAULT_TOKEN_TTL);
        if !(60..=Self::MAX_TOKEN_TTL.as_secs()).contains(&token_ttl.as_secs()) {
            return Err(UsersSettingsError::TokenTtl(token_ttl));
        }
        let refresh_lifetime = spec.refresh_lifetime.unwrap_or(Self::DEFAULT_REFRESH_LIFETIME);
        if !(3600..=Self::MAX_REFRESH_LIFETIME.as_secs()).contains(&refresh_lifetime.as_secs()) {
            return Err(UsersSettingsError::RefreshLifetime(refresh_lifetime));
        }
        let kube_api_server_url = spec.kube_api_server_url.filter(|u| !u.is_empty());
        if let Some(u) = &kube_api_server_url {
            match url::Url::parse(u) {
                Ok(p) if p.scheme() == "https" && p.host().is_some() => {}
                _ => {
                    return Err(UsersSettingsError::KubeApiServerUrl(
                        u.chars().take(256).collect(),
                    ));
                }
            }
        }
        let second_factor = spec
            .second_factor
            .as_ref()
            .map(SecondFactorSpec::policy)
            .transpose()?
            .unwrap_or_default();
        Ok(Self {
            token_ttl,
            refresh_lifetime,
            kube_api_server_url,
            kube_api_tls_server_name: spec.kube_api_tls_server_name.filter(|s| !s.is_empty()),
            second_factor,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(ttl: &str, life: &str) -> UsersSpec {
        UsersSpec {
            token_ttl: Some(ttl.parse().unwrap()),
            refresh_lifetime: Some(life.parse().unwrap()),
            ..Default::default()
        }
    }

    #[test]
    fn the_credentials_layout_defaults_to_per_user_and_reads_its_names() {
        use serde_json::json;
        assert_eq!(
            UsersSpec::default().credentials_layout(),
            CredentialsLayout::PerUser
        );
        let spec: UsersSpec = serde_json::from_value(json!({"credentialsLayout": "legacy"})).unwrap();
        assert_eq!(spec.credentials_layout(), CredentialsLayout::Legacy);
        let spec: UsersSpec = serde_json::from_value(json!({"credentialsLayout": "perUser"})).unwrap();
        assert_eq!(spec.credentials_layout(), CredentialsLayout::PerUser);
        assert!(serde_json::from_value::<UsersSpec>(json!({"credentialsLayout": "shards"})).is_err());
        // Unset, it is not written: settings objects of earlier journals serialize as before.
        assert_eq!(serde_json::to_value(UsersSpec::default()).unwrap(), json!({}));
        let status = CredentialsStatus {
            layout: Some(CredentialsPhase::Migrating),
            moved: Some(10),
            remaining: Some(990),
        };
        assert_eq!(
            serde_json::to_value(status).unwrap(),
            json!({"layout": "migrating", "moved": 10, "remaining": 990})
        );
        let done = CredentialsPhase::PerUser;
        assert_eq!(serde_json::to_value(done).unwrap(), json!("perUser"));
    }

    #[test]
    fn absent_settings_take_the_defaults() {
        let s = UsersSettings::resolve(None).unwrap();
        assert_eq!(s.token_ttl.as_secs(), 300);
        assert_eq!(s.refresh_lifetime.as_secs(), 43_200);
    }

    #[test]
    fn accepts_the_bounds_of_each_range() {
        assert!(UsersSettings::resolve(Some(&spec("1m", "1h"))).is_ok());
        assert!(UsersSettings::resolve(Some(&spec("15m", "720h"))).is_ok());
    }

    #[test]
    fn refuses_a_token_ttl_outside_one_to_fifteen_minutes() {
        let e = UsersSettings::resolve(Some(&spec("16m", "12h"))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "spec.users.tokenTTL: 16m is out of range: use 1m to 15m"
        );
        assert!(UsersSettings::resolve(Some(&spec("59s", "12h"))).is_err());
    }

    #[test]
    fn refuses_a_refresh_lifetime_outside_one_hour_to_thirty_days() {
        assert!(UsersSettings::resolve(Some(&spec("5m", "59m"))).is_err());
        let e = UsersSettings::resolve(Some(&spec("5m", "721h"))).unwrap_err();
        assert!(e.to_string().starts_with("spec.users.refreshLifetime: 721h"));
    }

    #[test]
    fn the_second_factor_policy_reads_its_levels_and_is_off_when_absent() {
        use serde_json::json;
        assert_eq!(
            UsersSettings::resolve(None).unwrap().second_factor,
            SecondFactorPolicy::default()
        );
        let spec: UsersSpec = serde_json::from_value(json!({"secondFactor": {
            "default": "optional", "roles": {"admin": "required", "viewer": "off"}}}))
        .unwrap();
        let policy = UsersSettings::resolve(Some(&spec)).unwrap().second_factor;
        assert_eq!(policy.default_level(), SecondFactorLevel::Optional);
        assert_eq!(policy.level_for(&["admin"]), SecondFactorLevel::Required);
        assert_eq!(policy.level_for(&["viewer"]), SecondFactorLevel::Optional);
        // Only what is written is written back.
        assert_eq!(
            serde_json::to_value(&spec).unwrap(),
            json!({"secondFactor": {"default": "optional", "roles": {"admin": "required", "viewer": "off"}}})
        );
        let empty: UsersSpec = serde_json::from_value(json!({"secondFactor": {}})).unwrap();
        assert_eq!(
            UsersSettings::resolve(Some(&empty)).unwrap().second_factor,
            SecondFactorPolicy::default()
        );
        assert!(serde_json::from_value::<UsersSpec>(json!({"secondFactor": {"default": "always"}})).is_err());
        assert!(serde_json::from_value::<UsersSpec>(json!({"secondFactor": {"default": false}})).is_err());
    }

    #[test]
    fn refuses_a_second_factor_policy_naming_a_role_badly_or_too_many_roles() {
        let bad: UsersSpec =
            serde_json::from_value(serde_json::json!({"secondFactor": {"roles": {"Admin": "required"}}}))
                .unwrap();
        let e = UsersSettings::resolve(Some(&bad)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("spec.users.secondFactor.roles: \"Admin\" is not a valid role name"),
            "{e}"
        );
        let roles: BTreeMap<String, SecondFactorLevel> = (0..17)
            .map(|i| (format!("r{i}"), SecondFactorLevel::Required))
            .collect();
        let many = UsersSpec {
            second_factor: Some(SecondFactorSpec { default: None, roles }),
            ..Default::default()
        };
        assert_eq!(
            UsersSettings::resolve(Some(&many)).unwrap_err().to_string(),
            "spec.users.secondFactor.roles: 17 roles, at most 16 are allowed"
        );
    }

    #[test]
    fn refuses_a_plain_http_kubeconfig_server() {
        let s = UsersSpec {
            kube_api_server_url: Some("http://k8s.example.com".into()),
            ..Default::default()
        };
        assert!(matches!(
            UsersSettings::resolve(Some(&s)),
            Err(UsersSettingsError::KubeApiServerUrl(_))
        ));
    }
}
