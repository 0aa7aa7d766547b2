//! The builder: `TalosCluster.spec.authentication` plus the Ichor issuer's published trust
//! become an `AuthenticationConfiguration` (the seed's `pkg/render/authentication.go`).
//!
//! The builder only assembles; [`super::render`] gates the inputs and validates the result.

use super::{
    cel::{RULE_NO_ICHOR_GROUPS, RULE_NO_ICHOR_USERNAME, RULE_NO_SYSTEM_GROUPS, RULE_NO_SYSTEM_USERNAME},
    model::{
        AUDIENCE_MATCH_ANY, AnonymousAuthCondition, AnonymousAuthConfig, AuthenticationConfiguration,
        ClaimMappings, Issuer, JwtAuthenticator, PrefixedClaimOrExpression, UserValidationRule,
    },
};
use crate::{
    auth::second_factor_policy::SecondFactorPolicy,
    crd::{AuthenticationSpec, ExternalIssuerSpec, IchorIssuerSpec},
};

/// The audience the kube-apiserver accepts in Ichor-issued tokens.
pub use crate::contract::KUBE_AUDIENCE as ICHOR_KUBE_AUDIENCE;
/// The prefix of every Ichor user and group name.
pub use crate::contract::USER_PREFIX as ICHOR_PREFIX;
/// The claim Ichor's issuer names the user with.
pub const ICHOR_USERNAME_CLAIM: &str = "sub";
/// The claim Ichor's issuer lists the groups in.
pub const ICHOR_GROUPS_CLAIM: &str = "groups";
/// Message of [`RULE_NO_SYSTEM_USERNAME`].
pub const MESSAGE_NO_SYSTEM_USERNAME: &str = "username must not use the reserved system: prefix";
/// Message of [`RULE_NO_SYSTEM_GROUPS`].
pub const MESSAGE_NO_SYSTEM_GROUPS: &str = "groups must not use the reserved system: prefix";
/// Message of [`RULE_NO_ICHOR_USERNAME`].
pub const MESSAGE_NO_ICHOR_USERNAME: &str = "username must not use Ichor's reserved ichor: prefix";
/// Message of [`RULE_NO_ICHOR_GROUPS`].
pub const MESSAGE_NO_ICHOR_GROUPS: &str = "groups must not use Ichor's reserved ichor: prefix";
/// The request paths anonymous access stays limited to (Talos's default document).
pub const ANONYMOUS_PATHS: [&str; 3] = ["/livez", "/readyz", "/healthz"];

/// What the controller publishes in the ConfigMap `ichor-oidc-trust`: where the kube-apiserver
/// fetches Ichor's discovery document in-cluster, and the CA that verifies that connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IchorTrust {
    /// The in-cluster discovery URL (`https://<ClusterIP>:8444/.well-known/openid-configuration`).
    pub discovery_url: String,
    /// The Ichor OIDC CA certificate, PEM (public).
    pub ca_pem: String,
}

impl IchorTrust {
    /// Whether both parts are published (an empty one means the controller is not done yet).
    pub fn is_complete(&self) -> bool {
        !self.discovery_url.is_empty() && !self.ca_pem.is_empty()
    }
}

/// Builds the configuration: the Ichor issuer first (when enabled), then the external
/// providers in order, each with the `system:` guard rules (and the external ones with the
/// `ichor:` rules too: whatever their prefixes, only Ichor's issuer names `ichor:` users and
/// groups), and always the default anonymous
/// block (Talos replaces the whole `configuration` on patch, so it must be carried).
///
/// With the Ichor issuer enabled but no `ichor_trust`, its entry has no `discoveryURL` and no
/// `certificateAuthority` ([`super::render`] refuses that case before building).
///
/// Ichor's entry carries the `claimValidationRules` of the installation's `second_factor`
/// policy ([`super::second_factor::claim_rules`]; none while nothing is `required`); an external
/// provider's never does (its tokens name no Ichor role).
pub fn build(
    spec: &AuthenticationSpec,
    ichor_trust: Option<&IchorTrust>,
    second_factor: &SecondFactorPolicy,
) -> AuthenticationConfiguration {
    let mut jwt = Vec::new();
    if let Some(ichor) = spec.ichor.as_ref().filter(|i| i.enabled) {
        jwt.push(ichor_authenticator(ichor, ichor_trust, second_factor));
    }
    jwt.extend(spec.external.iter().map(external_authenticator));
    AuthenticationConfiguration {
        jwt,
        anonymous: Some(default_anonymous()),
        ..Default::default()
    }
}

/// Anonymous access limited to `/livez`, `/readyz` and `/healthz`.
pub fn default_anonymous() -> AnonymousAuthConfig {
    AnonymousAuthConfig {
        enabled: true,
        conditions: ANONYMOUS_PATHS
            .iter()
            .map(|p| AnonymousAuthCondition {
                path: (*p).to_string(),
            })
            .collect(),
    }
}

fn guard_rules() -> Vec<UserValidationRule> {
    vec![
        UserValidationRule {
            expression: RULE_NO_SYSTEM_USERNAME.into(),
            message: MESSAGE_NO_SYSTEM_USERNAME.into(),
        },
        UserValidationRule {
            expression: RULE_NO_SYSTEM_GROUPS.into(),
            message: MESSAGE_NO_SYSTEM_GROUPS.into(),
        },
    ]
}

/// The guard rules of an external provider: `system:` and `ichor:` names are refused. The
/// prefix rules ([`super::prefix`]) already make such a name impossible; these hold where a
/// configuration did not pass through them.
fn external_guard_rules() -> Vec<UserValidationRule> {
    let mut rules = guard_rules();
    rules.push(UserValidationRule {
        expression: RULE_NO_ICHOR_USERNAME.into(),
        message: MESSAGE_NO_ICHOR_USERNAME.into(),
    });
    rules.push(UserValidationRule {
        expression: RULE_NO_ICHOR_GROUPS.into(),
        message: MESSAGE_NO_ICHOR_GROUPS.into(),
    });
    rules
}

fn claim(claim: &str, prefix: &str) -> PrefixedClaimOrExpression {
    PrefixedClaimOrExpression {
        claim: claim.into(),
        prefix: Some(prefix.into()),
        expression: String::new(),
    }
}

fn ichor_authenticator(
    ichor: &IchorIssuerSpec,
    trust: Option<&IchorTrust>,
    second_factor: &SecondFactorPolicy,
) -> JwtAuthenticator {
    let trust = trust.filter(|t| t.is_complete());
    JwtAuthenticator {
        issuer: Issuer {
            url: ichor.url.clone(),
            discovery_url: trust.map(|t| t.discovery_url.clone()),
            certificate_authority: trust.map(|t| t.ca_pem.clone()).unwrap_or_default(),
            audiences: vec![ICHOR_KUBE_AUDIENCE.into()],
            ..Default::default()
        },
        claim_validation_rules: super::second_factor::claim_rules(second_factor),
        claim_mappings: ClaimMappings {
            username: claim(ICHOR_USERNAME_CLAIM, ICHOR_PREFIX),
            groups: claim(ICHOR_GROUPS_CLAIM, ICHOR_PREFIX),
            ..Default::default()
        },
        user_validation_rules: guard_rules(),
    }
}

fn external_authenticator(e: &ExternalIssuerSpec) -> JwtAuthenticator {
    JwtAuthenticator {
        issuer: Issuer {
            url: e.issuer_url.clone(),
            discovery_url: None,
            certificate_authority: e.certificate_authority.clone().unwrap_or_default(),
            audiences: e.audiences.clone(),
            audience_match_policy: if e.audiences.len() > 1 {
                AUDIENCE_MATCH_ANY.into()
            } else {
                String::new()
            },
            egress_selector_type: String::new(),
        },
        claim_validation_rules: Vec::new(),
        claim_mappings: ClaimMappings {
            username: claim(e.username_claim(), e.username_prefix()),
            groups: claim(e.groups_claim(), e.groups_prefix()),
            ..Default::default()
        },
        user_validation_rules: external_guard_rules(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn external(url: &str, audiences: &[&str]) -> ExternalIssuerSpec {
        ExternalIssuerSpec {
            issuer_url: url.into(),
            audiences: audiences.iter().map(|a| (*a).to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn puts_the_ichor_issuer_first_with_its_trust() {
        let spec = AuthenticationSpec {
            ichor: Some(IchorIssuerSpec {
                enabled: true,
                url: "https://ichor.example.com".into(),
            }),
            external: vec![external("https://idp.example.org", &["kubernetes"])],
        };
        let trust = IchorTrust {
            discovery_url: "https://10.96.0.42:8444/d".into(),
            ca_pem: "PEM".into(),
        };
        let c = build(&spec, Some(&trust), &SecondFactorPolicy::default());
        assert_eq!(c.jwt.len(), 2);
        let i = &c.jwt[0].issuer;
        assert_eq!(i.url, "https://ichor.example.com");
        assert_eq!(i.discovery_url.as_deref(), Some("https://10.96.0.42:8444/d"));
        assert_eq!(
            (i.certificate_authority.as_str(), i.audiences.as_slice()),
            ("PEM", &["ichor-kube".to_string()][..])
        );
        assert_eq!(c.jwt[0].claim_mappings.username.prefix.as_deref(), Some("ichor:"));
        assert_eq!(c.jwt[1].issuer.url, "https://idp.example.org");
    }

    #[test]
    fn sets_match_any_whenever_an_issuer_has_more_than_one_audience() {
        let spec = AuthenticationSpec {
            ichor: None,
            external: vec![external("https://a", &["x"]), external("https://b", &["x", "y"])],
        };
        let c = build(&spec, None, &SecondFactorPolicy::default());
        assert_eq!(c.jwt[0].issuer.audience_match_policy, "");
        assert_eq!(c.jwt[1].issuer.audience_match_policy, "MatchAny");
    }

    #[test]
    fn applies_the_external_defaults_and_guards_every_entry() {
        let c = build(
            &AuthenticationSpec {
                ichor: None,
                external: vec![external("https://a", &["x"])],
            },
            None,
            &SecondFactorPolicy::default(),
        );
        let m = &c.jwt[0].claim_mappings;
        assert_eq!(
            (m.username.claim.as_str(), m.username.prefix.as_deref()),
            ("email", Some("oidc:"))
        );
        assert_eq!(
            (m.groups.claim.as_str(), m.groups.prefix.as_deref()),
            ("groups", Some("oidc:"))
        );
        let rules: Vec<_> = c.jwt[0]
            .user_validation_rules
            .iter()
            .map(|r| r.expression.as_str())
            .collect();
        assert_eq!(
            rules,
            [
                RULE_NO_SYSTEM_USERNAME,
                RULE_NO_SYSTEM_GROUPS,
                RULE_NO_ICHOR_USERNAME,
                RULE_NO_ICHOR_GROUPS
            ]
        );
    }

    #[test]
    fn always_carries_the_default_anonymous_block_and_skips_a_disabled_ichor() {
        let spec = AuthenticationSpec {
            ichor: Some(IchorIssuerSpec {
                enabled: false,
                url: "https://i".into(),
            }),
            external: vec![],
        };
        let c = build(&spec, None, &SecondFactorPolicy::default());
        assert!(c.jwt.is_empty());
        let paths: Vec<_> = c
            .anonymous
            .as_ref()
            .map(|a| a.conditions.iter().map(|c| c.path.clone()).collect())
            .unwrap_or_default();
        assert_eq!(paths, ["/livez", "/readyz", "/healthz"]);
        assert!(c.anonymous.is_some_and(|a| a.enabled));
    }
}
