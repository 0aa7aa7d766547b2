//! Roles: the built-in hierarchy viewer < operator < admin, role-name validation, the grant rule
//! and the last-enabled-admin rule.
//!
//! The `UserService` API and the `IchorUser` admission webhook both call these functions and
//! print the refusals' `Display` text, so a refusal reads the same whether it came from the UI,
//! the CLI or `kubectl`.

use std::fmt;

use super::user_name::ICHOR_PREFIX;

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
            BuiltinRole::Viewer => "ichor:viewer",
            BuiltinRole::Operator => "ichor:operator",
            BuiltinRole::Admin => "ichor:admin",
        }
    }

    /// The ClusterRole bound to the group: `ichor-viewer`, `ichor-operator`, `ichor-admin`.
    pub fn cluster_role(self) -> &'static str {
        match self {
            BuiltinRole::Viewer => "ichor-viewer",
            BuiltinRole::Operator => "ichor-operator",
            BuiltinRole::Admin => "ichor-admin",
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v(roles: &[&str]) -> Vec<String> {
        roles.iter().map(|r| (*r).to_owned()).collect()
    }

    const NONE: [&str; 0] = [];

    #[test]
    fn the_built_in_roles_are_ordered_and_named() {
        assert!(BuiltinRole::Viewer < BuiltinRole::Operator && BuiltinRole::Operator < BuiltinRole::Admin);
        let names: Vec<_> = BuiltinRole::ALL
            .iter()
            .map(|r| (r.name(), r.group(), r.cluster_role()))
            .collect();
        assert_eq!(
            names,
            [
                ("viewer", "ichor:viewer", "ichor-viewer"),
                ("operator", "ichor:operator", "ichor-operator"),
                ("admin", "ichor:admin", "ichor-admin"),
            ]
        );
        assert_eq!(BuiltinRole::from_name("operator"), Some(BuiltinRole::Operator));
        assert_eq!(BuiltinRole::from_name("auditor"), None);
    }

    #[test]
    fn accepts_valid_role_names() {
        for name in ["a", "viewer", "team-a2", &format!("a{}", "b".repeat(30))] {
            assert!(is_valid_role_name(name), "{name}");
        }
        assert_eq!(validate_roles(&["viewer", "auditor", "team-1"]), Ok(()));
        assert_eq!(validate_roles(&NONE), Ok(()));
    }

    #[test]
    fn refuses_invalid_role_names_naming_the_index() {
        for name in [
            "",
            "Admin",
            "1team",
            "-x",
            "a_b",
            "a.b",
            &format!("a{}", "b".repeat(31)),
        ] {
            assert!(!is_valid_role_name(name), "{name}");
        }
        let err = validate_roles(&["viewer", "Admin"]).unwrap_err();
        assert_eq!(
            err,
            RoleError::InvalidName {
                index: 1,
                name: "Admin".to_owned()
            }
        );
        assert!(
            err.to_string()
                .starts_with("spec.roles[1]: \"Admin\" is not a valid role name"),
            "{err}"
        );
        assert!(err.to_string().contains("^[a-z][a-z0-9-]{0,30}$"), "{err}");
    }

    #[test]
    fn refuses_a_duplicate_role() {
        let err = validate_roles(&["viewer", "ops", "viewer"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.roles[2]: role \"viewer\" is already listed at spec.roles[0]"
        );
    }

    #[test]
    fn accepts_16_roles_and_refuses_17() {
        let sixteen: Vec<String> = (0..16).map(|i| format!("r{i}")).collect();
        assert_eq!(validate_roles(&sixteen), Ok(()));
        let seventeen: Vec<String> = (0..17).map(|i| format!("r{i}")).collect();
        assert_eq!(
            validate_roles(&seventeen).unwrap_err().to_string(),
            "spec.roles: 17 roles, at most 16 are allowed"
        );
    }

    #[test]
    fn role_errors_lists_every_problem() {
        let errors = role_errors(&["X", "a", "a", "Y"]);
        assert_eq!(errors.len(), 3, "{errors:?}");
    }

    #[test]
    fn an_admin_may_grant_admin_and_custom_roles() {
        assert_eq!(
            ungranted_role(&["admin"], &NONE, &["admin", "auditor", "viewer"]),
            None
        );
    }

    #[test]
    fn an_operator_may_grant_operator_and_viewer() {
        assert_eq!(
            ungranted_role(&["operator"], &NONE, &["viewer", "operator"]),
            None
        );
    }

    #[test]
    fn an_operator_may_not_grant_admin() {
        let err = check_grant(&["operator"], &["viewer"], &["viewer", "admin"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "you may not grant role \"admin\": it is above your highest role \"operator\""
        );
        assert_eq!(
            ungranted_role(&["operator"], &["viewer"], &["viewer", "admin"]),
            Some("admin".to_owned())
        );
    }

    #[test]
    fn a_viewer_may_not_grant_operator() {
        assert_eq!(
            ungranted_role(&["viewer", "auditor"], &NONE, &["operator"]),
            Some("operator".to_owned())
        );
    }

    #[test]
    fn a_custom_role_needs_a_literal_match() {
        assert_eq!(
            ungranted_role(&["operator", "auditor"], &NONE, &["auditor"]),
            None
        );
        let err = check_grant(&["operator"], &NONE, &["auditor"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "you may not grant role \"auditor\": you do not hold it"
        );
    }

    #[test]
    fn a_requester_without_a_built_in_role_may_not_grant_viewer() {
        let err = check_grant(&["auditor"], &NONE, &["viewer"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "you may not grant role \"viewer\": you hold no built-in role"
        );
    }

    #[test]
    fn roles_already_held_by_the_user_are_not_checked() {
        assert_eq!(
            ungranted_role(&NONE, &["admin", "auditor"], &["auditor", "admin"]),
            None
        );
    }

    #[test]
    fn reports_the_first_ungranted_role_in_order() {
        assert_eq!(
            ungranted_role(&["viewer"], &NONE, &["viewer", "x", "admin"]),
            Some("x".to_owned())
        );
    }

    #[test]
    fn the_grant_rule_applies_only_to_ichor_identities() {
        assert_eq!(Requester::from_identity("oidc:bob", &["ichor:admin"]), None);
        assert_eq!(
            Requester::from_identity("system:admin", &["system:masters"]),
            None
        );
        let alice =
            Requester::from_identity("ichor:alice", &["ichor:operator", "system:authenticated"]).unwrap();
        assert_eq!(alice.roles(), ["operator"]);
        assert!(!alice.is_admin());
        assert!(alice.check_grant(&NONE, &["viewer"]).is_ok());
        assert!(alice.check_grant(&NONE, &["admin"]).is_err());
        let root = Requester::from_identity("ichor:root", &["ichor:admin"]).unwrap();
        assert!(root.is_admin());
        assert!(root.check_grant(&NONE, &["admin", "anything"]).is_ok());
        assert_eq!(Requester::from_roles(&["operator"]), alice);
    }

    #[test]
    fn system_identities_and_system_masters_are_exempt_from_the_last_admin_rule() {
        assert!(is_exempt_from_last_admin_rule(
            "system:serviceaccount:kube-system:namespace-controller",
            &NONE
        ));
        assert!(is_exempt_from_last_admin_rule(
            "kubernetes-admin",
            &["system:masters"]
        ));
        assert!(!is_exempt_from_last_admin_rule("ichor:alice", &["ichor:admin"]));
        assert!(!is_exempt_from_last_admin_rule(
            "oidc:bob",
            &["system:authenticated"]
        ));
    }

    fn state(roles: &[String], disabled: bool) -> UserState<'_> {
        UserState { roles, disabled }
    }

    #[test]
    fn refuses_disabling_demoting_or_deleting_the_last_enabled_admin() {
        let admin = v(&["admin"]);
        let viewer = v(&["viewer"]);
        let others = [
            ("bob", viewer.as_slice(), false),
            ("carol", admin.as_slice(), true),
        ];
        let changes = [
            UserChange::Update {
                old: state(&admin, false),
                new: state(&admin, true),
            },
            UserChange::Update {
                old: state(&admin, false),
                new: state(&viewer, false),
            },
            UserChange::Delete {
                old: state(&admin, false),
            },
        ];
        for change in changes {
            let err = check_last_admin("alice", &change, others).unwrap_err();
            assert_eq!(
                err.to_string(),
                "cannot disable, demote or delete the last enabled admin \"alice\": make another user an \
                 enabled admin first"
            );
        }
    }

    #[test]
    fn allows_it_when_another_enabled_admin_exists() {
        let admin = v(&["admin"]);
        let others = [("bob", admin.as_slice(), false)];
        let change = UserChange::Delete {
            old: state(&admin, false),
        };
        assert_eq!(check_last_admin("alice", &change, others), Ok(()));
    }

    #[test]
    fn the_user_itself_does_not_count_as_another_admin() {
        let admin = v(&["admin"]);
        let everyone = [("alice", admin.as_slice(), false)];
        let change = UserChange::Delete {
            old: state(&admin, false),
        };
        assert!(check_last_admin("alice", &change, everyone).is_err());
    }

    #[test]
    fn changes_that_keep_or_never_had_enabled_admin_are_allowed_with_no_admin_elsewhere() {
        let admin = v(&["admin"]);
        let both = v(&["admin", "viewer"]);
        let viewer = v(&["viewer"]);
        let cases = [
            UserChange::Create,
            UserChange::Update {
                old: state(&admin, false),
                new: state(&both, false),
            },
            UserChange::Update {
                old: state(&admin, true),
                new: state(&admin, true),
            },
            UserChange::Update {
                old: state(&viewer, false),
                new: state(&viewer, true),
            },
            UserChange::Delete {
                old: state(&admin, true),
            },
            UserChange::Delete {
                old: state(&viewer, false),
            },
        ];
        for change in cases {
            assert_eq!(check_last_admin("alice", &change, []), Ok(()), "{change:?}");
        }
    }

    fn role_set() -> impl Strategy<Value = Vec<String>> {
        proptest::collection::vec(
            prop_oneof![
                Just("viewer".to_owned()),
                Just("operator".to_owned()),
                Just("admin".to_owned()),
                "[a-z][a-z0-9-]{0,8}"
            ],
            0..6,
        )
    }

    proptest! {
        #[test]
        fn an_admin_can_grant_any_set(old in role_set(), new in role_set(), extra in role_set()) {
            let mut requester = extra;
            requester.push("admin".to_owned());
            prop_assert_eq!(ungranted_role(&requester, &old, &new), None);
        }

        #[test]
        fn anyone_can_resubmit_the_old_roles_or_a_subset(requester in role_set(), old in role_set(), keep in any::<u8>()) {
            prop_assert_eq!(ungranted_role(&requester, &old, &old), None);
            let subset: Vec<String> = old.iter().enumerate().filter(|(i, _)| keep >> (i % 8) & 1 == 1).map(|(_, r)| r.clone()).collect();
            prop_assert_eq!(ungranted_role(&requester, &old, &subset), None);
        }

        #[test]
        fn an_ungranted_role_is_new_and_not_grantable(requester in role_set(), old in role_set(), new in role_set()) {
            if let Some(role) = ungranted_role(&requester, &old, &new) {
                prop_assert!(new.contains(&role));
                prop_assert!(!old.contains(&role));
                prop_assert!(!requester.contains(&role));
                prop_assert!(!requester.iter().any(|r| r == "admin"));
            }
        }

        #[test]
        fn a_higher_built_in_role_grants_at_least_what_a_lower_one_does(old in role_set(), new in role_set()) {
            let viewer = ungranted_role(&["viewer"], &old, &new).is_none();
            let operator = ungranted_role(&["operator"], &old, &new).is_none();
            let admin = ungranted_role(&["admin"], &old, &new).is_none();
            prop_assert!(!viewer || operator);
            prop_assert!(!operator || admin);
        }
    }
}
