use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::crd::CiliumSpec;

mod guards;
mod owned_and_schema;
mod ratcheting;
mod shape;

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
