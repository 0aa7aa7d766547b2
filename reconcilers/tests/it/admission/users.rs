//! `IchorUser`: the grant rule, the last-enabled-admin rule and the namespace users live in.

use std::sync::Arc;

use ichor_controller::admission::fixtures::{
    self, FakeLister, FakeReviewer, NAMESPACE, OPERATOR, ROOT, VIEWER, Who, user, user_object,
};
use ichor_controller::admission::review::{self, AdmissionRequest};
use ichor_controller::admission::users::{MAX_CONFIRMATIONS, enabled_admins_besides};
use ichor_controller::admission::{self as webhooks, AdmissionState, controller_identity};
use ichor_renderers::crd::IchorUser;
use serde_json::{Value, json};

use super::{Denied, Fakes, USER, assert_denied, outcome};

// === The grant rule ===

/// A create of user `name` with roles by a requester, and its answer (`Err`: the exact message).
type Create<'a> = (&'a Who<'a>, &'a str, &'a [&'a str], Result<(), &'a str>);

/// Runs each create against `f` and checks its answer.
async fn creates(f: &Fakes, cases: &[Create<'_>]) {
    for (who, name, roles, expected) in cases {
        let new = user(name, roles, false);
        let got = f.decide(USER, "CREATE", who, new, Value::Null).await;
        assert_eq!(got, expected.map_err(str::to_owned), "{} {roles:?}", who.user);
    }
}

#[tokio::test]
async fn an_admin_may_create_an_admin() {
    let f = Fakes::none();
    creates(&f, &[(&ROOT, "ann", &["admin", "auditor"], Ok(()))]).await;
    assert_eq!(f.lister.calls(), 0, "a create never lists the other users");
}

#[tokio::test]
async fn an_operator_may_not_create_an_admin_and_the_message_is_the_apis() {
    let message = "spec.roles: you may not grant role \"admin\": it is above your highest role \"operator\"";
    creates(
        &Fakes::none(),
        &[(&OPERATOR, "ann", &["viewer", "admin"], Err(message))],
    )
    .await;
}

#[tokio::test]
async fn a_viewer_may_create_a_viewer_but_not_an_operator() {
    let message = "spec.roles: you may not grant role \"operator\": it is above your highest role \"viewer\"";
    let cases: [Create<'_>; 2] = [
        (&VIEWER, "bo", &["viewer"], Ok(())),
        (&VIEWER, "bo", &["operator"], Err(message)),
    ];
    creates(&Fakes::none(), &cases).await;
}

#[tokio::test]
async fn a_custom_role_needs_a_literal_match() {
    let message = "spec.roles: you may not grant role \"auditor\": you do not hold it";
    creates(&Fakes::none(), &[(&OPERATOR, "bo", &["auditor"], Err(message))]).await;
}

#[tokio::test]
async fn an_update_checks_only_the_roles_it_adds() {
    let f = Fakes::none();
    // The operator renames an admin's display data; the admin role was already there.
    let mut renamed = user("ann", &["admin"], false);
    renamed["spec"]["displayName"] = json!("Ann B.");
    let old = user("ann", &["admin"], false);
    assert_eq!(f.decide(USER, "UPDATE", &OPERATOR, renamed, old).await, Ok(()));
    // Adding admin is refused.
    let (new, old) = (
        user("bo", &["viewer", "admin"], false),
        user("bo", &["viewer"], false),
    );
    assert_denied(
        f.decide(USER, "UPDATE", &OPERATOR, new, old).await,
        &[Denied::Contains("\"admin\"")],
    );
}

#[tokio::test]
async fn identities_that_are_not_ichor_ones_are_not_limited_by_the_grant_rule() {
    let external = Who {
        user: "oidc:bob@example.com",
        groups: &["oidc:platform", "system:authenticated"],
    };
    creates(&Fakes::none(), &[(&external, "ann", &["admin"], Ok(()))]).await;
}

// === The last-enabled-admin rule ===

const LAST_ADMIN_ANN: &str = "cannot disable, demote or delete the last enabled admin \"ann\": make another user an enabled admin first";

/// Ann, the only enabled admin, disabled by root.
fn disable_ann() -> (Value, Value) {
    (user("ann", &["admin"], true), user("ann", &["admin"], false))
}

/// Ann, an enabled admin, deleted: no new object.
fn delete_ann() -> (Value, Value) {
    (Value::Null, user("ann", &["admin"], false))
}

#[tokio::test]
async fn refuses_disabling_the_last_enabled_admin_from_the_cache() {
    let f = Fakes::listing(&[
        ("ann", &["admin"], false),
        ("bo", &["viewer"], false),
        ("cy", &["admin"], true),
    ]);
    let (new, old) = disable_ann();
    assert_eq!(
        f.decide(USER, "UPDATE", &ROOT, new, old).await,
        Err(format!("spec.disabled: {LAST_ADMIN_ANN}"))
    );
    assert_eq!(f.lister.namespaces(), vec![NAMESPACE.to_owned()]);
    assert!(f.lister.reads().is_empty(), "a refusal needs no read");
}

#[tokio::test]
async fn refuses_demoting_or_deleting_the_last_enabled_admin() {
    let f = Fakes::listing(&[("ann", &["admin"], false)]);
    let (new, old) = (user("ann", &["viewer"], false), user("ann", &["admin"], false));
    assert_denied(
        f.decide(USER, "UPDATE", &ROOT, new, old).await,
        &[Denied::StartsWith("spec.roles: cannot disable, demote")],
    );
    let (new, old) = delete_ann();
    assert_eq!(
        f.decide(USER, "DELETE", &ROOT, new, old).await,
        Err(LAST_ADMIN_ANN.to_owned())
    );
}

#[tokio::test]
async fn allows_it_when_another_enabled_admin_exists() {
    let f = Fakes::listing(&[("ann", &["admin"], false), ("dee", &["admin", "viewer"], false)]);
    let (new, old) = delete_ann();
    assert_eq!(f.decide(USER, "DELETE", &ROOT, new, old).await, Ok(()));
    assert_eq!(f.lister.calls(), 1);
    assert_eq!(f.lister.reads(), ["dee"], "the admin relied on is read again");
}

#[tokio::test]
async fn a_demotion_the_cache_has_not_seen_yet_refuses_the_change() {
    // dee was disabled a moment ago; the cache still shows her as an enabled admin.
    let f = Fakes::new(
        FakeReviewer::default(),
        FakeLister::stale(
            &[("ann", &["admin"], false), ("dee", &["admin"], false)],
            &[("ann", &["admin"], false), ("dee", &["admin"], true)],
        ),
    );
    let (new, old) = disable_ann();
    assert_eq!(
        f.decide(USER, "UPDATE", &ROOT, new, old).await,
        Err(format!("spec.disabled: {LAST_ADMIN_ANN}"))
    );
    assert_eq!(f.lister.reads(), ["dee"]);
}

#[tokio::test]
async fn the_next_candidate_is_read_when_one_is_no_longer_an_enabled_admin() {
    // Bea was demoted and cy deleted meanwhile; dee still is an enabled admin.
    let f = Fakes::new(
        FakeReviewer::default(),
        FakeLister::stale(
            &[
                ("ann", &["admin"], false),
                ("bea", &["admin"], false),
                ("cy", &["admin"], false),
                ("dee", &["admin"], false),
            ],
            &[
                ("ann", &["admin"], false),
                ("bea", &["viewer"], false),
                ("dee", &["admin"], false),
            ],
        ),
    );
    let (new, old) = delete_ann();
    assert_eq!(f.decide(USER, "DELETE", &ROOT, new, old).await, Ok(()));
    assert_eq!(
        f.lister.reads(),
        ["bea", "cy", "dee"],
        "in name order, until one confirms"
    );
}

#[tokio::test]
async fn at_most_max_confirmations_candidates_are_read_then_the_change_is_refused() {
    let cached: Vec<(String, bool)> = (0..=MAX_CONFIRMATIONS)
        .map(|i| (format!("admin-{i}"), false))
        .collect();
    let mut cached: Vec<(&str, &[&str], bool)> = cached
        .iter()
        .map(|(n, d)| (n.as_str(), &["admin"][..], *d))
        .collect();
    // Only the last one, beyond the bound, is still an enabled admin.
    let mut fresh = cached.clone();
    for entry in fresh.iter_mut().take(MAX_CONFIRMATIONS) {
        entry.2 = true;
    }
    cached.push(("ann", &["admin"], false));
    let f = Fakes::new(FakeReviewer::default(), FakeLister::stale(&cached, &fresh));
    let (new, old) = delete_ann();
    assert_eq!(
        f.decide(USER, "DELETE", &ROOT, new, old).await,
        Err(LAST_ADMIN_ANN.to_owned())
    );
    assert_eq!(f.lister.reads().len(), MAX_CONFIRMATIONS);
}

#[tokio::test]
async fn a_failed_read_of_the_candidate_refuses_the_change() {
    let f = Fakes::new(
        FakeReviewer::default(),
        FakeLister::unreadable(&[("ann", &["admin"], false), ("dee", &["admin"], false)]),
    );
    let (new, old) = disable_ann();
    assert_eq!(
        f.decide(USER, "UPDATE", &ROOT, new, old).await,
        Err(
            "spec.disabled: the enabled admin \"dee\" could not be read to confirm it (the server \
             is unavailable), so the last-enabled-admin rule could not be checked; the change is \
             refused until it can be checked"
                .to_owned()
        )
    );
}

#[tokio::test]
async fn the_candidates_are_the_other_enabled_admins_by_name() {
    let users: Vec<Arc<IchorUser>> = [
        ("zed", &["admin"][..], false),
        ("ann", &["admin"], false),
        ("bo", &["viewer"], false),
        ("cy", &["admin"], true),
        ("abe", &["viewer", "admin"], false),
    ]
    .iter()
    .map(|(n, r, d)| Arc::new(user_object(n, r, *d)))
    .collect();
    assert_eq!(enabled_admins_besides("ann", &users), ["abe", "zed"]);
}

#[tokio::test]
async fn a_change_that_keeps_every_enabled_admin_needs_no_list() {
    let f = Fakes::none();
    let cases = [
        (
            "UPDATE",
            "bo",
            user("bo", &["viewer"], true),
            user("bo", &["viewer"], false),
        ),
        (
            "UPDATE",
            "ann",
            user("ann", &["admin", "viewer"], false),
            user("ann", &["admin"], false),
        ),
        ("DELETE", "cy", Value::Null, user("cy", &["admin"], true)),
    ];
    for (operation, name, new, old) in cases {
        assert_eq!(f.decide(USER, operation, &ROOT, new, old).await, Ok(()), "{name}");
    }
    assert_eq!(f.lister.calls(), 0);
}

#[tokio::test]
async fn the_namespace_controller_and_system_masters_are_exempt_from_the_last_admin_rule() {
    let f = Fakes::listing(&[("ann", &["admin"], false)]);
    let namespace_controller = Who {
        user: "system:serviceaccount:kube-system:namespace-controller",
        groups: &["system:serviceaccounts", "system:authenticated"],
    };
    let override_cert = Who {
        user: "admin",
        groups: &["system:masters", "system:authenticated"],
    };
    let (new, old) = delete_ann();
    assert_eq!(
        f.decide(USER, "DELETE", &namespace_controller, new, old).await,
        Ok(())
    );
    let (new, old) = disable_ann();
    assert_eq!(f.decide(USER, "UPDATE", &override_cert, new, old).await, Ok(()));
    assert_eq!(f.lister.calls(), 0, "exempt requests never list");
}

#[tokio::test]
async fn an_object_being_deleted_is_checked_like_any_other_and_its_release_passes() {
    let f = Fakes::listing(&[("ann", &["admin"], false)]);
    let mut stored = user("ann", &["admin"], false);
    stored["metadata"]["deletionTimestamp"] = json!("2026-11-29T10:00:00Z");
    stored["metadata"]["finalizers"] = json!(["example.com/cleanup"]);
    let mut released = stored.clone();
    released["metadata"]["finalizers"] = json!([]);
    assert_eq!(
        f.decide(USER, "UPDATE", &ROOT, released.clone(), stored.clone())
            .await,
        Ok(())
    );
    assert_eq!(f.lister.calls(), 0, "a release changes no role: no list");
    released["spec"]["disabled"] = json!(true);
    assert_eq!(
        f.decide(USER, "UPDATE", &ROOT, released, stored.clone()).await,
        Err(format!("spec.disabled: {LAST_ADMIN_ANN}"))
    );
    assert_eq!(
        f.decide(USER, "DELETE", &ROOT, Value::Null, stored).await,
        Err(LAST_ADMIN_ANN.to_owned())
    );
}

#[tokio::test]
async fn a_cache_that_has_not_synced_refuses_the_change() {
    let f = Fakes::new(FakeReviewer::default(), FakeLister::failing());
    let (new, old) = delete_ann();
    assert_denied(
        f.decide(USER, "DELETE", &ROOT, new, old).await,
        &[
            Denied::Contains("the IchorUser objects are not known yet"),
            Denied::Contains("refused until it can be checked"),
        ],
    );
}

// === The objects ===

#[tokio::test]
async fn a_missing_or_undecodable_object_is_refused() {
    let f = Fakes::none();
    assert_eq!(
        f.decide(USER, "CREATE", &ROOT, Value::Null, Value::Null).await,
        Err("request.object: required: the IchorUser is missing".to_owned())
    );
    let mut bad = user("ann", &[], false);
    bad["spec"]["roles"] = json!("admin");
    assert_denied(
        f.decide(USER, "CREATE", &ROOT, bad, Value::Null).await,
        &[Denied::StartsWith(
            "request.object: not a valid IchorUser: spec.roles",
        )],
    );
}

// === The namespace IchorUsers live in ===

/// A deployment tool's ServiceAccount: no Ichor identity, so neither the grant nor the act-on
/// rule limits it.
const DEPLOYER: Who<'static> = Who {
    user: "system:serviceaccount:ops:deployer",
    groups: &["system:serviceaccounts", "system:authenticated"],
};

/// The refusal of a user written in `namespace` while users live in `home`.
fn elsewhere(namespace: &str, home: &str) -> String {
    format!(
        "metadata.namespace: IchorUsers live in the namespace {home:?} only, where Ichor is installed; one in \
         {namespace:?} would be read by nothing (no sign-in, no role): create it in {home:?}"
    )
}

/// The review of `operation` by `who` with the objects and the request in `namespace`.
fn in_namespace(namespace: &str, operation: &str, who: &Who<'_>, new: Value, old: Value) -> AdmissionRequest {
    let mut review = fixtures::review(USER, operation, who, new, old);
    review["request"]["namespace"] = json!(namespace);
    for which in ["object", "oldObject"] {
        if review["request"][which].is_object() {
            review["request"][which]["metadata"]["namespace"] = json!(namespace);
        }
    }
    review::parse(review.to_string().as_bytes()).expect("a valid review")
}

async fn decide_in(state: &AdmissionState, request: &AdmissionRequest) -> Result<(), String> {
    outcome(webhooks::users::review(state, request).await)
}

#[tokio::test]
async fn a_user_created_outside_ichor_system_is_refused_saying_where_users_live() {
    let f = Fakes::none();
    for who in [&ROOT, &DEPLOYER] {
        let create = in_namespace(
            "default",
            "CREATE",
            who,
            user("ann", &["viewer"], false),
            Value::Null,
        );
        assert_eq!(
            decide_in(&f.state, &create).await,
            Err(elsewhere("default", NAMESPACE)),
            "create by {}",
            who.user
        );
    }
    // Refused before anything is read: no requester, cache or credentials read.
    assert_eq!(f.lister.calls(), 0);
    assert!(f.lister.requester_reads().is_empty());
    // The same writes in ichor-system pass (the deployer is limited by RBAC only).
    let create = in_namespace(
        NAMESPACE,
        "CREATE",
        &DEPLOYER,
        user("ann", &["viewer"], false),
        Value::Null,
    );
    assert_eq!(decide_in(&f.state, &create).await, Ok(()));
}

#[tokio::test]
async fn a_stray_user_elsewhere_can_still_be_deleted_orphaned_and_its_finalizers_removed() {
    let f = Fakes::none();
    // The garbage collector orphaning it (its owner deleted with propagationPolicy=Orphan): the
    // update removes its owner references and is not refused for where the user is.
    let mut owned = user("ann", &["viewer"], false);
    owned["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "u-1"}]);
    let mut orphaned = owned.clone();
    orphaned["metadata"]["ownerReferences"] = json!([]);
    let orphan = in_namespace("default", "UPDATE", &DEPLOYER, orphaned, owned);
    assert_eq!(
        decide_in(&f.state, &orphan).await,
        Ok(()),
        "an update of a stray user is not refused for its namespace"
    );
    let delete = in_namespace(
        "default",
        "DELETE",
        &DEPLOYER,
        Value::Null,
        user("ann", &["viewer"], false),
    );
    assert_eq!(decide_in(&f.state, &delete).await, Ok(()));
    let mut held = user("ann", &["viewer"], false);
    held["metadata"]["deletionTimestamp"] = json!("2026-12-01T00:00:00Z");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    let mut released = held.clone();
    released["metadata"]["finalizers"] = json!([]);
    let update = in_namespace("default", "UPDATE", &DEPLOYER, released, held);
    assert_eq!(decide_in(&f.state, &update).await, Ok(()));
}

#[tokio::test]
async fn users_live_in_the_controllers_own_namespace_when_it_runs_in_another() {
    let state = AdmissionState::new(
        Arc::new(FakeReviewer::default()),
        Arc::new(FakeLister::default()),
        controller_identity("ichor-lab"),
    )
    .with_users_namespace("ichor-lab");
    assert_eq!(state.users_namespace(), "ichor-lab");
    let new = || user("ann", &["viewer"], false);
    let home = in_namespace("ichor-lab", "CREATE", &DEPLOYER, new(), Value::Null);
    assert_eq!(decide_in(&state, &home).await, Ok(()));
    let system = in_namespace(NAMESPACE, "CREATE", &DEPLOYER, new(), Value::Null);
    assert_eq!(
        decide_in(&state, &system).await,
        Err(elsewhere(NAMESPACE, "ichor-lab"))
    );
}
