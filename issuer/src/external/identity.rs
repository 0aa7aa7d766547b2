//! The Kubernetes identity of a verified external ID token, as the kube-apiserver's
//! `jwt[].claimMappings` of the same provider make it: the username claim and the groups claim,
//! each with its prefix; an `email` claim counts only when `email_verified` is absent or the boolean `true`; a
//! mapped name or group under `system:` or `ichor:` is refused (the apiserver's
//! `userValidationRules` refuse them too, and the prefix rules make them impossible). Pure: the
//! claims are the verified token's payload.

use serde_json::Value;

use ichor_renderers::authn::build::ICHOR_PREFIX;

use super::provider::{ExternalProvider, SYSTEM_PREFIX};

/// The most groups read from one token.
pub const MAX_GROUPS: usize = 256;
/// The longest user name or group read from a token.
pub const MAX_CLAIM_LEN: usize = 512;

/// A person signed in at the external provider, as Kubernetes and Ichor's API name them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalIdentity {
    /// `<username prefix><username claim>`, e.g. `oidc:alice@example.org`.
    pub username: String,
    /// Every `<groups prefix><group>` of the token (what `kubectl` is).
    pub groups: Vec<String>,
    /// The groups of [`Self::groups`] the API keeps: those the issuer may impersonate.
    pub api_groups: Vec<String>,
    /// The `name` claim, if any (display only).
    pub display_name: Option<String>,
    /// The `email` claim, if any (display only).
    pub email: Option<String>,
}

/// Why a verified token gives no identity. The text is shown to the caller.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// The username claim is missing or not a non-empty string.
    #[error("the token has no usable {0:?} claim to name you by; ask your identity provider's administrator")]
    NoUsername(String),
    /// `email` is the username claim and the provider says it is not verified.
    #[error("your e-mail address is not verified at your identity provider; verify it and sign in again")]
    EmailNotVerified,
    /// The groups claim is not a string or a list of strings.
    #[error("the token's {0:?} claim is not a list of group names")]
    BadGroups(String),
    /// A mapped name or group would be a Kubernetes system identity.
    #[error("the token maps to a reserved Kubernetes name (system:); it is refused")]
    System,
    /// A mapped name or group would be one of Ichor's own users or groups.
    #[error("the token maps to a name reserved for Ichor's own users (ichor:); it is refused")]
    Ichor,
}

fn bounded(s: &str) -> Option<&str> {
    (!s.is_empty() && s.len() <= MAX_CLAIM_LEN).then_some(s)
}

/// The identity the verified `claims` give under `provider`.
///
/// # Errors
/// [`IdentityError`] for a token that names nobody usable.
pub fn identity(provider: &ExternalProvider, claims: &Value) -> Result<ExternalIdentity, IdentityError> {
    let user_claim = &provider.username_claim;
    let name = claims
        .get(user_claim)
        .and_then(Value::as_str)
        .and_then(bounded)
        .ok_or_else(|| IdentityError::NoUsername(user_claim.clone()))?;
    // As the kube-apiserver: a present `email_verified` must be the boolean `true`; `false`, a
    // string such as "true", a number or null is refused.
    if user_claim == "email"
        && claims
            .get("email_verified")
            .is_some_and(|v| v != &Value::Bool(true))
    {
        return Err(IdentityError::EmailNotVerified);
    }
    let bad_groups = || IdentityError::BadGroups(provider.groups_claim.clone());
    let raw: Vec<&str> = match claims.get(&provider.groups_claim) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(g)) => vec![g.as_str()],
        Some(Value::Array(items)) if items.len() <= MAX_GROUPS => items
            .iter()
            .map(|v| v.as_str().and_then(bounded).ok_or_else(bad_groups))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(bad_groups()),
    };
    let username = format!("{}{name}", provider.username_prefix);
    let groups: Vec<String> = raw
        .iter()
        .map(|g| format!("{}{g}", provider.groups_prefix))
        .collect();
    let reserved = |ns: &str| username.starts_with(ns) || groups.iter().any(|g| g.starts_with(ns));
    if reserved(SYSTEM_PREFIX) {
        return Err(IdentityError::System);
    }
    if reserved(ICHOR_PREFIX) {
        return Err(IdentityError::Ichor);
    }
    let api_groups = raw
        .iter()
        .filter(|g| provider.impersonable_groups.iter().any(|allowed| allowed == *g))
        .map(|g| format!("{}{g}", provider.groups_prefix))
        .collect();
    let text = |key: &str| {
        claims
            .get(key)
            .and_then(Value::as_str)
            .and_then(bounded)
            .map(str::to_owned)
    };
    Ok(ExternalIdentity {
        username,
        groups,
        api_groups,
        display_name: text("name"),
        email: text("email"),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn provider() -> ExternalProvider {
        ExternalProvider {
            client_id: "ichor".into(),
            impersonable_groups: vec!["ops".into()],
            ..ExternalProvider::example()
        }
    }

    #[test]
    fn the_username_and_groups_are_prefixed_and_only_impersonable_groups_reach_the_api() {
        let id = identity(
            &provider(),
            &json!({"email": "alice@example.org", "email_verified": true, "groups": ["dev", "ops"], "name": "Alice"}),
        )
        .unwrap();
        assert_eq!(id.username, "oidc:alice@example.org");
        assert_eq!(id.groups, ["oidc:dev", "oidc:ops"]);
        assert_eq!(id.api_groups, ["oidc:ops"]);
        assert_eq!(id.display_name.as_deref(), Some("Alice"));
        // One group as a string, and no groups at all.
        let id = identity(&provider(), &json!({"email": "b@x", "groups": "ops"})).unwrap();
        assert_eq!(id.groups, ["oidc:ops"]);
        assert!(
            identity(&provider(), &json!({"email": "b@x"}))
                .unwrap()
                .groups
                .is_empty()
        );
    }

    #[test]
    fn tokens_naming_nobody_usable_are_refused() {
        let p = provider();
        assert_eq!(
            identity(&p, &json!({"sub": "x"})),
            Err(IdentityError::NoUsername("email".into()))
        );
        assert_eq!(
            identity(&p, &json!({"email": ""})),
            Err(IdentityError::NoUsername("email".into()))
        );
        assert_eq!(
            identity(&p, &json!({"email": "a@x", "email_verified": false})),
            Err(IdentityError::EmailNotVerified)
        );
        for not_true in [
            json!("true"),
            json!("false"),
            json!(1),
            json!(null),
            json!([true]),
        ] {
            assert_eq!(
                identity(&p, &json!({"email": "a@x", "email_verified": not_true})),
                Err(IdentityError::EmailNotVerified),
                "email_verified {not_true} is not the boolean true, as the kube-apiserver reads it"
            );
        }
        assert_eq!(
            identity(&p, &json!({"email": "a@x", "groups": [1]})),
            Err(IdentityError::BadGroups("groups".into()))
        );
        let careless = ExternalProvider {
            username_prefix: "system".into(),
            groups_prefix: "system".into(),
            ..p
        };
        assert_eq!(
            identity(&careless, &json!({"email": ":admin"})),
            Err(IdentityError::System)
        );
        assert_eq!(
            identity(&careless, &json!({"email": "a@x", "groups": [":masters"]})),
            Err(IdentityError::System)
        );
    }

    #[test]
    fn a_name_or_group_that_maps_into_ichor_is_refused() {
        // Prefixes the flags refuse; the mapping refuses their `ichor:` names on its own.
        let careless = ExternalProvider {
            username_prefix: "ichor".into(),
            groups_prefix: "ich".into(),
            ..provider()
        };
        assert_eq!(
            identity(&careless, &json!({"email": ":alice"})),
            Err(IdentityError::Ichor)
        );
        assert_eq!(
            identity(&careless, &json!({"email": "x@y", "groups": ["or:admin"]})),
            Err(IdentityError::Ichor)
        );
        let fine = identity(&careless, &json!({"email": "-bob", "groups": ["ops"]})).unwrap();
        assert_eq!(
            (fine.username.as_str(), fine.groups.as_slice()),
            ("ichor-bob", &["ichops".to_owned()][..])
        );
    }
}
