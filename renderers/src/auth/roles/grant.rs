//! The grant rule: who may give a user which role. An admin may grant anything, a built-in role
//! at or below the requester's highest built-in role is grantable, a custom role only by one who
//! holds it.

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
/// can always re-submit a user's roles unchanged (or remove some).
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
}
