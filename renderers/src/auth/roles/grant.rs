//! The grant rule: who may give a user which role. An admin may grant anything, a built-in role
//! at or below the requester's highest built-in role is grantable, a custom role only by one who
//! holds it.
//!
//! The same rule bounds what a requester may do *to* another user: setting its password, ending
//! its sessions and re-enabling it each hand that user's roles to someone (whoever then signs in
//! as it), and taking a role away, disabling and deleting each clear the way to that (a demoted
//! or re-created user is one the requester may then set the password of) or log the user out, so
//! each needs the right to grant every role the user holds ([`check_act_on`]).

use super::{ADMIN_ROLE, BuiltinRole, highest_builtin, holds};
use crate::auth::user_name::ICHOR_PREFIX;

/// Why a requester may not grant a role. `Display` is the exact message the API and the webhook
/// print.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantRefusal {
    /// A built-in role above the requester's highest built-in role.
    #[error("you may not grant role \"{role}\": it is above your highest role \"{highest}\"")]
    AboveHighest {
        /// The role asked for.
        role: String,
        /// The requester's highest built-in role.
        highest: BuiltinRole,
    },
    /// A built-in role, and the requester holds no built-in role.
    #[error("you may not grant role \"{role}\": you hold no built-in role")]
    NoBuiltinRole {
        /// The role asked for.
        role: String,
    },
    /// A custom role the requester does not hold.
    #[error("you may not grant role \"{role}\": you do not hold it")]
    NotHeld {
        /// The role asked for.
        role: String,
    },
}

impl GrantRefusal {
    /// The role that may not be granted.
    pub fn role(&self) -> &str {
        match self {
            GrantRefusal::AboveHighest { role, .. }
            | GrantRefusal::NoBuiltinRole { role }
            | GrantRefusal::NotHeld { role } => role,
        }
    }
}

/// Whether a requester holding `requester_roles` may grant `role`: an admin may grant anything; a
/// built-in role at or below the requester's highest built-in role is grantable; a custom role
/// only if the requester holds it.
pub fn may_grant<S: AsRef<str>>(requester_roles: &[S], role: &str) -> Result<(), GrantRefusal> {
    if holds(requester_roles, ADMIN_ROLE) || holds(requester_roles, role) {
        return Ok(());
    }
    match (BuiltinRole::from_name(role), highest_builtin(requester_roles)) {
        (Some(wanted), Some(highest)) if wanted <= highest => Ok(()),
        (Some(_), Some(highest)) => Err(GrantRefusal::AboveHighest {
            role: role.to_owned(),
            highest,
        }),
        (Some(_), None) => Err(GrantRefusal::NoBuiltinRole {
            role: role.to_owned(),
        }),
        (None, _) => Err(GrantRefusal::NotHeld {
            role: role.to_owned(),
        }),
    }
}

/// The grant rule over a whole change: the first role in `new` that is not in `old` and that the
/// requester may not grant, as a refusal. Roles kept from `old` are never checked, so a requester
/// can always re-submit a user's roles unchanged; removing one is an act on the user
/// ([`UserAct::Demote`], [`check_act_on`]).
pub fn check_grant<R, O, N>(requester_roles: &[R], old: &[O], new: &[N]) -> Result<(), GrantRefusal>
where
    R: AsRef<str>,
    O: AsRef<str>,
    N: AsRef<str>,
{
    new.iter()
        .map(AsRef::as_ref)
        .filter(|role| !holds(old, role))
        .try_for_each(|role| may_grant(requester_roles, role))
}

/// An act on another user that hands its roles to someone, or clears the way to that, and so
/// needs the right to grant each of them: whoever sets a password can sign in as the user,
/// whoever re-enables a user brings its roles back, and whoever demotes, disables or deletes a
/// user could then set the password of what is left (or of a new user of the name) and ends the
/// user's sessions; ending an admin's sessions is an act against an admin. The roles judged are
/// those the user holds before the act.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserAct {
    /// `SetPassword`: an administrator's new password for the user.
    SetPassword,
    /// `RevokeSessions`: ending every session of the user.
    RevokeSessions,
    /// `spec.disabled` from `true` to `false`.
    Enable,
    /// A write that removes any role from `spec.roles`.
    Demote,
    /// `spec.disabled` from `false` to `true`.
    Disable,
    /// Deleting the user.
    Delete,
    /// Removing every second factor of the user (`SetPassword` with `reset_factors`).
    ResetFactors,
}

impl UserAct {
    /// The act as the refusal words it: "set the password of", "end the sessions of",
    /// "re-enable", "take a role from", "disable", "delete", "reset the second factors of".
    pub fn phrase(self) -> &'static str {
        match self {
            UserAct::SetPassword => "set the password of",
            UserAct::RevokeSessions => "end the sessions of",
            UserAct::Enable => "re-enable",
            UserAct::Demote => "take a role from",
            UserAct::Disable => "disable",
            UserAct::Delete => "delete",
            UserAct::ResetFactors => "reset the second factors of",
        }
    }
}

/// The acts a write of a user from `old` to `new` (`None`: a delete) is, of those that take
/// something away: [`UserAct::Demote`] when a role of `old` is missing from `new`,
/// [`UserAct::Disable`] when it turns `disabled` on, [`UserAct::Delete`] for a delete. Each is
/// judged by [`check_act_on`] on the roles of `old`. A re-enable ([`UserAct::Enable`]) is judged
/// on the roles the user ends with and is not among these.
pub fn acts_taking_away<O: AsRef<str>, N: AsRef<str>>(
    old_roles: &[O],
    old_disabled: bool,
    new: Option<(&[N], bool)>,
) -> Vec<UserAct> {
    let Some((new_roles, new_disabled)) = new else {
        return vec![UserAct::Delete];
    };
    let mut acts = Vec::new();
    if old_roles.iter().any(|role| !holds(new_roles, role.as_ref())) {
        acts.push(UserAct::Demote);
    }
    if new_disabled && !old_disabled {
        acts.push(UserAct::Disable);
    }
    acts
}

/// Why a requester may not act on a user. `Display` is the exact message the API and the webhook
/// print; it names the act, the user and the role the requester could not grant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "you may not {} user \"{user}\": it holds role \"{}\", {}; only someone who may grant every \
     role of a user may do that",
    act.phrase(),
    refusal.role(),
    why(refusal)
)]
pub struct ActRefusal {
    /// What was refused.
    pub act: UserAct,
    /// The user acted on.
    pub user: String,
    /// The first of its roles the requester may not grant.
    pub refusal: GrantRefusal,
}

fn why(refusal: &GrantRefusal) -> String {
    match refusal {
        GrantRefusal::AboveHighest { highest, .. } => {
            format!("which is above your highest role \"{highest}\"")
        }
        GrantRefusal::NoBuiltinRole { .. } => "and you hold no built-in role".to_owned(),
        GrantRefusal::NotHeld { .. } => "which you do not hold".to_owned(),
    }
}

/// Whether a requester holding `requester_roles` may `act` on `user`, who holds `user_roles`:
/// only if it may grant every one of them ([`may_grant`]). A user with no role (or only roles
/// the requester holds) is open to anyone the RBAC gate lets through.
pub fn check_act_on<R, U>(
    requester_roles: &[R],
    act: UserAct,
    user: &str,
    user_roles: &[U],
) -> Result<(), ActRefusal>
where
    R: AsRef<str>,
    U: AsRef<str>,
{
    user_roles
        .iter()
        .try_for_each(|role| may_grant(requester_roles, role.as_ref()))
        .map_err(|refusal| ActRefusal {
            act,
            user: user.to_owned(),
            refusal,
        })
}

/// [`check_grant`] as the name of the first role the requester may not grant, if any.
pub fn ungranted_role<R, O, N>(requester_roles: &[R], old: &[O], new: &[N]) -> Option<String>
where
    R: AsRef<str>,
    O: AsRef<str>,
    N: AsRef<str>,
{
    check_grant(requester_roles, old, new)
        .err()
        .map(|refusal| refusal.role().to_owned())
}

/// The authenticated identity of a request, as the grant rule sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requester {
    roles: Vec<String>,
}

impl Requester {
    /// A requester whose roles are known directly (the UI backend reads them from the caller's
    /// `IchorUser`).
    pub fn from_roles<S: AsRef<str>>(roles: &[S]) -> Self {
        Self {
            roles: roles.iter().map(|r| r.as_ref().to_owned()).collect(),
        }
    }

    /// The requester of an admission request, or `None` when the grant rule does not apply to it:
    /// it applies only to Ichor-issued identities, whose user name starts with `ichor:`. Its roles
    /// are its `ichor:<role>` groups (so group `ichor:admin` makes it admin-equivalent); other
    /// groups are ignored.
    pub fn from_identity<S: AsRef<str>>(username: &str, groups: &[S]) -> Option<Self> {
        if !username.starts_with(ICHOR_PREFIX) {
            return None;
        }
        let roles = groups
            .iter()
            .filter_map(|g| g.as_ref().strip_prefix(ICHOR_PREFIX))
            .map(str::to_owned);
        Some(Self {
            roles: roles.collect(),
        })
    }

    /// The same requester holding only those of its roles that are also in `live` (its
    /// `IchorUser`'s `spec.roles` now): a token's groups say what the user held when it was
    /// issued, and a role taken away since must not count.
    #[must_use]
    pub fn limited_to<S: AsRef<str>>(&self, live: &[S]) -> Self {
        Self {
            roles: self
                .roles
                .iter()
                .filter(|role| holds(live, role.as_str()))
                .cloned()
                .collect(),
        }
    }

    /// The requester's roles.
    pub fn roles(&self) -> &[String] {
        &self.roles
    }

    /// Whether the requester may grant anything.
    pub fn is_admin(&self) -> bool {
        holds(&self.roles, ADMIN_ROLE)
    }

    /// [`check_grant`] for this requester.
    pub fn check_grant<O: AsRef<str>, N: AsRef<str>>(
        &self,
        old: &[O],
        new: &[N],
    ) -> Result<(), GrantRefusal> {
        check_grant(&self.roles, old, new)
    }

    /// [`check_act_on`] for this requester.
    pub fn check_act_on<U: AsRef<str>>(
        &self,
        act: UserAct,
        user: &str,
        user_roles: &[U],
    ) -> Result<(), ActRefusal> {
        check_act_on(&self.roles, act, user, user_roles)
    }
}
