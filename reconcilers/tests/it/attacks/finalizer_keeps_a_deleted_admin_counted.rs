//! Removing the last admin behind a finalizer, and through any ServiceAccount: the attacker puts
//! a finalizer on admin A and deletes A (allowed: B is an enabled admin), so A stays as a
//! terminating object that still looks like an enabled admin; then it disables, demotes or
//! deletes B, the last real admin, which the rule allowed because it counted A. A terminating
//! user is no candidate any more, and an update of one is checked like any other. Separately,
//! the chart's match condition and the handler exempted every `system:` identity, so any
//! ServiceAccount with `ichorusers` rights (a CI robot's, a compromised pod's) could disable the
//! last admin; now only the override certificate, the namespace controller and the garbage
//! collector are exempt.

use ichor_controller::admission::fixtures::{FakeLister, FakeReviewer, ROOT, Who, user, user_object};
use ichor_controller::admission::users::enabled_admins_besides;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use ichor_controller::admission::users::KIND as USER;

use crate::admission::Fakes;

const LAST_ADMIN_B: &str =
    "cannot disable, demote or delete the last enabled admin \"b\": make another user an enabled admin first";

/// Admin `a`, held by a finalizer after its delete.
fn terminating_a() -> ichor_renderers::crd::IchorUser {
    let mut a = user_object("a", &["admin"], false);
    a.metadata.deletion_timestamp = Some(Time("2026-11-29T10:00:00Z".parse().unwrap()));
    a.metadata.finalizers = Some(vec!["example.com/hold".to_owned()]);
    a
}

fn fakes() -> Fakes {
    Fakes::new(
        FakeReviewer::default(),
        FakeLister::of(vec![terminating_a(), user_object("b", &["admin"], false)]),
    )
}

fn terminating(mut object: Value) -> Value {
    object["metadata"]["deletionTimestamp"] = json!("2026-11-29T10:00:00Z");
    object["metadata"]["finalizers"] = json!(["example.com/hold"]);
    object
}

#[tokio::test]
async fn with_the_other_admin_held_by_a_finalizer_the_last_admin_cannot_be_disabled_demoted_or_deleted() {
    let f = fakes();
    let b = user("b", &["admin"], false);
    let changes = [
        (
            "disable",
            "UPDATE",
            user("b", &["admin"], true),
            "spec.disabled: ",
        ),
        ("demote", "UPDATE", user("b", &["viewer"], false), "spec.roles: "),
        ("delete", "DELETE", Value::Null, ""),
    ];
    for (what, operation, new, field) in changes {
        assert_eq!(
            f.decide(USER, operation, &ROOT, new, b.clone()).await,
            Err(format!("{field}{LAST_ADMIN_B}")),
            "{what}"
        );
    }
    assert!(
        enabled_admins_besides("b", &[std::sync::Arc::new(terminating_a())]).is_empty(),
        "a terminating admin is no candidate"
    );
}

#[tokio::test]
async fn an_update_of_a_terminating_admin_is_checked_like_any_other() {
    let f = Fakes::new(FakeReviewer::default(), FakeLister::of(vec![terminating_a()]));
    let stored = terminating(user("a", &["admin"], false));
    // Releasing the finalizer changes no role: allowed.
    let mut released = stored.clone();
    released["metadata"]["finalizers"] = json!([]);
    assert_eq!(
        f.decide(USER, "UPDATE", &ROOT, released.clone(), stored.clone())
            .await,
        Ok(())
    );
    // Disabling it while it is the only admin is refused like any other disable.
    released["spec"]["disabled"] = json!(true);
    assert!(
        f.decide(USER, "UPDATE", &ROOT, released, stored)
            .await
            .unwrap_err()
            .starts_with("spec.disabled: cannot disable, demote or delete the last enabled admin \"a\"")
    );
}

#[tokio::test]
async fn a_service_account_is_held_to_the_last_admin_rule_unless_it_is_the_namespace_controller_or_the_gc() {
    let f = Fakes::listing(&[("b", &["admin"], false)]);
    let disable_b = || (user("b", &["admin"], true), user("b", &["admin"], false));
    let robot = Who {
        user: "system:serviceaccount:ci:deployer",
        groups: &[
            "system:serviceaccounts",
            "system:serviceaccounts:ci",
            "system:authenticated",
        ],
    };
    let (new, old) = disable_b();
    assert_eq!(
        f.decide(USER, "UPDATE", &robot, new, old).await,
        Err(format!("spec.disabled: {LAST_ADMIN_B}"))
    );
    let gc = Who {
        user: "system:serviceaccount:kube-system:generic-garbage-collector",
        groups: &["system:serviceaccounts", "system:authenticated"],
    };
    assert_eq!(
        f.decide(USER, "DELETE", &gc, Value::Null, user("b", &["admin"], false))
            .await,
        Ok(())
    );
}
