//! Roles: the built-in hierarchy viewer < operator < admin, role-name validation, the grant rule
//! and the last-enabled-admin rule.
//!
//! The `UserService` API and the `IchorUser` admission webhook both call these functions and
//! print the refusals' `Display` text, so a refusal reads the same whether it came from the UI,
//! the CLI or `kubectl`.
//!
//! Names and the built-in order are here; the grant rule ([`check_grant`]) and the
//! last-enabled-admin rule ([`check_last_admin`]) have a module each.

use std::fmt;

use crate::contract;

mod grant;
mod last_admin;

pub use grant::{
    ActRefusal, GrantRefusal, Requester, UserAct, acts_taking_away, check_act_on, check_grant, may_grant,
    ungranted_role,
};
pub use last_admin::{
    LastAdminRefusal, UserChange, UserState, check_last_admin, is_exempt_from_last_admin_rule,
};

/// The most roles one user may have (`spec.roles`).
pub const MAX_ROLES: usize = 16;

/// The longest role name: `^[a-z][a-z0-9-]{0,30}$` allows 31 characters.
pub const MAX_ROLE_NAME_LEN: usize = 31;

/// The role that may grant anything and that the last-enabled-admin rule protects.
pub const ADMIN_ROLE: &str = "admin";

/// One of the three roles Ichor ships, in order of power: `Viewer < Operator < Admin`.
///
/// Each is a ClusterRole `ichor-<name>` bound to the group `ichor:<name>`; the operator role
/// includes every rule of the viewer role, and the admin role every rule of the operator role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BuiltinRole {
    /// Read-only access.
    Viewer,
    /// Viewer plus the routine operations.
    Operator,
    /// Everything, including users and destructive operations.
    Admin,
}

impl BuiltinRole {
    /// The three built-in roles, lowest first.
    pub const ALL: [BuiltinRole; 3] = [BuiltinRole::Viewer, BuiltinRole::Operator, BuiltinRole::Admin];

    /// The role's name as written in `spec.roles`: `viewer`, `operator`, `admin`.
    pub fn name(self) -> &'static str {
        match self {
            BuiltinRole::Viewer => "viewer",
            BuiltinRole::Operator => "operator",
            BuiltinRole::Admin => ADMIN_ROLE,
        }
    }

    /// The Kubernetes group of the role: `ichor:viewer`, `ichor:operator`, `ichor:admin`.
    pub fn group(self) -> &'static str {
        match self {
            BuiltinRole::Viewer => contract::VIEWER_GROUP,
            BuiltinRole::Operator => contract::OPERATOR_GROUP,
            BuiltinRole::Admin => contract::ADMIN_GROUP,
        }
    }

    /// The ClusterRole bound to the group: `ichor-viewer`, `ichor-operator`, `ichor-admin`.
    pub fn cluster_role(self) -> &'static str {
        match self {
            BuiltinRole::Viewer => contract::VIEWER_CLUSTER_ROLE,
            BuiltinRole::Operator => contract::OPERATOR_CLUSTER_ROLE,
            BuiltinRole::Admin => contract::ADMIN_CLUSTER_ROLE,
        }
    }

    /// The built-in role with this name, if it is one.
    pub fn from_name(name: &str) -> Option<Self> {
        BuiltinRole::ALL.into_iter().find(|r| r.name() == name)
    }
}

impl fmt::Display for BuiltinRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A problem with `spec.roles`. Each message names the field and the offending entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoleError {
    /// More than [`MAX_ROLES`] roles.
    #[error("spec.roles: {count} roles, at most {MAX_ROLES} are allowed")]
    TooMany {
        /// How many were given.
        count: usize,
    },
    /// A name that does not match `^[a-z][a-z0-9-]{0,30}$`.
    #[error(
        "spec.roles[{index}]: \"{name}\" is not a valid role name: it must match \
         ^[a-z][a-z0-9-]{{0,30}}$ (a lower-case letter, then up to 30 lower-case letters, digits \
         or '-')"
    )]
    InvalidName {
        /// Position in `spec.roles`.
        index: usize,
        /// The refused name (cut to 40 characters).
        name: String,
    },
    /// A role listed twice.
    #[error("spec.roles[{index}]: role \"{name}\" is already listed at spec.roles[{first}]")]
    Duplicate {
        /// Position of the repeat.
        index: usize,
        /// Position of the first occurrence.
        first: usize,
        /// The role.
        name: String,
    },
}

/// Whether `name` is a valid role name, `^[a-z][a-z0-9-]{0,30}$`.
pub fn is_valid_role_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.len() <= MAX_ROLE_NAME_LEN
        && bytes.first().is_some_and(u8::is_ascii_lowercase)
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// Every problem of a `spec.roles` list, in order (empty when the list is valid).
pub fn role_errors<S: AsRef<str>>(roles: &[S]) -> Vec<RoleError> {
    let mut errors = Vec::new();
    if roles.len() > MAX_ROLES {
        errors.push(RoleError::TooMany { count: roles.len() });
    }
    for (index, role) in roles.iter().enumerate() {
        let name = role.as_ref();
        if !is_valid_role_name(name) {
            errors.push(RoleError::InvalidName {
                index,
                name: name.chars().take(40).collect(),
            });
        } else if let Some(first) = roles[..index].iter().position(|r| r.as_ref() == name) {
            errors.push(RoleError::Duplicate {
                index,
                first,
                name: name.to_owned(),
            });
        }
    }
    errors
}

/// Validates `spec.roles`: at most 16, each a valid name, no duplicates. Returns the first problem;
/// [`role_errors`] lists them all.
pub fn validate_roles<S: AsRef<str>>(roles: &[S]) -> Result<(), RoleError> {
    match role_errors(roles).into_iter().next() {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// The highest built-in role in a list of roles, if any.
pub fn highest_builtin<S: AsRef<str>>(roles: &[S]) -> Option<BuiltinRole> {
    roles
        .iter()
        .filter_map(|r| BuiltinRole::from_name(r.as_ref()))
        .max()
}

fn holds<S: AsRef<str>>(roles: &[S], role: &str) -> bool {
    roles.iter().any(|r| r.as_ref() == role)
}

#[cfg(test)]
mod tests;
