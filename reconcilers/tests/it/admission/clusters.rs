//! `TalosCluster`: `spec.authentication` (static checks, then `update` on
//! `talosclusters/authentication`) and the Cilium values (static checks, then `update` on
//! `talosclusters/cilium-values`), both ratcheted.

use std::collections::BTreeMap;

use ichor_controller::admission::access::ichor_attributes;
use ichor_controller::admission::fixtures::{FakeLister, FakeReviewer, NAMESPACE, OPERATOR, ROOT, cluster};
use serde_json::{Value, json};

use super::{CLUSTER, Denied, Fakes, assert_denied};

const AUTHENTICATION: (&str, &str) = ("update", "talosclusters/authentication");
const CILIUM_VALUES: (&str, &str) = ("update", "talosclusters/cilium-values");

fn auth_spec(contract: Option<&str>, auth: Value) -> Value {
    let mut spec = json!({"endpoint": "https://10.0.0.1:6443", "authentication": auth});
    if let Some(c) = contract {
        spec["versionContract"] = json!(c);
    }
    spec
}

fn ichor_auth() -> Value {
    json!({"ichor": {"enabled": true, "url": "https://ichor.example.com"}})
}

/// A cluster on contract v1.14 whose authentication is Ichor's.
fn ichor_cluster() -> Value {
    cluster(auth_spec(Some("v1.14"), ichor_auth()))
}

fn cni_spec(values: Value, preset: &str) -> Value {
    json!({"versionContract": "v1.14", "cni": {"preset": preset, "cilium": {"values": values}}})
}

// === spec.authentication ===

#[tokio::test]
async fn setting_authentication_needs_update_on_talosclusters_authentication() {
    let f = Fakes::granting(&[AUTHENTICATION]);
    assert_eq!(
        f.decide(CLUSTER, "CREATE", &ROOT, ichor_cluster(), Value::Null)
            .await,
        Ok(())
    );
    let calls = f.reviewer.calls();
    assert_eq!(calls.len(), 1);
    let (who, attrs) = &calls[0];
    assert_eq!(who.username.as_deref(), Some("ichor:root"));
    assert_eq!(who.uid.as_deref(), Some("u-1234"));
    assert_eq!(
        who.groups.as_deref(),
        Some(&["ichor:admin".to_owned(), "system:authenticated".to_owned()][..])
    );
    assert_eq!(
        who.extra,
        Some(BTreeMap::from([(
            "authentication.kubernetes.io/credential-id".to_owned(),
            vec!["JTI=abc".to_owned()]
        )]))
    );
    assert_eq!(
        attrs,
        &ichor_attributes("update", "talosclusters", "authentication", NAMESPACE, "prod")
    );
}

#[tokio::test]
async fn refuses_an_authentication_change_without_the_right() {
    let f = Fakes::none();
    let old = ichor_cluster();
    let new = cluster(auth_spec(
        Some("v1.14"),
        json!({"external": [{"issuerURL": "https://idp.example.com", "audiences": ["k8s"]}]}),
    ));
    assert_eq!(
        f.decide(CLUSTER, "UPDATE", &OPERATOR, new, old.clone()).await,
        Err("spec.authentication: changing it needs verb \"update\" on talosclusters/authentication in namespace \
             \"ichor-system\", which user \"ichor:olga\" does not hold"
            .to_owned())
    );
    // Removing it is a change too.
    let mut removed = old.clone();
    removed["spec"].as_object_mut().unwrap().remove("authentication");
    assert_denied(
        f.decide(CLUSTER, "UPDATE", &OPERATOR, removed, old).await,
        &[Denied::Contains("talosclusters/authentication")],
    );
}

#[tokio::test]
async fn refuses_authentication_below_contract_v1_14_or_without_a_contract() {
    let f = Fakes::granting(&[AUTHENTICATION]);
    let cases = [
        (
            Some("v1.13"),
            "spec.versionContract: v1.13 is too old: structured authentication needs contract v1.14 or later; \
             raise spec.versionContract or remove spec.authentication",
        ),
        (
            None,
            "spec.versionContract: required: structured authentication needs contract v1.14 or later",
        ),
    ];
    for (contract, message) in cases {
        let new = cluster(auth_spec(contract, ichor_auth()));
        assert_eq!(
            f.decide(CLUSTER, "CREATE", &ROOT, new, Value::Null).await,
            Err(message.to_owned())
        );
    }
    assert!(
        f.reviewer.calls().is_empty(),
        "static refusals come before the access review"
    );
}

#[tokio::test]
async fn refuses_an_external_prefix_under_ichor() {
    let f = Fakes::granting(&[AUTHENTICATION]);
    let auth = json!({"external": [{"issuerURL": "https://idp.example.com", "audiences": ["k8s"], "usernamePrefix": "ichor:"}]});
    assert_eq!(
        f.decide(CLUSTER, "CREATE", &ROOT, cluster(auth_spec(Some("v1.15"), auth)), Value::Null)
            .await,
        Err("spec.authentication.external[0].usernamePrefix: \"ichor:\" is not allowed: the prefix \"ichor:\" belongs \
             to Ichor's own users and groups; choose another, such as \"oidc:\""
            .to_owned())
    );
}

#[tokio::test]
async fn refuses_an_external_prefix_a_provider_name_could_complete_to_ichor_or_system() {
    let f = Fakes::granting(&[AUTHENTICATION]);
    for (field, prefix, reserved) in [
        ("groupsPrefix", "ichor", "ichor:admin"),
        ("usernamePrefix", "ich", "ichor:admin"),
        ("groupsPrefix", "sys", "system:masters"),
    ] {
        let auth = json!({"external": [{"issuerURL": "https://idp.example.com", "audiences": ["k8s"], field: prefix}]});
        assert_denied(
            f.decide(
                CLUSTER,
                "CREATE",
                &ROOT,
                cluster(auth_spec(Some("v1.14"), auth)),
                Value::Null,
            )
            .await,
            &[
                Denied::Contains(&format!(
                    "spec.authentication.external[0].{field}: \"{prefix}\" is not allowed"
                )),
                Denied::Contains(reserved),
            ],
        );
    }
    assert!(
        f.reviewer.calls().is_empty(),
        "static refusals come before the access review"
    );
}

#[tokio::test]
async fn an_update_that_leaves_authentication_alone_is_neither_checked_nor_reviewed() {
    let f = Fakes::none();
    // Stored before the rule existed: a refused prefix. Unrelated edits still pass (ratcheting).
    let auth = json!({"external": [{"issuerURL": "https://idp.example.com", "audiences": ["k8s"], "groupsPrefix": ""}]});
    let old = cluster(auth_spec(Some("v1.14"), auth));
    let mut new = old.clone();
    new["spec"]["talosVersion"] = json!("v1.11.2");
    assert_eq!(
        f.decide(CLUSTER, "UPDATE", &OPERATOR, new, old.clone()).await,
        Ok(())
    );
    assert!(f.reviewer.calls().is_empty());
    // Changing the contract re-runs the static checks.
    let mut bumped = old.clone();
    bumped["spec"]["versionContract"] = json!("v1.15");
    assert_denied(
        f.decide(CLUSTER, "UPDATE", &OPERATOR, bumped, old).await,
        &[Denied::Contains("groupsPrefix")],
    );
}

#[tokio::test]
async fn a_failed_access_review_refuses_saying_authorization_could_not_be_checked() {
    let f = Fakes::new(FakeReviewer::failing(), FakeLister::default());
    assert_denied(
        f.decide(CLUSTER, "CREATE", &ROOT, ichor_cluster(), Value::Null)
            .await,
        &[
            Denied::StartsWith("spec.authentication: "),
            Denied::Contains("authorization could not be checked"),
        ],
    );
}

// === Cilium values ===

#[tokio::test]
async fn changing_the_cilium_values_needs_update_on_talosclusters_cilium_values() {
    let old = cluster(cni_spec(json!({"hubble": {"enabled": false}}), "cilium"));
    let new = cluster(cni_spec(json!({"hubble": {"enabled": true}}), "cilium"));
    let admin = Fakes::granting(&[CILIUM_VALUES]);
    assert_eq!(
        admin
            .decide(CLUSTER, "UPDATE", &ROOT, new.clone(), old.clone())
            .await,
        Ok(())
    );
    assert_eq!(
        admin.reviewer.calls()[0].1,
        ichor_attributes("update", "talosclusters", "cilium-values", NAMESPACE, "prod")
    );
    let operator = Fakes::none();
    assert_eq!(
        operator.decide(CLUSTER, "UPDATE", &OPERATOR, new, old).await,
        Err("spec.cni.cilium.values: changing the Cilium values needs verb \"update\" on \
             talosclusters/cilium-values in namespace \"ichor-system\", which user \"ichor:olga\" does not hold"
            .to_owned())
    );
}

#[tokio::test]
async fn refuses_invalid_cilium_values_with_the_validators_message() {
    let f = Fakes::granting(&[CILIUM_VALUES]);
    let new = cluster(cni_spec(json!({"totallyUnknownKey": 1}), "cilium"));
    assert_eq!(
        f.decide(CLUSTER, "CREATE", &ROOT, new, Value::Null).await,
        Err(
            "spec.cni.cilium.values.totallyUnknownKey is not a value of the Cilium 1.20.0 chart (the chart \
             ignores unknown keys, so a typo would pass silently)"
                .to_owned()
        )
    );
    assert!(
        f.reviewer.calls().is_empty(),
        "invalid values are refused before the access review"
    );
    // An Ichor-owned key and an unknown tunnel mode, both in the one message.
    let mut spec = cni_spec(json!({"kubeProxyReplacement": true}), "cilium");
    spec["cni"]["tunnel"] = json!("ipip");
    assert_denied(
        f.decide(CLUSTER, "CREATE", &ROOT, cluster(spec), Value::Null)
            .await,
        &[
            Denied::Contains("spec.cni.tunnel is \"ipip\""),
            Denied::Contains("; spec.cni.cilium.values.kubeProxyReplacement "),
        ],
    );
}

#[tokio::test]
async fn stored_invalid_values_do_not_block_unrelated_updates() {
    let f = Fakes::none();
    let old = cluster(cni_spec(json!({"totallyUnknownKey": 1}), "cilium"));
    let mut new = old.clone();
    new["spec"]["talosVersion"] = json!("v1.11.2");
    assert_eq!(
        f.decide(CLUSTER, "UPDATE", &OPERATOR, new, old.clone()).await,
        Ok(())
    );
    assert!(f.reviewer.calls().is_empty(), "unchanged values need no right");
    // Changing the tunnel mode re-validates the stored values.
    let mut tunnel = old.clone();
    tunnel["spec"]["cni"]["tunnel"] = json!("geneve");
    assert_denied(
        f.decide(CLUSTER, "UPDATE", &OPERATOR, tunnel, old).await,
        &[Denied::Contains("totallyUnknownKey")],
    );
}

#[tokio::test]
async fn the_values_checks_are_skipped_for_preset_unmanaged_but_the_right_is_not() {
    let new = cluster(cni_spec(json!({"totallyUnknownKey": 1}), "unmanaged"));
    let granted = Fakes::granting(&[CILIUM_VALUES]);
    assert_eq!(
        granted
            .decide(CLUSTER, "CREATE", &ROOT, new.clone(), Value::Null)
            .await,
        Ok(())
    );
    assert_denied(
        Fakes::none()
            .decide(CLUSTER, "CREATE", &ROOT, new, Value::Null)
            .await,
        &[Denied::Contains("cilium-values")],
    );
}

// === Both ===

#[tokio::test]
async fn a_change_of_authentication_and_values_needs_both_rights() {
    let mut spec = cni_spec(json!({"hubble": {"enabled": true}}), "cilium");
    spec["authentication"] = ichor_auth();
    let new = cluster(spec);
    let both = Fakes::granting(&[AUTHENTICATION, CILIUM_VALUES]);
    assert_eq!(
        both.decide(CLUSTER, "CREATE", &ROOT, new.clone(), Value::Null)
            .await,
        Ok(())
    );
    assert_eq!(both.reviewer.calls().len(), 2);
    let cases = [
        (Fakes::granting(&[AUTHENTICATION]), "spec.cni.cilium.values: "),
        (Fakes::none(), "spec.authentication: "),
    ];
    for (fakes, field) in cases {
        assert_denied(
            fakes
                .decide(CLUSTER, "CREATE", &ROOT, new.clone(), Value::Null)
                .await,
            &[Denied::StartsWith(field)],
        );
    }
}
