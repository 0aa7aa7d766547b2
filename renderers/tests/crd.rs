//! The generated CRDs: in sync with the files in the repository, and their CEL rules behave as
//! the kube-apiserver would evaluate them (kube-cel runs the same rules client-side).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use ichor_renderers::crd::{crd_files, ichor_user_crd};
use serde_json::{Value, json};

#[test]
fn checked_in_crds_match_the_rust_types() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for f in crd_files().unwrap() {
        let on_disk = std::fs::read_to_string(root.join(&f.path)).unwrap_or_default();
        assert!(
            on_disk == f.yaml,
            "{} is out of date: run `cargo run -p ichor-renderers --bin crdgen` and commit it",
            f.path
        );
    }
}

#[test]
fn the_chart_ships_only_the_ichoruser_crd() {
    let chart: Vec<_> = crd_files()
        .unwrap()
        .into_iter()
        .filter(|f| f.path.starts_with("helm/ichor/crds/"))
        .collect();
    assert_eq!(chart.len(), 1);
    assert_eq!(chart[0].path, "helm/ichor/crds/ichorusers.ichor.maesh.dev.yaml");
}

fn user_schema() -> Value {
    let crd = serde_json::to_value(ichor_user_crd()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

fn user(name: &str, roles: &[&str]) -> Value {
    json!({
        "apiVersion": "ichor.maesh.dev/v1alpha1",
        "kind": "IchorUser",
        "metadata": {"name": name, "namespace": "ichor-system"},
        "spec": {"roles": roles, "disabled": false},
    })
}

fn cel_errors(obj: &Value) -> Vec<String> {
    match kube_cel::validate(&user_schema(), obj, None) {
        Ok(()) => vec![],
        Err(errs) => errs
            .into_vec()
            .into_iter()
            .map(|e| format!("{}: {}", e.field_path, e.message))
            .collect(),
    }
}

#[test]
fn a_dns_label_name_with_built_in_roles_passes_the_cel_rules() {
    assert!(cel_errors(&user("alice", &["admin", "viewer"])).is_empty());
    assert!(cel_errors(&user("a", &[])).is_empty());
    assert!(cel_errors(&user(&"a".repeat(63), &["custom-role-1"])).is_empty());
}

#[test]
fn cel_refuses_names_that_are_not_dns_labels() {
    for bad in [
        "Alice",
        "alice.smith",
        "-alice",
        "alice-",
        "al_ice",
        &"a".repeat(64),
    ] {
        let errs = cel_errors(&user(bad, &[]));
        assert_eq!(errs.len(), 1, "{bad:?} should be refused once: {errs:?}");
        assert!(errs[0].contains("must be a DNS label"), "{errs:?}");
    }
}

#[test]
fn cel_refuses_role_names_outside_the_pattern() {
    for bad in ["Admin", "1admin", "a".repeat(32).as_str(), "ad min", ""] {
        let errs = cel_errors(&user("alice", &[bad]));
        assert!(
            errs.iter().any(|e| e.contains("each role must match")),
            "{bad:?}: {errs:?}"
        );
    }
}

#[test]
fn cel_refuses_more_than_sixteen_roles() {
    let roles: Vec<String> = (0..17).map(|i| format!("r{i}")).collect();
    let roles: Vec<&str> = roles.iter().map(String::as_str).collect();
    let errs = cel_errors(&user("alice", &roles));
    assert!(errs.iter().any(|e| e.contains("at most 16 roles")), "{errs:?}");
    assert!(cel_errors(&user("alice", &roles[..16])).is_empty());
}

#[test]
fn the_schema_makes_roles_a_set_with_bounded_items() {
    let roles = &user_schema()["properties"]["spec"]["properties"]["roles"];
    assert_eq!(roles["x-kubernetes-list-type"], "set");
    assert_eq!(roles["maxItems"], 16);
    assert_eq!(roles["items"]["maxLength"], 31);
}

fn user_with(spec: Value) -> Value {
    let mut u = user("alice", &[]);
    for (k, v) in spec.as_object().unwrap() {
        u["spec"][k] = v.clone();
    }
    u
}

#[test]
fn the_cel_rules_of_display_name_and_email_refuse_exactly_what_the_api_refuses() {
    use ichor_renderers::auth::text::{check_display_name, check_email};
    // Every character of the Latin, general-punctuation and CJK-symbol ranges (the control
    // and space characters among them), each inside a text.
    let chars = (0u32..0x250).chain(0x2000..0x2070).chain(0x3000..0x3004);
    for c in chars.filter_map(char::from_u32) {
        let text = format!("a{c}b");
        let cel = cel_errors(&user_with(json!({"displayName": text})));
        assert_eq!(
            cel.is_empty(),
            check_display_name(&text).is_ok(),
            "displayName {c:?}: {cel:?}"
        );
        let text = format!("a{c}b@example.com");
        let cel = cel_errors(&user_with(json!({"email": text})));
        assert_eq!(cel.is_empty(), check_email(&text).is_ok(), "email {c:?}: {cel:?}");
    }
    let errs = cel_errors(&user_with(json!({"displayName": "Eve\u{1b}]0;x\u{7}"})));
    assert!(
        errs.iter()
            .any(|e| e.contains("must not contain control characters")),
        "{errs:?}"
    );
}
