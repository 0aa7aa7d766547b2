//! The layers and modes accepted, the shape and bounds of a layer, and unknown keys.

use super::*;

// --- allowed ---

#[test]
fn accepts_a_typical_user_layer_with_free_form_maps_and_kubernetes_objects() {
    let values = json!({
        "hubble": { "enabled": true, "relay": { "enabled": true }, "ui": { "enabled": true } },
        "bpf": { "masquerade": false, "monitorTraceIPOption": 255 },
        "operator": {
            "replicas": 1,
            "tolerations": [{ "key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule" }],
            "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {} } },
        },
        "nodeSelector": { "kubernetes.io/os": "linux", "example.com/net": "fast" },
        "podLabels": { "team": "net" },
        "extraConfig": { "anything-goes": "here" },
        "resources": { "limits": { "memory": "1Gi" }, "claims": [] },
        "gatewayAPI": { "enabled": true, "enableAlpn": true },
        "identityManagementMode": "operator",
        "upgradeCompatibility": null,
    });
    assert_eq!(check(values), vec![]);
}

#[test]
fn accepts_a_spec_without_values_and_an_empty_layer() {
    let mut cni = spec(json!({}));
    assert_eq!(validate(&cni, &CiliumFacts::default()), vec![]);
    cni.cilium = None;
    assert_eq!(validate(&cni, &CiliumFacts::default()), vec![]);
    assert_eq!(validate(&CniSpec::default(), &CiliumFacts::default()), vec![]);
}

#[test]
fn accepts_every_kube_proxy_and_tunnel_mode_ichor_knows() {
    for kube_proxy in ["", "enabled", "replaced"] {
        for tunnel in ["", "vxlan", "geneve", "native"] {
            let cni = with_modes(kube_proxy, tunnel, json!({}));
            assert_eq!(
                validate(&cni, &CiliumFacts::default()),
                vec![],
                "{kube_proxy}/{tunnel}"
            );
        }
    }
}

// --- modes ---

#[test]
fn refuses_a_kube_proxy_mode_ichor_does_not_know() {
    for mode in ["disabled", "Replaced", "true", " enabled"] {
        let found = validate(&with_modes(mode, "", json!({})), &CiliumFacts::default());
        assert_eq!(fields(&found), vec![KUBE_PROXY_FIELD], "{mode}");
        assert!(found[0].message.contains("`replaced`"), "{}", found[0].message);
    }
}

#[test]
fn refuses_a_tunnel_mode_ichor_does_not_know() {
    for mode in ["disabled", "VXLAN", "tunnel", "ipip"] {
        let found = validate(&with_modes("", mode, json!({})), &CiliumFacts::default());
        assert_eq!(fields(&found), vec![TUNNEL_FIELD], "{mode}");
        assert!(
            found[0].message.contains(&format!("{mode:?}")),
            "{}",
            found[0].message
        );
    }
}

// --- shape and bounds ---

#[test]
fn refuses_values_that_are_not_a_json_object() {
    for values in [
        json!([]),
        json!("hubble.enabled=true"),
        json!(null),
        json!(3),
        json!(true),
    ] {
        let found = check(values.clone());
        assert_eq!(fields(&found), vec![VALUES_FIELD], "{values}");
        assert!(
            found[0].message.starts_with("must be a JSON object"),
            "{}",
            found[0].message
        );
    }
}

#[test]
fn accepts_sixteen_levels_of_nesting_and_refuses_seventeen() {
    // `extraConfig` is a free-form map, so only the depth cap can refuse these.
    let at_cap = nested_object(16); // the values object itself is level 1
    assert_eq!(check(at_cap), vec![]);
    let found = check(nested_object(17));
    assert_eq!(fields(&found), vec![VALUES_FIELD]);
    assert!(
        found[0].message.contains("deeper than 16 levels"),
        "{}",
        found[0].message
    );
}

#[test]
fn refuses_a_hundred_thousand_levels_of_nesting_without_recursing() {
    let mut value = json!(null);
    for _ in 0..100_000 {
        value = Value::Array(vec![value]);
    }
    // No clone and no `json!` (it serializes its arguments): serde_json's clone, serialize and
    // drop recurse, and would overflow this test's stack.
    let mut map = serde_json::Map::new();
    map.insert("extraArgs".into(), value);
    let cni = spec(Value::Object(map));
    let found = validate(&cni, &CiliumFacts::default());
    assert_eq!(fields(&found), vec![VALUES_FIELD]);
    assert!(
        found[0].message.contains("deeper than 16 levels"),
        "{}",
        found[0].message
    );
    if let Some(values) = cni.cilium.and_then(|c| c.values) {
        drop_deep(values);
    }
}

#[test]
fn accepts_a_layer_of_exactly_64_kib_and_refuses_one_byte_more() {
    // {"podLabels":{"a":"…"}} is 22 bytes plus the string.
    let exact = json!({ "podLabels": { "a": "x".repeat(bounds::MAX_VALUES_BYTES - 22) } });
    assert_eq!(
        serde_json::to_vec(&exact).map(|v| v.len()).ok(),
        Some(bounds::MAX_VALUES_BYTES)
    );
    assert_eq!(check(exact), vec![]);
    let over = json!({ "podLabels": { "a": "x".repeat(bounds::MAX_VALUES_BYTES - 21) } });
    let found = check(over);
    assert_eq!(fields(&found), vec![VALUES_FIELD]);
    assert!(
        found[0].message.contains("larger than 65536 bytes"),
        "{}",
        found[0].message
    );
}

#[test]
fn refuses_more_than_two_thousand_keys() {
    let labels =
        |n: usize| -> Value { Value::Object((0..n).map(|i| (format!("k{i}"), json!("v"))).collect()) };
    // 1 (podLabels) + 1,999 = 2,000 keys.
    assert_eq!(check(json!({ "podLabels": labels(1_999) })), vec![]);
    let found = check(json!({ "podLabels": labels(2_000) }));
    assert_eq!(fields(&found), vec![VALUES_FIELD]);
    assert!(found[0].message.contains("2001 keys"), "{}", found[0].message);
}

// --- unknown keys ---

#[test]
fn refuses_an_unknown_top_level_key_and_an_unknown_nested_key() {
    let found = check(json!({ "totallyUnknownKey": 1, "ipam": { "bogus": 1 } }));
    assert_eq!(
        fields(&found),
        vec![
            "spec.cni.cilium.values.totallyUnknownKey",
            "spec.cni.cilium.values.ipam.bogus"
        ]
    );
    assert!(
        found
            .iter()
            .all(|v| v.message.contains("not a value of the Cilium 1.20.0 chart"))
    );
}

#[test]
fn suggests_the_key_a_wrong_case_typo_meant() {
    let found = check(json!({ "hubble": { "Enabled": true } }));
    assert_eq!(fields(&found), vec!["spec.cni.cilium.values.hubble.Enabled"]);
    assert!(
        found[0].message.ends_with("did you mean `enabled`?"),
        "{}",
        found[0].message
    );
}

#[test]
fn refuses_the_removed_legacy_tunnel_key_and_points_to_spec_cni_tunnel() {
    let found = check(json!({ "tunnel": "disabled" }));
    assert_eq!(fields(&found), vec!["spec.cni.cilium.values.tunnel"]);
    assert!(
        found[0].message.contains("spec.cni.tunnel"),
        "{}",
        found[0].message
    );
}

#[test]
fn quotes_an_unknown_key_that_holds_a_dot() {
    let found = check(json!({ "hubble.enabled": true }));
    assert_eq!(fields(&found), vec!["spec.cni.cilium.values[\"hubble.enabled\"]"]);
}

#[test]
fn lists_at_most_64_findings_and_counts_the_rest() {
    let typos: serde_json::Map<String, Value> = (0..1_000).map(|i| (format!("typo{i}"), json!(1))).collect();
    let found = check(Value::Object(typos));
    assert_eq!(found.len(), MAX_VIOLATIONS);
    let last = &found[MAX_VIOLATIONS - 1];
    assert_eq!(last.field, VALUES_FIELD);
    assert!(last.message.contains("has 937 more problems"), "{}", last.message);
    assert_eq!(found[MAX_VIOLATIONS - 2].field, "spec.cni.cilium.values.typo62");
}
