//! The prefix rules for external providers, shared by the renderer, the admission webhook and
//! the issuer's flags. An external user name or group prefix may not be empty (an unprefixed
//! external user could take any name, `ichor:admin` included), and a name made of it may not be
//! able to land in a reserved namespace: `ichor:` (Ichor's own users and groups) or `system:`
//! (Kubernetes'). So the prefix may neither start with a reserved namespace (`ichor:corp:`) nor
//! be the beginning of one (`ichor`, `ich`, `sys`: the provider's group `:admin` would become
//! `ichor:admin`).

use super::build::ICHOR_PREFIX;
use crate::crd::AuthenticationSpec;

/// The prefix the kube-apiserver reserves for its own identities.
pub const SYSTEM_PREFIX: &str = "system:";

/// An external provider prefix that would let its users pass for someone else.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {value:?} is not allowed: {reason}")]
pub struct PrefixError {
    /// The field (`spec.authentication.external[0].usernamePrefix`).
    pub path: String,
    /// The refused value.
    pub value: String,
    /// Why, as advice.
    pub reason: &'static str,
}

/// Why a prefix is refused, or `None` when it is acceptable: no name made of it can start with
/// `ichor:` or `system:`.
pub fn refusal(prefix: &str) -> Option<&'static str> {
    if prefix.is_empty() {
        Some("an external provider needs a non-empty prefix (the default is \"oidc:\")")
    } else if prefix.starts_with(ICHOR_PREFIX) {
        Some(
            "the prefix \"ichor:\" belongs to Ichor's own users and groups; choose another, such as \"oidc:\"",
        )
    } else if ICHOR_PREFIX.starts_with(prefix) {
        Some(
            "the provider's names could complete it to one of Ichor's own users or groups (\"ichor:admin\"); choose another, such as \"oidc:\"",
        )
    } else if prefix.starts_with(SYSTEM_PREFIX) {
        Some("names under \"system:\" belong to Kubernetes itself; choose another, such as \"oidc:\"")
    } else if SYSTEM_PREFIX.starts_with(prefix) {
        Some(
            "the provider's names could complete it to a Kubernetes system name (\"system:masters\"); choose another, such as \"oidc:\"",
        )
    } else {
        None
    }
}

/// Checks every explicitly set external prefix (the defaults are always acceptable).
pub fn check(spec: &AuthenticationSpec) -> Vec<PrefixError> {
    let mut errs = Vec::new();
    for (i, e) in spec.external.iter().enumerate() {
        for (field, value) in [
            ("usernamePrefix", &e.username_prefix),
            ("groupsPrefix", &e.groups_prefix),
        ] {
            if let Some(value) = value
                && let Some(reason) = refusal(value)
            {
                errs.push(PrefixError {
                    path: format!("spec.authentication.external[{i}].{field}"),
                    value: value.clone(),
                    reason,
                });
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::ExternalIssuerSpec;

    fn spec(user: Option<&str>, groups: Option<&str>) -> AuthenticationSpec {
        AuthenticationSpec {
            ichor: None,
            external: vec![ExternalIssuerSpec {
                username_prefix: user.map(Into::into),
                groups_prefix: groups.map(Into::into),
                ..Default::default()
            }],
        }
    }

    #[test]
    fn accepts_defaults_and_other_prefixes() {
        assert!(check(&spec(None, None)).is_empty());
        assert!(check(&spec(Some("corp:"), Some("ichorx"))).is_empty());
        for fine in [
            "oidc:", "corp#", "x", "ichor-", "ichor_", "icorp:", "systems:", "syst3m:",
        ] {
            assert_eq!(refusal(fine), None, "{fine:?}");
        }
    }

    #[test]
    fn refuses_an_empty_prefix_and_names_the_field() {
        let errs = check(&spec(Some(""), None));
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].path, "spec.authentication.external[0].usernamePrefix");
        assert_eq!(
            errs[0].to_string(),
            "spec.authentication.external[0].usernamePrefix: \"\" is not allowed: an external provider needs a non-empty prefix (the default is \"oidc:\")"
        );
    }

    #[test]
    fn refuses_ichor_and_anything_under_it() {
        let errs = check(&spec(Some("ichor:"), Some("ichor:admins-")));
        let paths: Vec<_> = errs.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.authentication.external[0].usernamePrefix",
                "spec.authentication.external[0].groupsPrefix"
            ]
        );
    }

    #[test]
    fn refuses_every_prefix_a_name_could_complete_to_ichor_or_system() {
        for prefix in [
            "i", "ic", "ich", "icho", "ichor", "ichor:", "ichor:x", "s", "sy", "sys", "syste", "system",
        ] {
            assert!(refusal(prefix).is_some(), "{prefix:?} accepted");
        }
        let errs = check(&spec(Some("ichor"), Some("sys")));
        assert_eq!(
            errs.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "spec.authentication.external[0].usernamePrefix: \"ichor\" is not allowed: the provider's names could complete it to one of Ichor's own users or groups (\"ichor:admin\"); choose another, such as \"oidc:\"",
                "spec.authentication.external[0].groupsPrefix: \"sys\" is not allowed: the provider's names could complete it to a Kubernetes system name (\"system:masters\"); choose another, such as \"oidc:\"",
            ]
        );
        assert!(refusal("system:").is_some_and(|r| r.contains("Kubernetes itself")));
    }
}
