//! The last-enabled-admin rule: no change may leave the users without an enabled admin, except
//! one made by a system identity or the override certificate.

use super::{ADMIN_ROLE, holds};

/// Whether an admission requester is exempt from the last-enabled-admin rule: a system identity
/// (user name starting with `system:`, which covers the namespace controller and the garbage
/// collector) or a member of `system:masters` (the override certificate). This keeps the
/// override credential the recovery path.
pub fn is_exempt_from_last_admin_rule<S: AsRef<str>>(username: &str, groups: &[S]) -> bool {
    username.starts_with("system:") || groups.iter().any(|g| g.as_ref() == "system:masters")
}

/// The state of one user that the last-enabled-admin rule looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserState<'a> {
    /// `spec.roles`.
    pub roles: &'a [String],
    /// `spec.disabled`.
    pub disabled: bool,
}

impl UserState<'_> {
    /// Not disabled, and holds the role `admin`.
    pub fn is_enabled_admin(&self) -> bool {
        !self.disabled && holds(self.roles, ADMIN_ROLE)
    }
}

/// A change to one user, as the last-enabled-admin rule sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserChange<'a> {
    /// A new user (never refused by this rule).
    Create,
    /// An update from `old` to `new`.
    Update {
        /// The stored state.
        old: UserState<'a>,
        /// The requested state.
        new: UserState<'a>,
    },
    /// A deletion of a user in state `old`.
    Delete {
        /// The stored state.
        old: UserState<'a>,
    },
}

/// The refusal of the last-enabled-admin rule. `Display` is the exact message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "cannot disable, demote or delete the last enabled admin \"{user}\": make another user an enabled \
     admin first"
)]
pub struct LastAdminRefusal {
    /// The user the change was refused for.
    pub user: String,
}

/// The last-enabled-admin rule: refuses a change that turns the enabled admin `user` into
/// something else (disabled, without `admin`, or deleted) when no *other* user is an enabled
/// admin. `others` are the other users as `(name, roles, disabled)`; an entry named `user` is
/// ignored, so passing every user is fine.
pub fn check_last_admin<'a, I>(user: &str, change: &UserChange<'_>, others: I) -> Result<(), LastAdminRefusal>
where
    I: IntoIterator<Item = (&'a str, &'a [String], bool)>,
{
    let loses_admin = match change {
        UserChange::Create => false,
        UserChange::Update { old, new } => old.is_enabled_admin() && !new.is_enabled_admin(),
        UserChange::Delete { old } => old.is_enabled_admin(),
    };
    if !loses_admin {
        return Ok(());
    }
    let another = others
        .into_iter()
        .any(|(name, roles, disabled)| name != user && UserState { roles, disabled }.is_enabled_admin());
    if another {
        Ok(())
    } else {
        Err(LastAdminRefusal {
            user: user.to_owned(),
        })
    }
}
