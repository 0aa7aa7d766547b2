//! Tests of the role rules: names, the built-in order, the grant rule and the last-enabled-admin
//! rule, with their exact messages.

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
    let alice = Requester::from_identity("ichor:alice", &["ichor:operator", "system:authenticated"]).unwrap();
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
fn acting_on_a_user_needs_the_right_to_grant_each_of_its_roles() {
    assert!(
        check_act_on(
            &["operator"],
            UserAct::SetPassword,
            "bob",
            &["viewer", "operator"]
        )
        .is_ok()
    );
    assert!(check_act_on(&["viewer"], UserAct::RevokeSessions, "nobody", &NONE).is_ok());
    assert!(check_act_on(&["admin"], UserAct::Enable, "root", &["admin", "auditor"]).is_ok());
    let refusal =
        check_act_on(&["operator"], UserAct::SetPassword, "root", &["viewer", "admin"]).unwrap_err();
    assert_eq!(refusal.refusal.role(), "admin");
    assert_eq!(
        refusal.to_string(),
        "you may not set the password of user \"root\": it holds role \"admin\", which is above your \
         highest role \"operator\"; only someone who may grant every role of a user may do that"
    );
    let custom = Requester::from_roles(&["operator"])
        .check_act_on(UserAct::Enable, "aud", &["auditor"])
        .unwrap_err();
    assert!(
        custom.to_string().starts_with(
            "you may not re-enable user \"aud\": it holds role \"auditor\", which you do not hold"
        ),
        "{custom}"
    );
    let none = check_act_on(&["auditor"], UserAct::RevokeSessions, "v", &["viewer"]).unwrap_err();
    assert!(
        none.to_string().contains(
            "end the sessions of user \"v\": it holds role \"viewer\", and you hold no built-in role"
        ),
        "{none}"
    );
}

#[test]
fn a_write_taking_a_role_away_disabling_or_deleting_is_an_act_on_the_user() {
    assert_eq!(
        acts_taking_away(&["admin"], false, Some((&["admin"][..], false))),
        []
    );
    assert_eq!(
        acts_taking_away(&["viewer"], false, Some((&["viewer", "admin"][..], false))),
        []
    );
    assert_eq!(
        acts_taking_away(&["admin", "viewer"], false, Some((&["viewer"][..], true))),
        [UserAct::Demote, UserAct::Disable]
    );
    assert_eq!(
        acts_taking_away(&["admin"], true, Some((&["admin"][..], true))),
        []
    );
    assert_eq!(
        acts_taking_away(&["admin"], true, Some((&["admin"][..], false))),
        []
    );
    assert_eq!(
        acts_taking_away::<_, &str>(&["admin"], false, None),
        [UserAct::Delete]
    );
    let refusal = check_act_on(&["operator"], UserAct::Demote, "boss", &["admin"]).unwrap_err();
    assert!(
        refusal
            .to_string()
            .starts_with("you may not take a role from user \"boss\": it holds role \"admin\""),
        "{refusal}"
    );
    for (act, phrase) in [(UserAct::Disable, "disable"), (UserAct::Delete, "delete")] {
        let refusal = check_act_on(&["operator"], act, "boss", &["admin"]).unwrap_err();
        assert!(
            refusal
                .to_string()
                .starts_with(&format!("you may not {phrase} user \"boss\"")),
            "{refusal}"
        );
    }
}

#[test]
fn a_requester_limited_to_its_live_roles_keeps_only_those_still_held() {
    let token = Requester::from_roles(&["admin", "viewer", "auditor"]);
    assert_eq!(token.limited_to(&["viewer"]).roles(), ["viewer"]);
    assert!(
        !token.limited_to(&["viewer", "operator"]).is_admin(),
        "a role the token lacks is not added"
    );
    assert!(token.limited_to(&NONE).roles().is_empty());
    assert!(token.limited_to(&["admin", "auditor"]).is_admin());
}

#[test]
fn only_system_masters_and_the_namespace_and_gc_controllers_are_exempt_from_the_last_admin_rule() {
    assert!(is_exempt_from_last_admin_rule(
        "system:serviceaccount:kube-system:namespace-controller",
        &NONE
    ));
    assert!(is_exempt_from_last_admin_rule(
        "system:serviceaccount:kube-system:generic-garbage-collector",
        &["system:serviceaccounts"]
    ));
    assert!(is_exempt_from_last_admin_rule(
        "system:kube-controller-manager",
        &NONE
    ));
    // Any other ServiceAccount, or system: name, is held to the rule.
    assert!(!is_exempt_from_last_admin_rule(
        "system:serviceaccount:ichor-system:ichor-issuer",
        &["system:serviceaccounts", "system:serviceaccounts:ichor-system"]
    ));
    assert!(!is_exempt_from_last_admin_rule(
        "system:serviceaccount:kube-system:namespace-controller-impostor",
        &NONE
    ));
    assert!(!is_exempt_from_last_admin_rule("system:anonymous", &NONE));
    assert!(is_exempt_from_last_admin_rule(
        "kubernetes-admin",
        &["system:masters"]
    ));
    assert!(!is_exempt_from_last_admin_rule("ichor:alice", &["ichor:admin"]));
    assert!(!is_exempt_from_last_admin_rule(
        "oidc:bob",
        &["system:authenticated"]
    ));
    // An exempt name carrying a group Kubernetes does not give is someone impersonating it (the
    // issuer may impersonate any user name with ichor: groups): held to the rule.
    for impersonated in last_admin::EXEMPT_USERS {
        assert!(!is_exempt_from_last_admin_rule(
            impersonated,
            &["ichor:admin", "system:authenticated"]
        ));
        assert!(!is_exempt_from_last_admin_rule(impersonated, &["oidc:admins"]));
        assert!(is_exempt_from_last_admin_rule(
            impersonated,
            &["system:authenticated"]
        ));
    }
    assert!(is_exempt_from_last_admin_rule(
        "kubernetes-admin",
        &["system:masters", "ichor:admin"]
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
