//! Replacing the session policy in force without touching `spec.users`: the issuer, the
//! controller and the CLI use the `spec.users` of the first `IchorInstallation` by name, so a
//! site role with `create` or `delete` on `ichorinstallations` (but not `update` on
//! `ichorinstallations/users`) could create `aaa` without `spec.users` (every default comes back:
//! no second factor required, the default lifetimes) or delete the installation that carries
//! it. The built-in operator role's `update` could hand it to the garbage collector instead, by
//! giving it an owner that does not exist. Every create and delete, and every write giving owner
//! references, needs `update` on `ichorinstallations/users`.

use ichor_controller::admission::fixtures::{self, FakeLister, FakeReviewer, OPERATOR, ROOT, Who};
use ichor_controller::admission::installations::{self, KIND};
use serde_json::{Value, json};

use crate::admission::{Fakes, outcome};

const USERS_RIGHT: (&str, &str) = ("update", "ichorinstallations/users");

fn installation(name: &str, users: Option<Value>) -> Value {
    let mut object = json!({
        "apiVersion": "ichor.maesh.dev/v1alpha1",
        "kind": KIND,
        "metadata": {"name": name},
        "spec": {}
    });
    if let Some(users) = users {
        object["spec"]["users"] = users;
    }
    object
}

/// The installation in force: admins need a second factor, sessions are short.
fn in_force() -> Value {
    installation(
        "ichor",
        Some(
            json!({"tokenTTL": "5m", "refreshLifetime": "1h", "secondFactor": {"roles": {"admin": "required"}}}),
        ),
    )
}

async fn decide(f: &Fakes, operation: &str, who: &Who<'_>, new: Value, old: Value) -> Result<(), String> {
    let request = fixtures::request(KIND, operation, who, new, old).unwrap();
    outcome(installations::review(&f.state, &request).await)
}

/// RBAC as a site might give it: both may create, update and delete installations (the webhook
/// does not ask that: the apiserver does), and only the admin holds the users right.
fn rbac_of(who: &Who<'_>) -> Fakes {
    let rights: &[(&str, &str)] = if who.groups.contains(&"ichor:admin") {
        &[USERS_RIGHT]
    } else {
        &[]
    };
    Fakes::new(FakeReviewer::granting(rights), FakeLister::default())
}

fn needs(act: &str) -> String {
    format!(
        "spec.users: {act} (the first IchorInstallation by name holds the spec.users in force: every user's \
         session policy, second-factor policy and kubeconfig server) needs verb \"update\" on \
         ichorinstallations/users, which user \"ichor:olga\" does not hold"
    )
}

#[tokio::test]
async fn an_operator_may_not_create_an_installation_that_sorts_first_without_spec_users() {
    let f = rbac_of(&OPERATOR);
    let refusal = decide(&f, "CREATE", &OPERATOR, installation("aaa", None), Value::Null).await;
    assert_eq!(refusal, Err(needs("creating IchorInstallation \"aaa\"")));
    // Whatever the name and the spec: whether it sorts first depends on the others.
    for (name, users) in [
        ("zzz", None),
        ("aaa", Some(json!({}))),
        ("aaa", Some(Value::Null)),
    ] {
        let refusal = decide(&f, "CREATE", &OPERATOR, installation(name, users), Value::Null).await;
        assert_eq!(
            refusal,
            Err(needs(&format!("creating IchorInstallation {name:?}")))
        );
    }
    let (_, asked) = f.reviewer.calls().pop().expect("a review");
    assert_eq!(asked.verb.as_deref(), Some("update"));
    assert_eq!(asked.resource.as_deref(), Some("ichorinstallations"));
    assert_eq!(asked.subresource.as_deref(), Some("users"));
    assert_eq!(asked.name.as_deref(), Some("aaa"));
    assert_eq!(asked.namespace, None, "IchorInstallation is cluster-scoped");
}

#[tokio::test]
async fn an_operator_may_not_delete_the_installation_in_force() {
    let f = rbac_of(&OPERATOR);
    let refusal = decide(&f, "DELETE", &OPERATOR, Value::Null, in_force()).await;
    assert_eq!(refusal, Err(needs("deleting IchorInstallation \"ichor\"")));
    // Nor one without spec.users: the one in force may be the next by name.
    let refusal = decide(&f, "DELETE", &OPERATOR, Value::Null, installation("aaa", None)).await;
    assert_eq!(refusal, Err(needs("deleting IchorInstallation \"aaa\"")));
    let (_, asked) = f.reviewer.calls().pop().expect("a review");
    assert_eq!(asked.subresource.as_deref(), Some("users"));
    assert_eq!(asked.name.as_deref(), Some("aaa"));
}

#[tokio::test]
async fn an_operator_may_not_hand_the_installation_to_the_garbage_collector() {
    let f = rbac_of(&OPERATOR);
    let owned = |uid: &str| {
        let mut object = in_force();
        object["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "v1", "kind": "Namespace", "name": "gone", "uid": uid
        }]);
        object
    };
    let refusal = decide(&f, "UPDATE", &OPERATOR, owned("u-1"), in_force())
        .await
        .unwrap_err();
    assert!(
        refusal.starts_with(
            "metadata.ownerReferences: giving IchorInstallation \"ichor\" owner references (the garbage \
             collector deletes it once its owners are gone)"
        ),
        "{refusal}"
    );
    assert!(
        refusal.ends_with(
            "needs verb \"update\" on ichorinstallations/users, which user \"ichor:olga\" does not hold"
        ),
        "{refusal}"
    );
    assert!(
        decide(&f, "UPDATE", &OPERATOR, owned("u-2"), owned("u-1"))
            .await
            .is_err()
    );
    // Taking them away, or keeping them as they are, is free.
    assert_eq!(
        decide(&f, "UPDATE", &OPERATOR, in_force(), owned("u-1")).await,
        Ok(())
    );
    let mut relabelled = owned("u-1");
    relabelled["metadata"]["labels"] = json!({"team": "platform"});
    assert_eq!(
        decide(&f, "UPDATE", &OPERATOR, relabelled, owned("u-1")).await,
        Ok(())
    );
}

#[tokio::test]
async fn an_admin_may_create_and_delete_installations_and_give_them_owners() {
    let f = rbac_of(&ROOT);
    assert_eq!(
        decide(&f, "CREATE", &ROOT, installation("aaa", None), Value::Null).await,
        Ok(())
    );
    assert_eq!(decide(&f, "CREATE", &ROOT, in_force(), Value::Null).await, Ok(()));
    assert_eq!(decide(&f, "DELETE", &ROOT, Value::Null, in_force()).await, Ok(()));
    let mut owned = in_force();
    owned["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "v1", "kind": "Namespace", "name": "ichor-system", "uid": "u-1"}]);
    assert_eq!(decide(&f, "UPDATE", &ROOT, owned, in_force()).await, Ok(()));
    assert_eq!(f.reviewer.calls().len(), 4, "each asked the users right once");
}

#[tokio::test]
async fn an_update_that_changes_neither_spec_users_nor_owners_asks_nothing() {
    let f = rbac_of(&OPERATOR);
    let mut relabelled = in_force();
    relabelled["metadata"]["labels"] = json!({"team": "platform"});
    relabelled["spec"]["other"] = json!({"kept": true});
    assert_eq!(
        decide(&f, "UPDATE", &OPERATOR, relabelled, in_force()).await,
        Ok(())
    );
    assert!(f.reviewer.calls().is_empty(), "no review asked");
    // A failing review refuses what needs it (fail closed), and only that.
    let failing = Fakes::new(FakeReviewer::failing(), FakeLister::default());
    let refusal = decide(&failing, "DELETE", &OPERATOR, Value::Null, in_force())
        .await
        .unwrap_err();
    assert!(
        refusal.starts_with("spec.users: deleting IchorInstallation \"ichor\"")
            && refusal.contains("authorization could not be checked"),
        "{refusal}"
    );
}

#[tokio::test]
async fn connect_is_not_admitted() {
    let f = rbac_of(&ROOT);
    let refusal = decide(&f, "CONNECT", &ROOT, in_force(), Value::Null).await;
    assert_eq!(
        refusal,
        Err("request.operation: \"CONNECT\" is not admitted for IchorInstallation; only CREATE, UPDATE and DELETE are".to_owned())
    );
}
