//! The guards that need facts of the cluster, and what each preset checks.

use super::*;

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
