//! The part of `IchorInstallation` identity reads: `spec.users`, the runtime settings of the
//! issuer (token TTL, refresh lifetime, kubeconfig server).

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::GoDuration;

/// The Ichor installation (identity's view: `spec.users`).
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "ichor.maesh.dev",
    version = "v1alpha1",
    kind = "IchorInstallation",
    plural = "ichorinstallations",
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
        Ok(Self {
            token_ttl,
            refresh_lifetime,
            kube_api_server_url,
            kube_api_tls_server_name: spec.kube_api_tls_server_name.filter(|s| !s.is_empty()),
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
