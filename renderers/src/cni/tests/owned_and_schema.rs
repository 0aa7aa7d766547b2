//! The keys Ichor owns, the chart's JSON schema and the chart's render-time rules.

use super::*;

// --- owned keys ---

#[test]
fn refuses_every_ichor_owned_key_whatever_its_value() {
    for (dotted, _) in owned::OWNED_KEYS {
        for leaf in [json!("x"), json!(null), json!(false)] {
            let mut values = leaf.clone();
            for key in dotted.rsplit('.') {
                values = json!({ key: values });
            }
            let found = check(values);
            let field = path::values_key(dotted);
            let owned: Vec<_> = found
                .iter()
                .filter(|v| v.message.contains("owned by Ichor"))
                .collect();
            assert_eq!(owned.len(), 1, "{dotted} = {leaf}: {found:?}");
            assert_eq!(owned[0].field, field);
        }
    }
}

#[test]
fn refuses_each_of_the_five_secrets_namespace_names() {
    for feature in [
        "bgpControlPlane",
        "envoyConfig",
        "ingressController",
        "gatewayAPI",
        "tls",
    ] {
        let found = check(json!({ feature: { "secretsNamespace": { "name": "kube-system" } } }));
        assert_eq!(
            fields(&found),
            vec![format!("spec.cni.cilium.values.{feature}.secretsNamespace.name")],
            "{feature}"
        );
        assert!(found[0].message.contains("every Secret"), "{}", found[0].message);
    }
}

#[test]
fn accepts_the_secrets_namespace_siblings_it_does_not_own() {
    let values = json!({ "gatewayAPI": { "secretsNamespace": { "create": false, "sync": true } } });
    assert_eq!(check(values), vec![]);
}

#[test]
fn refuses_a_non_object_that_would_replace_an_owned_key() {
    let found = check(json!({ "cgroup": null }));
    assert!(
        found.iter().any(|v| v.field == "spec.cni.cilium.values.cgroup"
            && v.message.contains("would replace `cgroup.autoMount.enabled`")),
        "{found:?}"
    );
    let found = check(json!({ "securityContext": { "capabilities": [] } }));
    let ancestor = found
        .iter()
        .filter(|v| v.message.starts_with("must be an object"))
        .count();
    assert_eq!(
        ancestor, 1,
        "one finding for the two owned keys below it: {found:?}"
    );
    assert!(
        found.iter().any(
            |v| v.field == "spec.cni.cilium.values.securityContext.capabilities"
                && v.message
                    .contains("would replace `securityContext.capabilities.ciliumAgent`")
        ),
        "{found:?}"
    );
}

// --- schema ---

#[test]
fn embedded_schema_compiles_as_draft_7() {
    let start = std::time::Instant::now();
    assert!(schema::is_ready());
    println!(
        "schema ready after {:?} (includes compiling it when this test runs first)",
        start.elapsed()
    );
}

#[test]
fn refuses_a_value_of_the_wrong_type_at_its_path() {
    let found = check(json!({ "bpf": { "masquerade": "yes" }, "operator": { "replicas": "two" } }));
    let mut at = fields(&found);
    at.sort_unstable();
    assert_eq!(
        at,
        vec![
            "spec.cni.cilium.values.bpf.masquerade",
            "spec.cni.cilium.values.operator.replicas"
        ]
    );
    assert!(
        found.iter().all(|v| v.message.contains("chart schema")),
        "{found:?}"
    );
    // The value itself is masked: a message never echoes what the user wrote.
    assert!(
        found
            .iter()
            .all(|v| !v.message.contains("two") && !v.message.contains("yes")),
        "{found:?}"
    );
}

#[test]
fn refuses_a_value_outside_an_enum_or_a_range() {
    let found = check(json!({ "identityManagementMode": "nobody", "bpf": { "monitorTraceIPOption": 256 } }));
    let mut at = fields(&found);
    at.sort_unstable();
    assert_eq!(
        at,
        vec![
            "spec.cni.cilium.values.bpf.monitorTraceIPOption",
            "spec.cni.cilium.values.identityManagementMode"
        ]
    );
    assert_eq!(check(json!({ "bpf": { "monitorTraceIPOption": 0 } })), vec![]);
}

#[test]
fn names_the_array_index_of_a_bad_item() {
    let found = check(json!({ "operator": { "tolerations": [{ "key": "a" }, { "key": 5 }] } }));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0]
            .field
            .starts_with("spec.cni.cilium.values.operator.tolerations[1]"),
        "{found:?}"
    );
}

#[test]
fn refuses_null_for_a_key_the_schema_types_as_a_plain_string() {
    // `ipam.mode` would do, but it is owned; `cluster.name` is a plain string.
    let found = check(json!({ "cluster": { "name": null } }));
    assert_eq!(fields(&found), vec!["spec.cni.cilium.values.cluster.name"]);
}

#[test]
fn lists_at_most_32_schema_problems_and_counts_the_rest() {
    // Give every top-level boolean the chart knows (34 in 1.20.0) a string instead.
    let Some(Value::Object(top)) =
        serde_json::from_str::<Value>(include_str!("../../../data/cilium/values.schema.json"))
            .ok()
            .and_then(|s| s.get("properties").cloned())
    else {
        panic!("the schema has top-level properties");
    };
    let owned_roots: Vec<&str> = owned::OWNED_KEYS
        .iter()
        .filter_map(|(k, _)| k.split('.').next())
        .collect();
    let boolean_keys: serde_json::Map<String, Value> = top
        .iter()
        .filter(|(k, s)| s.get("type") == Some(&json!("boolean")) && !owned_roots.contains(&k.as_str()))
        .map(|(k, _)| (k.clone(), json!("not a boolean")))
        .collect();
    let wrong = boolean_keys.len();
    assert!(wrong > schema::MAX_SCHEMA_FINDINGS, "{wrong}");
    let found = check(Value::Object(boolean_keys));
    assert_eq!(found.len(), schema::MAX_SCHEMA_FINDINGS + 1);
    let last = &found[schema::MAX_SCHEMA_FINDINGS];
    assert_eq!(last.field, VALUES_FIELD);
    let more = format!(
        "{} more chart schema problems",
        wrong - schema::MAX_SCHEMA_FINDINGS
    );
    assert!(last.message.contains(&more), "{}", last.message);
}

// --- chart render-time rules ---

#[test]
fn refuses_a_gateway_external_traffic_policy_other_than_cluster_or_local() {
    for ok in ["Cluster", "Local"] {
        assert_eq!(
            check(json!({ "gatewayAPI": { "externalTrafficPolicy": ok } })),
            vec![],
            "{ok}"
        );
    }
    let found = check(json!({ "gatewayAPI": { "externalTrafficPolicy": "local" } }));
    assert_eq!(
        fields(&found),
        vec!["spec.cni.cilium.values.gatewayAPI.externalTrafficPolicy"]
    );
}

#[test]
fn refuses_l7_proxy_off_when_an_envoy_feature_is_on() {
    let found = check(json!({ "l7Proxy": false, "gatewayAPI": { "enabled": true } }));
    assert_eq!(fields(&found), vec!["spec.cni.cilium.values.l7Proxy"]);
    assert!(
        found[0].message.contains("gatewayAPI.enabled"),
        "{}",
        found[0].message
    );
    let found = check(json!({ "l7Proxy": false, "loadBalancer": { "l7": { "backend": "envoy" } } }));
    assert_eq!(fields(&found), vec!["spec.cni.cilium.values.l7Proxy"]);
    let found = check(json!({ "l7Proxy": false, "ingressController": { "enabled": true } }));
    assert_eq!(fields(&found), vec!["spec.cni.cilium.values.l7Proxy"]);
    assert_eq!(check(json!({ "l7Proxy": false })), vec![]);
    assert_eq!(
        check(json!({ "l7Proxy": true, "gatewayAPI": { "enabled": true } })),
        vec![]
    );
}
