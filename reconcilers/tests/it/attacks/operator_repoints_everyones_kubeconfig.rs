//! Pointing every user's `kubectl` at a server the attacker runs, as an operator: without
//! `kubeAPIServerURL`, the issuer writes the cluster's `spec.endpoint` into every kubeconfig it
//! serves, and the built-in operator role may `update` `TalosCluster`s. A change of
//! `spec.endpoint` needs `update` on `talosclusters/endpoint`, which only `ichor-admin` holds;
//! creating a cluster with its endpoint needs nothing more than the create itself.

use ichor_controller::admission::clusters::{self, KIND};
use ichor_controller::admission::fixtures::{self, FakeLister, FakeReviewer, OPERATOR, ROOT, Who, cluster};
use serde_json::{Value, json};

use crate::admission::{Fakes, outcome};

const ENDPOINT: (&str, &str) = ("update", "talosclusters/endpoint");

fn at(endpoint: Value) -> Value {
    cluster(json!({"versionContract": "v1.14", "endpoint": endpoint}))
}

async fn decide(f: &Fakes, operation: &str, who: &Who<'_>, new: Value, old: Value) -> Result<(), String> {
    let request = fixtures::request(KIND, operation, who, new, old).unwrap();
    outcome(clusters::review(&f.state, &request).await)
}

/// RBAC as the chart's roles give it to an operator (no right) and to an admin (the right).
fn rbac_of(who: &Who<'_>) -> Fakes {
    let rights: &[(&str, &str)] = if who.groups.contains(&"ichor:admin") {
        &[ENDPOINT]
    } else {
        &[]
    };
    Fakes::new(FakeReviewer::granting(rights), FakeLister::default())
}

#[tokio::test]
async fn an_operator_may_not_change_the_cluster_endpoint() {
    let f = rbac_of(&OPERATOR);
    let old = at(json!("https://10.0.0.1:6443"));
    let mut removed = old.clone();
    removed["spec"].as_object_mut().unwrap().remove("endpoint");
    for new in [
        at(json!("https://evil.example:6443")),
        at(json!("https://10.0.0.1:6443/")),
        removed,
    ] {
        let refusal = decide(&f, "UPDATE", &OPERATOR, new, old.clone())
            .await
            .unwrap_err();
        assert_eq!(
            refusal,
            "spec.endpoint: changing the control-plane endpoint (the server of Ichor's kubeconfigs) needs \
             verb \"update\" on talosclusters/endpoint in namespace \"ichor-system\", which user \
             \"ichor:olga\" does not hold"
        );
    }
    let (_, asked) = f.reviewer.calls().pop().expect("a review");
    assert_eq!(asked.resource.as_deref(), Some("talosclusters"));
    assert_eq!(asked.subresource.as_deref(), Some("endpoint"));
    assert_eq!(asked.name.as_deref(), Some("prod"));
}

#[tokio::test]
async fn an_admin_may_change_it_and_a_create_or_other_fields_need_nothing() {
    let old = at(json!("https://10.0.0.1:6443"));
    assert_eq!(
        decide(
            &rbac_of(&ROOT),
            "UPDATE",
            &ROOT,
            at(json!("https://10.0.0.2:6443")),
            old.clone()
        )
        .await,
        Ok(())
    );
    let f = rbac_of(&OPERATOR);
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"] = json!({"team": "platform"});
    assert_eq!(
        decide(&f, "UPDATE", &OPERATOR, relabelled, old.clone()).await,
        Ok(())
    );
    assert_eq!(decide(&f, "CREATE", &OPERATOR, old, Value::Null).await, Ok(()));
    assert!(f.reviewer.calls().is_empty(), "no right was asked for");
}
