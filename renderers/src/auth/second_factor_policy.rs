//! The second-factor policy of an installation (`IchorInstallation.spec.users.secondFactor`):
//! `off`, `optional` or `required`, by default and per role. A user's level is the strictest of
//! the default and their roles' levels; a user whose level is `required` and who has no factor
//! gets no `ichor-kube` token (nor a refresh of one) until they enrol, like a user who must change
//! their password, but may still get an `ichor-ui` token so the account page can enrol them.
//!
//! A session that did not prove a factor (a refresh family started by a password alone, before
//! the user enrolled) gets no `ichor-kube` token of a `required` user either
//! ([`session_decision`]): else the enrolment of the user would bring back to life every
//! password-only session refused meanwhile, someone else's with a stolen password included.
//!
//! Pure: the issuer reads the policy from its settings and the factors from the credentials
//! entry, and asks [`token_decision`] on the password step and the code grant, and
//! [`session_decision`] on the refresh grant.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::roles::{MAX_ROLES, is_valid_role_name};
use crate::contract::KUBE_AUDIENCE;

/// A second-factor level, weakest first: `off` (enrolment not offered), `optional` (offered),
/// `required` (no Kubernetes token until the user has a factor).
#[derive(
    schemars::JsonSchema,
    Serialize,
    Deserialize,
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
)]
#[serde(rename_all = "camelCase")]
pub enum SecondFactorLevel {
    /// Enrolment is not offered; a factor enrolled earlier is still asked for at sign-in.
    #[default]
    Off,
    /// Enrolment is offered; nothing is refused without a factor.
    Optional,
    /// No `ichor-kube` token until the user has a factor.
    Required,
}

impl SecondFactorLevel {
    /// The level as written in the installation: `off`, `optional`, `required`.
    pub fn name(self) -> &'static str {
        match self {
            SecondFactorLevel::Off => "off",
            SecondFactorLevel::Optional => "optional",
            SecondFactorLevel::Required => "required",
        }
    }
}

/// A `spec.users.secondFactor` that cannot be used. Each message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecondFactorPolicyError {
    /// More roles than a user may hold.
    #[error("spec.users.secondFactor.roles: {count} roles, at most {MAX_ROLES} are allowed")]
    TooManyRoles {
        /// How many were given.
        count: usize,
    },
    /// A key that is not a role name.
    #[error(
        "spec.users.secondFactor.roles: \"{name}\" is not a valid role name: it must match \
         ^[a-z][a-z0-9-]{{0,30}}$ (a lower-case letter, then up to 30 lower-case letters, digits \
         or '-')"
    )]
    InvalidRole {
        /// The refused key (cut to 40 characters).
        name: String,
    },
}

/// The policy in force: a level by default and per role. The default value asks nothing of
/// anyone (`off` everywhere), which is the policy of an installation that sets none.
///
/// It serializes (`{"default": …, "roles": {…}}`) as the output of the controller's
/// `second-factor` node; it is read back only through [`SecondFactorPolicy::new`], so a policy
/// read from anywhere holds only valid role names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", try_from = "PolicyFields")]
pub struct SecondFactorPolicy {
    default: SecondFactorLevel,
    roles: BTreeMap<String, SecondFactorLevel>,
}

/// The fields of a serialized [`SecondFactorPolicy`], before their check.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PolicyFields {
    #[serde(default)]
    default: SecondFactorLevel,
    #[serde(default)]
    roles: BTreeMap<String, SecondFactorLevel>,
}

impl TryFrom<PolicyFields> for SecondFactorPolicy {
    type Error = SecondFactorPolicyError;

    fn try_from(f: PolicyFields) -> Result<Self, Self::Error> {
        SecondFactorPolicy::new(f.default, f.roles)
    }
}

impl SecondFactorPolicy {
    /// The policy of `default` and `roles` (role name → level), checked: at most
    /// [`MAX_ROLES`] roles, each a valid role name.
    ///
    /// # Errors
    /// [`SecondFactorPolicyError`], naming the field.
    pub fn new(
        default: SecondFactorLevel,
        roles: BTreeMap<String, SecondFactorLevel>,
    ) -> Result<Self, SecondFactorPolicyError> {
        if roles.len() > MAX_ROLES {
            return Err(SecondFactorPolicyError::TooManyRoles { count: roles.len() });
        }
        if let Some(bad) = roles.keys().find(|r| !is_valid_role_name(r)) {
            return Err(SecondFactorPolicyError::InvalidRole {
                name: bad.chars().take(40).collect(),
            });
        }
        Ok(SecondFactorPolicy { default, roles })
    }

    /// The policy that requires a second factor of everyone.
    pub fn required_of_everyone() -> Self {
        SecondFactorPolicy {
            default: SecondFactorLevel::Required,
            roles: BTreeMap::new(),
        }
    }

    /// The default level.
    pub fn default_level(&self) -> SecondFactorLevel {
        self.default
    }

    /// The levels set per role.
    pub fn roles(&self) -> &BTreeMap<String, SecondFactorLevel> {
        &self.roles
    }

    /// The level of a user holding `roles`: the strictest of the default and each role's level
    /// (a role the policy does not name adds nothing).
    pub fn level_for<S: AsRef<str>>(&self, roles: &[S]) -> SecondFactorLevel {
        roles
            .iter()
            .filter_map(|r| self.roles.get(r.as_ref()).copied())
            .fold(self.default, Ord::max)
    }

    /// Whether a user holding `roles`, with a factor or not (`has_factor`:
    /// `CredentialsEntry::needs_second_factor`), must enrol one before getting an `ichor-kube`
    /// token: what the account page tells them.
    pub fn must_enrol<S: AsRef<str>>(&self, roles: &[S], has_factor: bool) -> bool {
        !has_factor && self.level_for(roles) == SecondFactorLevel::Required
    }
}

/// Whether a sign-in or a refresh may get a token for an audience.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenDecision {
    /// The token may be issued.
    Allowed,
    /// The policy requires a second factor the user has not enrolled: no `ichor-kube` token
    /// until they do ([`MUST_ENROL`] says how).
    MustEnrol,
    /// The policy requires a second factor, the user has one, and the session did not prove it:
    /// no `ichor-kube` token from it; a new sign-in with the factor gets one.
    SignInWithFactor,
}

/// What a user who must enrol is told when an `ichor-kube` token is refused.
pub const MUST_ENROL: &str = "You must set up a second factor before you can get a Kubernetes token. \
                              Sign in to the Ichor web UI, set up a second factor on your account page, \
                              then sign in here again.";

/// The decision for a user holding `roles`, with a factor or not, asking for a token for
/// `audience`: only an `ichor-kube` token is refused, and only when the user's level is
/// `required` and they have no factor. Any other audience (the UI's `ichor-ui`) is allowed, so
/// the account page can enrol them.
pub fn token_decision<S: AsRef<str>>(
    policy: &SecondFactorPolicy,
    roles: &[S],
    has_factor: bool,
    audience: &str,
) -> TokenDecision {
    if audience == KUBE_AUDIENCE && policy.must_enrol(roles, has_factor) {
        TokenDecision::MustEnrol
    } else {
        TokenDecision::Allowed
    }
}

/// The decision for a token from an existing session (a refresh) of a user holding `roles`, with
/// a factor or not, whose sign-in proved a second factor (`amr` holds `mfa`) or not: as
/// [`token_decision`], and besides, a `required` user's `ichor-kube` token only from a session
/// that proved a factor.
pub fn session_decision<S: AsRef<str>>(
    policy: &SecondFactorPolicy,
    roles: &[S],
    has_factor: bool,
    session_proved_factor: bool,
    audience: &str,
) -> TokenDecision {
    match token_decision(policy, roles, has_factor, audience) {
        TokenDecision::Allowed
            if audience == KUBE_AUDIENCE
                && !session_proved_factor
                && policy.level_for(roles) == SecondFactorLevel::Required =>
        {
            TokenDecision::SignInWithFactor
        }
        decision => decision,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::UI_AUDIENCE;

    fn policy(default: SecondFactorLevel, roles: &[(&str, SecondFactorLevel)]) -> SecondFactorPolicy {
        let roles = roles.iter().map(|(r, l)| ((*r).to_owned(), *l)).collect();
        SecondFactorPolicy::new(default, roles).unwrap()
    }

    use SecondFactorLevel::{Off, Optional, Required};

    #[test]
    fn the_levels_are_ordered_weakest_first_and_read_their_names() {
        assert!(Off < Optional && Optional < Required);
        for level in [Off, Optional, Required] {
            let json = serde_json::to_value(level).unwrap();
            assert_eq!(json, level.name());
            assert_eq!(serde_json::from_value::<SecondFactorLevel>(json).unwrap(), level);
        }
        assert!(serde_json::from_str::<SecondFactorLevel>("\"Required\"").is_err());
        assert!(serde_json::from_str::<SecondFactorLevel>("false").is_err());
    }

    #[test]
    fn no_policy_asks_nothing_of_anyone() {
        let none = SecondFactorPolicy::default();
        assert_eq!(none.level_for(&["admin", "viewer"]), Off);
        assert_eq!(none.level_for::<&str>(&[]), Off);
        assert_eq!(
            token_decision(&none, &["admin"], false, KUBE_AUDIENCE),
            TokenDecision::Allowed
        );
    }

    #[test]
    fn a_user_s_level_is_the_strictest_of_the_default_and_their_roles() {
        let p = policy(Optional, &[("admin", Required), ("viewer", Off)]);
        assert_eq!(p.level_for(&["admin"]), Required);
        assert_eq!(p.level_for(&["viewer", "admin"]), Required);
        // A role set weaker than the default does not lower it.
        assert_eq!(p.level_for(&["viewer"]), Optional);
        assert_eq!(p.level_for(&["operator"]), Optional);
        assert_eq!(p.level_for::<&str>(&[]), Optional);
        let strict = policy(Required, &[("viewer", Off)]);
        assert_eq!(strict.level_for(&["viewer"]), Required);
    }

    #[test]
    fn required_without_a_factor_refuses_ichor_kube_and_allows_ichor_ui() {
        let p = policy(Off, &[("admin", Required)]);
        assert_eq!(
            token_decision(&p, &["admin"], false, KUBE_AUDIENCE),
            TokenDecision::MustEnrol
        );
        assert_eq!(
            token_decision(&p, &["admin"], false, UI_AUDIENCE),
            TokenDecision::Allowed
        );
        assert!(p.must_enrol(&["admin"], false));
    }

    #[test]
    fn a_factor_or_a_weaker_level_lets_the_ichor_kube_token_through() {
        let p = policy(Off, &[("admin", Required), ("viewer", Optional)]);
        assert_eq!(
            token_decision(&p, &["admin"], true, KUBE_AUDIENCE),
            TokenDecision::Allowed
        );
        assert_eq!(
            token_decision(&p, &["viewer"], false, KUBE_AUDIENCE),
            TokenDecision::Allowed
        );
        assert_eq!(
            token_decision(&p, &["operator"], false, KUBE_AUDIENCE),
            TokenDecision::Allowed
        );
        assert!(!p.must_enrol(&["admin"], true));
        assert!(!p.must_enrol(&["viewer"], false));
    }

    #[test]
    fn a_required_default_reaches_every_user_whatever_their_roles() {
        let p = SecondFactorPolicy::required_of_everyone();
        assert_eq!(p.level_for::<&str>(&[]), Required);
        assert_eq!(
            token_decision(&p, &["viewer"], false, KUBE_AUDIENCE),
            TokenDecision::MustEnrol
        );
    }

    #[test]
    fn a_required_user_s_session_that_proved_no_factor_gets_no_ichor_kube_token() {
        let p = policy(Off, &[("admin", Required)]);
        // Enrolled since the password-only sign-in: that session stays refused for Kubernetes.
        assert_eq!(
            session_decision(&p, &["admin"], true, false, KUBE_AUDIENCE),
            TokenDecision::SignInWithFactor
        );
        assert_eq!(
            session_decision(&p, &["admin"], true, true, KUBE_AUDIENCE),
            TokenDecision::Allowed
        );
        assert_eq!(
            session_decision(&p, &["admin"], false, false, KUBE_AUDIENCE),
            TokenDecision::MustEnrol
        );
        for (has, proved) in [(false, false), (true, false), (true, true)] {
            assert_eq!(
                session_decision(&p, &["admin"], has, proved, UI_AUDIENCE),
                TokenDecision::Allowed
            );
        }
        // Below `required`, a password-only session goes on as before.
        let optional = policy(Optional, &[]);
        assert_eq!(
            session_decision(&optional, &["admin"], true, false, KUBE_AUDIENCE),
            TokenDecision::Allowed
        );
    }

    #[test]
    fn the_roles_are_bounded_and_named_like_roles() {
        let many: BTreeMap<String, SecondFactorLevel> =
            (0..=MAX_ROLES).map(|i| (format!("role-{i}"), Required)).collect();
        let e = SecondFactorPolicy::new(Off, many).unwrap_err();
        assert_eq!(
            e.to_string(),
            "spec.users.secondFactor.roles: 17 roles, at most 16 are allowed"
        );
        let sixteen: BTreeMap<String, SecondFactorLevel> =
            (0..MAX_ROLES).map(|i| (format!("role-{i}"), Required)).collect();
        assert!(SecondFactorPolicy::new(Off, sixteen).is_ok());
        for bad in ["Admin", "1st", "", "a_b", &"a".repeat(32)] {
            let roles = BTreeMap::from([(bad.to_owned(), Required)]);
            let e = SecondFactorPolicy::new(Off, roles).unwrap_err();
            assert!(
                e.to_string().starts_with(&format!(
                    "spec.users.secondFactor.roles: \"{bad}\" is not a valid role name"
                )),
                "{e}"
            );
        }
    }

    #[test]
    fn a_serialized_policy_reads_back_only_through_its_checks() {
        let p = policy(Optional, &[("admin", Required)]);
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"default": "optional", "roles": {"admin": "required"}})
        );
        assert_eq!(serde_json::from_value::<SecondFactorPolicy>(json).unwrap(), p);
        let bad = serde_json::json!({"default": "off", "roles": {"x' || true || '": "required"}});
        let e = serde_json::from_value::<SecondFactorPolicy>(bad).unwrap_err();
        assert!(e.to_string().contains("is not a valid role name"), "{e}");
    }

    #[test]
    fn the_refusal_sentence_sends_the_user_to_the_web_ui_to_set_up_a_factor() {
        assert!(MUST_ENROL.contains("Sign in to the Ichor web UI"));
        assert!(MUST_ENROL.contains("set up a second factor"));
    }
}
