use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::crd::CiliumSpec;

fn spec(values: Value) -> CniSpec {
    CniSpec {
        preset: Some("cilium".into()),
        kube_proxy: None,
        tunnel: None,
        cilium: Some(CiliumSpec { values: Some(values) }),
    }
}

fn with_modes(kube_proxy: &str, tunnel: &str, values: Value) -> CniSpec {
    CniSpec {
        kube_proxy: Some(kube_proxy.into()),
        tunnel: Some(tunnel.into()),
        ..spec(values)
    }
}

fn check(values: Value) -> Vec<CniViolation> {
    validate(&spec(values), &CiliumFacts::default())
}

fn fields(violations: &[CniViolation]) -> Vec<&str> {
    violations.iter().map(|v| v.field.as_str()).collect()
}

fn facts(dns: Option<bool>, port: Option<u16>, crds: Option<bool>) -> CiliumFacts {
    CiliumFacts {
        forward_kube_dns_to_host: dns,
        kubeprism_port: port,
        gateway_api_crds: crds,
    }
}

/// Drops a deeply nested value without recursion (serde_json's own drop recurses).
fn drop_deep(mut value: Value) {
    loop {
        value = match value {
            Value::Array(mut items) => match items.pop() {
                Some(inner) => inner,
                None => return,
            },
            Value::Object(map) => match map.into_iter().next() {
                Some((_, inner)) => inner,
                None => return,
            },
            _ => return,
        };
    }
}

fn nested_object(levels: usize) -> Value {
    let mut value = json!(1);
    for _ in 0..levels {
        value = json!({ "extraConfig": value });
    }
    value
}

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
        serde_json::from_str::<Value>(include_str!("../../data/cilium/values.schema.json"))
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

// --- fact guards ---

#[test]
fn refuses_bpf_masquerade_when_the_cluster_forwards_kube_dns_to_the_host() {
    let values = json!({ "bpf": { "masquerade": true } });
    let found = validate(&spec(values.clone()), &facts(Some(true), None, None));
    assert_eq!(fields(&found), vec!["spec.cni.cilium.values.bpf.masquerade"]);
    assert!(
        found[0].message.contains("forwardKubeDNSToHost: false"),
        "{}",
        found[0].message
    );
    assert_eq!(
        validate(&spec(values.clone()), &facts(Some(false), None, None)),
        vec![]
    );
    assert_eq!(
        validate(
            &spec(json!({ "bpf": { "masquerade": false } })),
            &facts(Some(true), None, None)
        ),
        vec![]
    );
}

#[test]
fn passes_bpf_masquerade_when_host_dns_forwarding_is_unknown() {
    let values = json!({ "bpf": { "masquerade": true } });
    assert_eq!(validate(&spec(values), &CiliumFacts::default()), vec![]);
}

#[test]
fn refuses_an_upgrade_compatibility_that_turns_bpf_masquerade_on_by_default() {
    let found = validate(
        &spec(json!({ "upgradeCompatibility": "1.9" })),
        &facts(Some(true), None, None),
    );
    assert_eq!(
        fields(&found),
        vec!["spec.cni.cilium.values.upgradeCompatibility"]
    );
    let explicit_off = json!({ "upgradeCompatibility": "1.9", "bpf": { "masquerade": false } });
    assert_eq!(
        validate(&spec(explicit_off), &facts(Some(true), None, None)),
        vec![]
    );
    let recent = json!({ "upgradeCompatibility": "1.16" });
    assert_eq!(validate(&spec(recent), &facts(Some(true), None, None)), vec![]);
}

#[test]
fn refuses_replaced_mode_unless_kubeprism_listens_on_7445() {
    let replaced = with_modes("replaced", "", json!({}));
    assert_eq!(validate(&replaced, &facts(None, Some(7445), None)), vec![]);
    let found = validate(&replaced, &facts(None, Some(13336), None));
    assert_eq!(fields(&found), vec![KUBE_PROXY_FIELD]);
    assert!(found[0].message.contains("port 13336"), "{}", found[0].message);
    let found = validate(&replaced, &facts(None, Some(0), None));
    assert!(
        found[0].message.contains("KubePrism is disabled"),
        "{}",
        found[0].message
    );
    // Unknown port, or kube-proxy kept: the guard passes.
    assert_eq!(validate(&replaced, &CiliumFacts::default()), vec![]);
    let enabled = with_modes("enabled", "", json!({}));
    assert_eq!(validate(&enabled, &facts(None, Some(13336), None)), vec![]);
}

#[test]
fn refuses_gateway_api_when_the_cluster_lacks_its_crds() {
    let values = json!({ "gatewayAPI": { "enabled": true } });
    let found = validate(&spec(values.clone()), &facts(None, None, Some(false)));
    assert_eq!(fields(&found), vec!["spec.cni.cilium.values.gatewayAPI.enabled"]);
    assert_eq!(
        validate(&spec(values.clone()), &facts(None, None, Some(true))),
        vec![]
    );
    assert_eq!(validate(&spec(values), &CiliumFacts::default()), vec![]);
    let off = json!({ "gatewayAPI": { "enabled": false } });
    assert_eq!(validate(&spec(off), &facts(None, None, Some(false))), vec![]);
}

#[test]
fn runs_no_guard_on_a_layer_that_breaks_the_bounds() {
    let mut values = nested_object(20);
    if let Value::Object(map) = &mut values {
        map.insert("bpf".into(), json!({ "masquerade": true }));
    }
    let found = validate(&spec(values), &facts(Some(true), None, None));
    assert_eq!(fields(&found), vec![VALUES_FIELD]);
}

// --- preset ---

#[test]
fn checks_nothing_for_preset_unmanaged() {
    let cni = CniSpec {
        preset: Some(UNMANAGED_PRESET.into()),
        kube_proxy: Some("bogus".into()),
        tunnel: Some("bogus".into()),
        cilium: Some(CiliumSpec {
            values: Some(json!({ "ipam": { "mode": "x" }, "bogus": [] })),
        }),
    };
    assert_eq!(validate(&cni, &facts(Some(true), Some(1), Some(false))), vec![]);
}

#[test]
fn checks_a_spec_without_a_preset() {
    let cni = CniSpec {
        preset: None,
        ..spec(json!({ "bogus": 1 }))
    };
    assert_eq!(
        fields(&validate(&cni, &CiliumFacts::default())),
        vec!["spec.cni.cilium.values.bogus"]
    );
}

#[test]
fn reports_every_problem_at_once() {
    let cni = with_modes(
        "bogus",
        "bogus",
        json!({ "ipam": { "mode": "cluster-pool" }, "typo": 1 }),
    );
    let found = validate(&cni, &CiliumFacts::default());
    assert_eq!(
        fields(&found),
        vec![
            KUBE_PROXY_FIELD,
            TUNNEL_FIELD,
            "spec.cni.cilium.values.ipam.mode",
            "spec.cni.cilium.values.typo"
        ]
    );
}

// --- ratcheting ---

#[test]
fn always_validates_a_create() {
    assert!(needs_validation(None, &CniSpec::default()));
    assert!(needs_validation(None, &spec(json!({}))));
}

#[test]
fn skips_validation_of_an_update_that_leaves_values_and_modes_alone() {
    let stored = with_modes(
        "replaced",
        "geneve",
        json!({ "bogus": 1, "hubble": { "enabled": true } }),
    );
    assert!(needs_validation(None, &stored), "a create is validated");
    assert!(!needs_validation(Some(&stored), &stored.clone()));
    // Key order is not a change.
    let reordered = with_modes(
        "replaced",
        "geneve",
        json!({ "hubble": { "enabled": true }, "bogus": 1 }),
    );
    assert!(!needs_validation(Some(&stored), &reordered));
    // A preset edit that does not leave `unmanaged` is not a change the check cares about.
    let flannel = CniSpec {
        preset: Some("flannel".into()),
        ..stored.clone()
    };
    assert!(!needs_validation(Some(&stored), &flannel));
}

#[test]
fn treats_absent_and_empty_as_the_same_on_update() {
    let bare = CniSpec {
        preset: Some("cilium".into()),
        ..CniSpec::default()
    };
    let empty = CniSpec {
        kube_proxy: Some(String::new()),
        tunnel: Some(String::new()),
        cilium: Some(CiliumSpec {
            values: Some(json!({})),
        }),
        ..bare.clone()
    };
    assert!(!needs_validation(Some(&bare), &empty));
    assert!(!needs_validation(Some(&empty), &bare));
    let null = CniSpec {
        cilium: Some(CiliumSpec {
            values: Some(Value::Null),
        }),
        ..bare.clone()
    };
    assert!(!needs_validation(Some(&bare), &null));
}

#[test]
fn validates_an_update_that_changes_values_kube_proxy_or_tunnel() {
    let stored = spec(json!({ "hubble": { "enabled": true } }));
    assert!(needs_validation(
        Some(&stored),
        &spec(json!({ "hubble": { "enabled": false } }))
    ));
    assert!(needs_validation(Some(&stored), &spec(json!({}))));
    let replaced = CniSpec {
        kube_proxy: Some("replaced".into()),
        ..stored.clone()
    };
    assert!(needs_validation(Some(&stored), &replaced));
    let geneve = CniSpec {
        tunnel: Some("geneve".into()),
        ..stored.clone()
    };
    assert!(needs_validation(Some(&stored), &geneve));
    // `enabled` spelled out differs from empty as a string: validating again is harmless.
    let spelled = CniSpec {
        kube_proxy: Some("enabled".into()),
        ..stored.clone()
    };
    assert!(needs_validation(Some(&stored), &spelled));
}

#[test]
fn validates_an_update_that_leaves_preset_unmanaged_with_unchecked_values() {
    let stored = CniSpec {
        preset: Some(UNMANAGED_PRESET.into()),
        ..spec(json!({ "bogus": 1 }))
    };
    let managed = CniSpec {
        preset: Some("cilium".into()),
        ..stored.clone()
    };
    assert!(needs_validation(Some(&stored), &managed));
    assert!(!needs_validation(Some(&managed), &stored));
}

#[test]
fn a_stored_invalid_layer_keeps_accepting_unrelated_edits() {
    let stored = spec(json!({ "ipam": { "mode": "cluster-pool" } }));
    assert!(!validate(&stored, &CiliumFacts::default()).is_empty());
    let same_cni_other_edit = stored.clone();
    assert!(!needs_validation(Some(&stored), &same_cni_other_edit));
}

#[test]
fn reports_a_values_change_only_when_the_layer_differs() {
    let stored = spec(json!({ "hubble": { "enabled": true } }));
    assert!(values_changed(None, &stored));
    assert!(!values_changed(None, &spec(json!({}))));
    assert!(!values_changed(None, &CniSpec::default()));
    assert!(!values_changed(Some(&stored), &stored.clone()));
    assert!(
        values_changed(Some(&stored), &spec(json!({}))),
        "removing the layer is a change"
    );
    assert!(values_changed(
        Some(&stored),
        &spec(json!({ "hubble": { "enabled": false } }))
    ));
    let replaced = CniSpec {
        kube_proxy: Some("replaced".into()),
        ..stored.clone()
    };
    assert!(
        !values_changed(Some(&stored), &replaced),
        "a mode change is not a values change"
    );
}

// --- output ---

#[test]
fn displays_and_serializes_a_violation_as_field_and_sentence() {
    let found = check(json!({ "k8sServiceHost": "evil.example" }));
    assert_eq!(found.len(), 1);
    let shown = found[0].to_string();
    assert!(
        shown.starts_with("spec.cni.cilium.values.k8sServiceHost is owned by Ichor"),
        "{shown}"
    );
    let as_json = serde_json::to_value(&found[0]).ok();
    assert_eq!(
        as_json.as_ref().and_then(|v| v.get("field")),
        Some(&json!("spec.cni.cilium.values.k8sServiceHost"))
    );
    assert!(as_json.as_ref().and_then(|v| v.get("message")).is_some());
}

#[test]
fn validates_a_typical_layer_in_well_under_a_millisecond_once_compiled() {
    assert!(schema::is_ready());
    let values =
        json!({ "hubble": { "enabled": true, "relay": { "enabled": true } }, "operator": { "replicas": 2 } });
    let cni = spec(values);
    let start = std::time::Instant::now();
    for _ in 0..100 {
        assert!(validate(&cni, &CiliumFacts::default()).is_empty());
    }
    let per_call = start.elapsed() / 100;
    println!("validate: {per_call:?} per call");
    // Generous: unoptimised test builds on a shared two-core machine.
    assert!(per_call < std::time::Duration::from_millis(20), "{per_call:?}");
    // A layer at the key cap, every key but one unknown.
    let worst: serde_json::Map<String, Value> = (0..1_999).map(|i| (format!("typo{i}"), json!(i))).collect();
    let worst = spec(json!({ "hubble": Value::Object(worst) }));
    let start = std::time::Instant::now();
    assert_eq!(validate(&worst, &CiliumFacts::default()).len(), MAX_VIOLATIONS);
    let elapsed = start.elapsed();
    println!("validate, 2,000 keys, 1,999 unknown: {elapsed:?}");
    assert!(elapsed < std::time::Duration::from_millis(500), "{elapsed:?}");
}

// --- never panics ---

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "\\PC{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(24, 256, 6, |inner| {
        let key = prop_oneof![
            "\\PC{0,8}",
            Just("bpf".to_owned()),
            Just("masquerade".to_owned()),
            Just("hubble".to_owned()),
            Just("enabled".to_owned()),
            Just("securityContext".to_owned()),
            Just("capabilities".to_owned()),
            Just("ipam".to_owned()),
            Just("gatewayAPI".to_owned()),
            Just("operator".to_owned()),
            Just("tolerations".to_owned()),
            Just("upgradeCompatibility".to_owned()),
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key, inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_json_never_panics(
        values in arbitrary_json(),
        kube_proxy in prop::option::of(prop_oneof![Just("replaced".to_owned()), "\\PC{0,8}"]),
        tunnel in prop::option::of("\\PC{0,8}"),
        dns in prop::option::of(any::<bool>()),
        port in prop::option::of(any::<u16>()),
        crds in prop::option::of(any::<bool>()),
    ) {
        let cni = CniSpec { kube_proxy, tunnel, ..spec(values.clone()) };
        let found = validate(&cni, &facts(dns, port, crds));
        for violation in &found {
            prop_assert!(violation.field.starts_with("spec.cni."), "{violation:?}");
            prop_assert!(!violation.message.is_empty());
        }
        // Wrapped under every top-level key the chart knows of a few kinds.
        for key in ["bpf", "hubble", "securityContext", "operator", "extraContainers", "k8sServicePort"] {
            let _ = validate(&spec(json!({ key: values.clone() })), &facts(dns, port, crds));
        }
        prop_assert!(!needs_validation(Some(&cni), &cni.clone()));
        prop_assert!(!values_changed(Some(&cni), &cni.clone()));
    }
}

#[test]
fn embedded_schema_is_the_verbatim_v1_20_0_file_named_in_source_md() {
    use sha2::{Digest, Sha256};
    let digest = hex::encode(Sha256::digest(include_bytes!(
        "../../data/cilium/values.schema.json"
    )));
    assert_eq!(
        digest,
        "736bf1f53d6e86119aac2e872d92607c7414621e32cc9fdafb548c99f7255f56"
    );
    assert!(include_str!("../../data/cilium/SOURCE.md").contains("736bf1f5"));
}

#[test]
fn validates_spec_cni_as_read_from_a_talos_cluster_manifest() {
    let yaml = r#"
preset: cilium
kubeProxy: replaced
tunnel: geneve
cilium:
  values:
    hubble:
      enabled: true
    bpf:
      masquerade: true
    tls:
      secretsNamespace:
        name: kube-system
"#;
    let cni: CniSpec = match serde_yaml::from_str(yaml) {
        Ok(cni) => cni,
        Err(e) => panic!("the manifest parses: {e}"),
    };
    assert_eq!(
        fields(&validate(&cni, &CiliumFacts::default())),
        vec!["spec.cni.cilium.values.tls.secretsNamespace.name"]
    );
    let known = facts(Some(true), Some(7445), Some(true));
    assert_eq!(
        fields(&validate(&cni, &known)),
        vec![
            "spec.cni.cilium.values.tls.secretsNamespace.name",
            "spec.cni.cilium.values.bpf.masquerade"
        ]
    );
}

#[test]
fn words_every_kind_of_finding_as_a_sentence_after_its_field() {
    let cni = with_modes(
        "disabled",
        "ipip",
        json!({
            "tunnel": "vxlan",
            "hubble": { "enabeld": true, "Enabled": true },
            "ipam": { "mode": "cluster-pool" },
            "cgroup": 1,
            "gatewayAPI": { "enabled": true, "externalTrafficPolicy": "Whatever",
                            "secretsNamespace": { "name": "kube-system" } },
            "l7Proxy": false,
            "bpf": { "masquerade": true, "monitorTraceIPOption": -1 },
            "identityManagementMode": "nobody",
            "operator": { "replicas": "two", "tolerations": [{ "key": 5 }] },
        }),
    );
    let found = validate(&cni, &facts(Some(true), Some(0), Some(false)));
    let shown: Vec<String> = found.iter().map(ToString::to_string).collect();
    insta::assert_yaml_snapshot!(shown);
}
