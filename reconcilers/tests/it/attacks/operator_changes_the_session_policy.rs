//! Changing every user's session policy and kubeconfig server as an operator: the built-in
//! operator role may `update` `IchorInstallation`s, so it could set `spec.users` (a 30-day
//! refresh lifetime, `kubeAPIServerURL` pointing every user's `kubectl` at a server it runs).
//! A change of `spec.users` needs `update` on `ichorinstallations/users`, which only
//! `ichor-admin` holds; the rest of the object needs nothing here.

use ichor_controller::admission::fixtures::{self, FakeLister, FakeReviewer, OPERATOR, ROOT, Who};
use ichor_controller::admission::installations::{self, KIND};
use serde_json::{Value, json};

use crate::admission::{Fakes, outcome};

fn installation(users: Value) -> Value {
    json!({
        "apiVersion": "ichor.maesh.dev/v1alpha1",
        "kind": KIND,
        "metadata": {"name": "ichor"},
        "spec": {"users": users, "other": {"kept": true}}
    })
}

async fn decide(f: &Fakes, operation: &str, who: &Who<'_>, new: Value, old: Value) -> Result<(), String> {
    let request = fixtures::request(KIND, operation, who, new, old).unwrap();
    outcome(installations::review(&f.state, &request).await)
}

/// RBAC as the chart's roles give it to an operator (no right) and to an admin (the right).
fn rbac_of(who: &Who<'_>) -> Fakes {
    let rights: &[(&str, &str)] = if who.groups.contains(&"ichor:admin") {
        &[("update", "ichorinstallations/users")]
    } else {
        &[]
    };
    Fakes::new(FakeReviewer::granting(rights), FakeLister::default())
}

#[tokio::test]
async fn an_operator_may_not_change_the_session_policy_or_the_kubeconfig_server() {
    let f = rbac_of(&OPERATOR);
    let old = installation(json!({"tokenTTL": "5m", "refreshLifetime": "12h"}));
    let longer = installation(json!({"tokenTTL": "5m", "refreshLifetime": "720h"}));
    let elsewhere = installation(
        json!({"tokenTTL": "5m", "refreshLifetime": "12h", "kubeAPIServerURL": "https://evil.example:6443"}),
    );
    for new in [longer, elsewhere, installation(Value::Null)] {
        let refusal = decide(&f, "UPDATE", &OPERATOR, new, old.clone())
            .await
            .unwrap_err();
        assert_eq!(
            refusal,
            "spec.users: changing the session policy, the second-factor policy and the kubeconfig server needs verb \"update\" on \
             ichorinstallations/users, which user \"ichor:olga\" does not hold"
        );
    }
    let refusal = decide(&f, "CREATE", &OPERATOR, old, Value::Null).await;
    assert!(refusal.is_err(), "setting it on create is a change too");
    let (_, asked) = f.reviewer.calls().pop().expect("a review");
    assert_eq!(asked.resource.as_deref(), Some("ichorinstallations"));
    assert_eq!(asked.subresource.as_deref(), Some("users"));
    assert_eq!(asked.namespace, None, "IchorInstallation is cluster-scoped");
}

#[tokio::test]
async fn an_admin_may_change_it_and_other_fields_need_nothing() {
    let old = installation(json!({"refreshLifetime": "12h"}));
    let new = installation(json!({"refreshLifetime": "24h"}));
    assert_eq!(
        decide(&rbac_of(&ROOT), "UPDATE", &ROOT, new, old.clone()).await,
        Ok(())
    );
    let f = rbac_of(&OPERATOR);
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"] = json!({"team": "platform"});
    relabelled["spec"]["other"] = json!({"kept": false});
    assert_eq!(decide(&f, "UPDATE", &OPERATOR, relabelled, old).await, Ok(()));
}
