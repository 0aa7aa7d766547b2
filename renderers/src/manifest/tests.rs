use kube::ResourceExt;
use proptest::prelude::*;

use super::*;
use crate::crd::MachineRole;

const CLUSTER: &str = "\
apiVersion: ichor.maesh.dev/v1alpha1
kind: TalosCluster
metadata: {name: prod, namespace: ichor-system}
spec:
  versionContract: v1.14
  endpoint: https://prod.example.com:6443
  controlPlane: {replicas: 3}          # another subsystem's field: ignored
  authentication:
    ichor: {enabled: true, url: https://ichor.example.com}
";

const USERS: &str = "\
apiVersion: ichor.maesh.dev/v1alpha1
kind: IchorUser
metadata: {name: bob, namespace: ichor-system}
spec: {displayName: Bob, roles: [viewer]}
---
apiVersion: ichor.maesh.dev/v1alpha1
kind: IchorUser
metadata: {name: alice, namespace: ichor-system}
spec: {displayName: Alice, roles: [admin]}
---
";

fn errors(name: &str, text: &str) -> Vec<String> {
    match parse_file(name, text.as_bytes()) {
        Ok(m) => panic!("expected errors, got {m:?}"),
        Err(e) => e.0.iter().map(ToString::to_string).collect(),
    }
}

fn user(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: ichor.maesh.dev/v1alpha1\nkind: IchorUser\nmetadata: {{name: {name}, namespace: ichor-system}}\nspec: {spec}\n"
    )
}

#[test]
fn reads_every_kind_and_sorts_each_list_by_namespace_and_name() {
    let machine = "\
apiVersion: ichor.maesh.dev/v1alpha1
kind: TalosMachine
metadata: {name: cp-1, namespace: ichor-system}
spec: {cluster: prod, role: controlplane, address: 10.0.0.11, install: {disk: /dev/sda}}
status:
  appliedDocumentHashes: {KubeAuthenticationConfig: abc}
";
    let install = "{\"apiVersion\": \"ichor.maesh.dev/v1alpha1\", \"kind\": \"IchorInstallation\", \
                   \"metadata\": {\"name\": \"ichor\"}, \"spec\": {\"users\": {\"tokenTTL\": \"10m\"}, \"ui\": {}}}";
    let configmap = "\
apiVersion: v1
kind: ConfigMap
metadata: {name: ichor-oidc-trust, namespace: ichor-system}
data: {discoveryURL: 'https://10.96.0.42:8444/.well-known/openid-configuration'}
";
    let m = parse_files([
        ("cluster.yaml", CLUSTER.as_bytes()),
        ("users.yaml", USERS.as_bytes()),
        ("machine.yaml", machine.as_bytes()),
        ("install.json", install.as_bytes()),
        ("trust.yaml", configmap.as_bytes()),
    ])
    .unwrap();
    assert_eq!(m.clusters[0].name_any(), "prod");
    let users: Vec<String> = m.users.iter().map(ResourceExt::name_any).collect();
    assert_eq!(users, ["alice", "bob"]);
    assert_eq!(m.machines[0].spec.role, MachineRole::ControlPlane);
    assert_eq!(
        m.machines[0].status.as_ref().unwrap().applied_document_hashes["KubeAuthenticationConfig"],
        "abc"
    );
    assert_eq!(m.installations.len(), 1);
    assert_eq!(m.configmaps[0].name_any(), "ichor-oidc-trust");
}

#[test]
fn reports_a_wrong_type_with_its_field_path() {
    let text = user("alice", "{roles: [admin], disabled: \"yes\"}");
    assert_eq!(
        errors("users/alice.yaml", &text),
        ["users/alice.yaml: document 1: spec.disabled: invalid type: string \"yes\", expected a boolean"]
    );
}

#[test]
fn reports_a_wrong_type_inside_a_list_with_its_index() {
    let text = user("alice", "{roles: [admin, [x]]}");
    assert_eq!(
        errors("a.yaml", &text),
        ["a.yaml: document 1: spec.roles[1]: invalid type: sequence, expected a string"]
    );
}

#[test]
fn reports_a_missing_field_at_the_field_itself() {
    let text = "apiVersion: ichor.maesh.dev/v1alpha1\nkind: TalosMachine\nmetadata: {name: cp-1}\n\
                spec: {role: controlplane, address: 10.0.0.1}\n";
    assert_eq!(
        errors("m.yaml", text),
        ["m.yaml: document 1: spec.cluster: required field is missing"]
    );
}

#[test]
fn reports_a_duration_too_large_to_read_at_its_field() {
    // Twenty digits pass the CRD's pattern but not the parser: an error naming the field.
    let text = "apiVersion: ichor.maesh.dev/v1alpha1\nkind: IchorInstallation\nmetadata: {name: ichor}\n\
                spec: {users: {tokenTTL: 99999999999999999999s}}\n";
    assert_eq!(
        errors("i.yaml", text),
        [
            "i.yaml: document 1: spec.users.tokenTTL: duration \"99999999999999999999s\" is too large: the longest \
             this reads is 2562047788015215h, and every setting accepts far less (write one such as 15m or 720h)"
        ]
    );
}

#[test]
fn reports_a_missing_name() {
    let text = "apiVersion: ichor.maesh.dev/v1alpha1\nkind: IchorUser\nmetadata: {namespace: ichor-system}\nspec: {}\n";
    assert_eq!(
        errors("u.yaml", text),
        ["u.yaml: document 1: metadata.name: required field is missing"]
    );
}

#[test]
fn reports_an_unknown_enum_value() {
    let text = "apiVersion: ichor.maesh.dev/v1alpha1\nkind: TalosMachine\nmetadata: {name: cp-1}\n\
                spec: {cluster: prod, role: master, address: 10.0.0.1}\n";
    assert_eq!(
        errors("m.yaml", text),
        ["m.yaml: document 1: spec.role: unknown variant `master`, expected `controlplane` or `worker`"]
    );
}

#[test]
fn reports_every_unknown_field_of_a_user() {
    let text = format!(
        "{}\nextra: 1\n",
        user("alice", "{displayname: Alice, roles: [admin]}").trim_end()
    );
    assert_eq!(
        errors("u.yaml", &text),
        [
            "u.yaml: document 1: spec.displayname: unknown field; check its spelling",
            "u.yaml: document 1: extra: unknown field; check its spelling",
        ]
    );
}

#[test]
fn reports_unknown_fields_only_in_the_subtrees_identity_owns() {
    let cluster = CLUSTER.replace("ichor: {enabled: true,", "ichor: {enable: true,");
    let install = "apiVersion: ichor.maesh.dev/v1alpha1\nkind: IchorInstallation\nmetadata: {name: ichor}\n\
                   spec: {users: {tokenTtl: 5m}, ui: {replicas: 2}}\n";
    let machine = "apiVersion: ichor.maesh.dev/v1alpha1\nkind: TalosMachine\nmetadata: {name: cp-1}\n\
                   spec: {cluster: prod, role: worker, address: 10.0.0.1, install: {disk: /dev/sda}}\n\
                   status: {phase: Running, conditions: [{type: Ready, status: 'True', reason: Ok, message: '', \
                   lastTransitionTime: '2026-01-01T00:00:00Z', severity: x}]}\n";
    let got = match parse_files([
        ("c.yaml", cluster.as_bytes()),
        ("i.yaml", install.as_bytes()),
        ("m.yaml", machine.as_bytes()),
    ]) {
        Err(e) => e.0.iter().map(ToString::to_string).collect::<Vec<_>>(),
        Ok(_) => panic!("expected errors"),
    };
    assert_eq!(
        got,
        [
            "c.yaml: document 1: spec.authentication.ichor.enable: unknown field; check its spelling",
            "i.yaml: document 1: spec.users.tokenTtl: unknown field; check its spelling",
            "m.yaml: document 1: status.conditions[0].severity: unknown field; check its spelling",
        ]
    );
}

#[test]
fn reports_malformed_yaml_with_line_and_column() {
    let text = format!(
        "{}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: x\n",
        user("a", "{}")
    );
    let got = errors("bad.yaml", &text);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("bad.yaml: document 2: line 9 column 1: "),
        "{}",
        got[0]
    );
}

#[test]
fn reports_malformed_json_with_line_and_column() {
    let got = errors("bad.json", "{\"apiVersion\": \"v1\",\n \"kind\": }\n");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0], "bad.json: document 1: line 2 column 10: expected value");
}

#[test]
fn refuses_a_key_written_twice() {
    let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\nkind: ConfigMap\n";
    let got = errors("d.yaml", text);
    assert!(got[0].starts_with("d.yaml: document 1: line "), "{}", got[0]);
    assert!(got[0].contains("duplicate entry with key \"kind\""), "{}", got[0]);
}

#[test]
fn refuses_a_kind_it_does_not_read() {
    let text = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n";
    assert_eq!(
        errors("deploy.yaml", text),
        [
            "deploy.yaml: document 1: kind: Deployment (apps/v1) is not read here: a manifest directory holds \
          TalosCluster, TalosMachine, IchorUser and IchorInstallation (ichor.maesh.dev/v1alpha1) and \
          ConfigMap (v1); move other objects out of it"
        ]
    );
    let wrong_version = user("a", "{}").replace("v1alpha1", "v1beta1");
    assert!(
        errors("u.yaml", &wrong_version)[0].contains("IchorUser (ichor.maesh.dev/v1beta1) is not read here")
    );
}

#[test]
fn refuses_a_document_without_api_version_or_kind() {
    assert_eq!(
        errors("a.yaml", "kind: IchorUser\n"),
        ["a.yaml: document 1: apiVersion: required field is missing"]
    );
    assert_eq!(
        errors("a.yaml", "apiVersion: v1\n"),
        ["a.yaml: document 1: kind: required field is missing"]
    );
    assert_eq!(
        errors("a.yaml", "apiVersion: v1\nkind: 3\n"),
        ["a.yaml: document 1: kind: must be a string"]
    );
    assert_eq!(
        errors("a.yaml", "- 1\n"),
        ["a.yaml: document 1: (document): must be an object with apiVersion and kind"]
    );
}

#[test]
fn refuses_the_same_object_defined_twice_across_files() {
    let alice = user("alice", "{}");
    let got = match parse_files([("a.yaml", alice.as_bytes()), ("b.yaml", USERS.as_bytes())]) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("expected a duplicate"),
    };
    assert_eq!(
        got,
        "b.yaml: document 2: IchorUser ichor-system/alice is already defined in a.yaml: document 1; keep only one"
    );
}

#[test]
fn the_same_name_in_another_namespace_or_kind_is_not_a_duplicate() {
    let a = user("alice", "{}");
    let b = a.replace("namespace: ichor-system", "namespace: other");
    let c = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: alice, namespace: ichor-system}\n";
    assert!(
        parse_files([
            ("a.yaml", a.as_bytes()),
            ("b.yaml", b.as_bytes()),
            ("c.yaml", c.as_bytes())
        ])
        .is_ok()
    );
}

#[test]
fn collects_every_error_of_a_directory() {
    let bad_user = user("alice", "{disabled: 1}");
    let got = parse_files([
        ("a.yaml", bad_user.as_bytes()),
        ("b.yaml", b"apiVersion: apps/v1\nkind: Deployment\n"),
        ("c.yaml", b"{"),
    ])
    .unwrap_err();
    let lines: Vec<String> = got.0.iter().map(ToString::to_string).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    for (line, file) in lines.iter().zip(["a.yaml: ", "b.yaml: ", "c.yaml: "]) {
        assert!(line.starts_with(file), "{line}");
    }
}

#[test]
fn refuses_a_file_over_one_mebibyte() {
    let big = vec![b' '; MAX_FILE_BYTES + 1];
    assert_eq!(
        parse_file("big.yaml", &big).unwrap_err().to_string(),
        "big.yaml: the file is larger than 1048576 bytes; split it into several files"
    );
}

#[test]
fn refuses_a_document_nested_too_deep() {
    let deep = format!(
        "apiVersion: v1\nkind: ConfigMap\nx: {}1{}\n",
        "[".repeat(70),
        "]".repeat(70)
    );
    assert_eq!(
        errors("deep.yaml", &deep),
        ["deep.yaml: document 1: nested deeper than 64 levels"]
    );
    let deeper = format!("x: {}1{}\n", "[".repeat(200), "]".repeat(200));
    assert!(errors("deeper.yaml", &deeper)[0].contains("recursion limit exceeded"));
}

#[test]
fn refuses_an_alias_expansion_bomb_quickly() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let prev = format!("*a{}", i - 1);
        text.push_str(&format!("a{i}: &a{i} [{}]\n", [prev.as_str(); 10].join(", ")));
    }
    let start = std::time::Instant::now();
    let got = errors("bomb.yaml", &text);
    assert!(got[0].contains("repetition limit exceeded"), "{got:?}");
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn stops_after_ten_thousand_documents() {
    let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n---\n".repeat(MAX_DOCUMENTS + 1);
    let got = parse_file("many.yaml", text.as_bytes()).unwrap_err();
    assert_eq!(
        got.0.len(),
        MAX_DOCUMENTS + 1,
        "one missing-name error per document, then the limit"
    );
    assert_eq!(
        got.0.last().map(ToString::to_string).as_deref(),
        Some("many.yaml: document 10001: more than 10000 documents in all; reading stopped here")
    );
}

#[test]
fn empty_documents_and_files_are_skipped() {
    assert_eq!(parse_file("empty.yaml", b"").unwrap(), Manifests::default());
    assert_eq!(
        parse_file("seps.yaml", b"---\n---\n# only a comment\n").unwrap(),
        Manifests::default()
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_file("fuzz.yaml", &bytes);
    }

    #[test]
    fn arbitrary_yaml_like_text_never_panics(text in "[a-zA-Z0-9:{}\\[\\],&*!|>'\"#\\- \n]{0,256}") {
        let _ = parse_file("fuzz.yaml", text.as_bytes());
        let with_header = format!("apiVersion: ichor.maesh.dev/v1alpha1\nkind: IchorUser\n{text}");
        let _ = parse_file("fuzz.yaml", with_header.as_bytes());
    }
}

#[test]
fn reports_a_misspelt_field_of_the_trust_configmap() {
    let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ichor-oidc-trust, namespace: ichor-system}\n\
                date: {discoveryURL: x}\n";
    assert_eq!(
        errors("trust.yaml", text),
        ["trust.yaml: document 1: date: unknown field; check its spelling"]
    );
}

#[test]
fn shows_yaml_syntax_errors_as_written_by_the_parser() {
    let got = errors("t.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x\n");
    assert_eq!(
        got,
        [
            "t.yaml: document 1: line 4 column 1: did not find expected ',' or '}', while parsing a flow mapping \
          at line 3 column 11"
        ]
    );
}
