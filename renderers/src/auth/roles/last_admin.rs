//! The last-enabled-admin rule: no change may leave the users without an enabled admin, except
//! one made by the override certificate or by the two controllers that delete a namespace's
//! objects.

use super::{ADMIN_ROLE, holds};
use crate::authn::prefix::SYSTEM_PREFIX;

/// The group of the override certificate (the secrets bundle's `admin` client certificate).
pub const OVERRIDE_GROUP: &str = "system:masters";

/// The user names exempt from the last-enabled-admin rule: the namespace controller (deleting
/// the namespace's objects on uninstall) and the garbage collector, as the controller manager
/// names them with per-controller credentials (`--use-service-account-credentials`, the default
/// of Talos and kubeadm), and the controller manager itself, which they act as without those
/// credentials. Every other ServiceAccount, and every other `system:` name, is held to the rule.
pub const EXEMPT_USERS: [&str; 3] = [
    "system:serviceaccount:kube-system:namespace-controller",
    "system:serviceaccount:kube-system:generic-garbage-collector",
    "system:kube-controller-manager",
];

/// Whether an admission requester is exempt from the last-enabled-admin rule: a member of
/// [`OVERRIDE_GROUP`] (the override certificate, which keeps it the recovery path), or one of
/// [`EXEMPT_USERS`] whose every group is a `system:` one, as the real controllers' are. A name
/// carrying another group is someone impersonating it: the issuer may impersonate any user name
/// that is not a ServiceAccount, with `ichor:` groups, and `system:kube-controller-manager` with
/// `ichor:admin` would hold the admin's rights through the group and the exemption through the
/// name. Nothing else is exempt: not other `system:` users, not other ServiceAccounts. The
/// chart's match condition on the webhook says the same.
pub fn is_exempt_from_last_admin_rule<S: AsRef<str>>(username: &str, groups: &[S]) -> bool {
    groups.iter().any(|g| g.as_ref() == OVERRIDE_GROUP)
        || (EXEMPT_USERS.contains(&username) && groups.iter().all(|g| g.as_ref().starts_with(SYSTEM_PREFIX)))
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
/// ignored, so passing every user is fine. Leave out users that are being deleted (a
/// `deletionTimestamp`): a finalizer can keep one around, but it is no admin to rely on.
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
