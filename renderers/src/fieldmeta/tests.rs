use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;

fn auth_config(issuer: &str) -> Value {
    json!({
        "apiVersion": "v1alpha1",
        "kind": "KubeAuthenticationConfig",
        "configuration": {
            "anonymous": {"enabled": true, "conditions": [{"path": "/livez"}, {"path": "/readyz"}, {"path": "/healthz"}]},
            "jwt": [{"issuer": {"url": issuer, "audiences": ["ichor-kube"]}}]
        }
    })
}

fn main_doc(image: &str, hostname: &str) -> Value {
    json!({
        "version": "v1alpha1",
        "machine": {"type": "controlplane", "install": {"image": image, "disk": "/dev/sda"}, "network": {"hostname": hostname}},
        "cluster": {"clusterName": "prod"}
    })
}

fn api_server(port: u16) -> Value {
    json!({"apiVersion": "v1alpha1", "kind": "KubeAPIServerConfig", "apiPort": port})
}

fn hostname_doc(name: &str) -> Value {
    json!({"apiVersion": "v1alpha1", "kind": "HostnameConfig", "hostname": name})
}

fn hashes(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn classes_are_ordered_by_cost() {
    assert!(ChangeClass::Safe < ChangeClass::ApiServerRestart);
    assert!(ChangeClass::ApiServerRestart < ChangeClass::RebootRequired);
}

#[test]
fn every_rule_has_a_reason_and_no_two_rules_share_a_place() {
    for (i, a) in RULES.iter().enumerate() {
        assert!(a.why.len() > 20, "rule {a} needs a reason");
        for b in &RULES[i + 1..] {
            assert!((a.kind, a.prefix) != (b.kind, b.prefix), "duplicate rule {a}");
        }
    }
}

#[test]
fn a_changed_authentication_document_restarts_the_apiserver() {
    let c = classify(
        &[auth_config("https://a.example")],
        &[auth_config("https://b.example")],
    );
    assert_eq!(c.class, Some(ChangeClass::ApiServerRestart));
    assert_eq!(c.changes.len(), 1);
    assert_eq!(c.changes[0].path.to_string(), "configuration.jwt");
    assert_eq!(c.changes[0].rule.kind, "KubeAuthenticationConfig");
}

#[test]
fn an_added_or_removed_authentication_document_restarts_the_apiserver() {
    let base = main_doc("img:1", "cp-1");
    let added = classify(
        std::slice::from_ref(&base),
        &[base.clone(), auth_config("https://a.example")],
    );
    assert_eq!(added.class, Some(ChangeClass::ApiServerRestart));
    assert_eq!(added.changes[0].change, ChangeKind::Added);
    assert!(added.changes[0].path.is_whole_document());
    let removed = classify(&[base.clone(), auth_config("https://a.example")], &[base]);
    assert_eq!(removed.class, Some(ChangeClass::ApiServerRestart));
    assert_eq!(removed.changes[0].change, ChangeKind::Removed);
}

#[test]
fn a_changed_apiserver_document_restarts_the_apiserver() {
    let c = classify(&[api_server(6443)], &[api_server(7443)]);
    assert_eq!(c.class, Some(ChangeClass::ApiServerRestart));
    assert_eq!(c.changes[0].path.to_string(), "apiPort");
}

#[test]
fn the_install_section_is_safe_but_only_on_whole_segments() {
    let c = classify(&[main_doc("img:1", "cp-1")], &[main_doc("img:2", "cp-1")]);
    assert_eq!(c.class, Some(ChangeClass::Safe));
    assert_eq!(c.changes[0].path.to_string(), "machine.install.image");
    assert_eq!(c.changes[0].rule.prefix, "machine.install");

    let mut other = main_doc("img:1", "cp-1");
    other["machine"]["installer"] = json!(true);
    let c = classify(&[main_doc("img:1", "cp-1")], &[other]);
    assert_eq!(
        c.class,
        Some(ChangeClass::RebootRequired),
        "machine.installer is not machine.install"
    );
}

#[test]
fn an_unknown_document_takes_the_reboot_required_default() {
    let c = classify(&[hostname_doc("a")], &[hostname_doc("b")]);
    assert_eq!(c.class, Some(ChangeClass::RebootRequired));
    assert_eq!(c.changes[0].rule, DEFAULT_RULE);
}

#[test]
fn a_field_outside_every_rule_of_a_known_kind_takes_the_default() {
    let c = classify(&[main_doc("img:1", "cp-1")], &[main_doc("img:1", "cp-2")]);
    assert_eq!(c.class, Some(ChangeClass::RebootRequired));
    assert_eq!(c.changes[0].path.to_string(), "machine.network.hostname");
}

#[test]
fn the_overall_class_is_the_most_expensive_path() {
    let old = [main_doc("img:1", "cp-1"), auth_config("https://a.example")];
    let new = [main_doc("img:2", "cp-1"), auth_config("https://b.example")];
    let c = classify(&old, &new);
    assert_eq!(c.class, Some(ChangeClass::ApiServerRestart));
    assert_eq!(c.changes.len(), 2);
}

#[test]
fn the_longest_matching_prefix_wins() {
    const TABLE: &[Rule] = &[
        Rule {
            kind: "X",
            prefix: "",
            class: ChangeClass::ApiServerRestart,
            why: "whole",
        },
        Rule {
            kind: "X",
            prefix: "a",
            class: ChangeClass::RebootRequired,
            why: "a",
        },
        Rule {
            kind: "X",
            prefix: "a.b",
            class: ChangeClass::Safe,
            why: "a.b",
        },
    ];
    let doc = |b: u8, c: u8, d: u8| json!({"apiVersion": "v1", "kind": "X", "a": {"b": b, "c": c}, "d": d});
    let only = |old: Value, new: Value| classify_with(TABLE, &[old], &[new]).changes[0].rule.why;
    assert_eq!(only(doc(1, 0, 0), doc(2, 0, 0)), "a.b");
    assert_eq!(only(doc(0, 1, 0), doc(0, 2, 0)), "a");
    assert_eq!(only(doc(0, 0, 1), doc(0, 0, 2)), "whole");
}

#[test]
fn a_removed_parent_is_not_covered_by_a_rule_for_its_children() {
    const TABLE: &[Rule] = &[Rule {
        kind: "X",
        prefix: "a.b",
        class: ChangeClass::Safe,
        why: "a.b",
    }];
    let c = classify_with(
        TABLE,
        &[json!({"kind": "X", "a": {"b": 1}})],
        &[json!({"kind": "X"})],
    );
    assert_eq!(c.changes[0].path.to_string(), "a");
    assert_eq!(c.class, Some(ChangeClass::RebootRequired));
}

#[test]
fn arrays_are_compared_as_a_whole_at_their_path() {
    let mut a = auth_config("https://a.example");
    let mut b = a.clone();
    a["configuration"]["jwt"][0]["issuer"]["audiences"] = json!(["x", "y"]);
    b["configuration"]["jwt"][0]["issuer"]["audiences"] = json!(["y", "x"]);
    let c = classify(&[a], &[b]);
    assert_eq!(c.changes.len(), 1);
    assert_eq!(c.changes[0].path.to_string(), "configuration.jwt");
}

#[test]
fn documents_are_matched_by_api_version_kind_and_name() {
    let link = |name: &str, mtu: u32| json!({"apiVersion": "v1alpha1", "kind": "LinkConfig", "name": name, "mtu": mtu});
    let c = classify(
        &[link("eth0", 1500), link("eth1", 1500)],
        &[link("eth1", 1500), link("eth0", 9000)],
    );
    assert_eq!(c.changes.len(), 1, "order of documents does not matter");
    assert_eq!(c.changes[0].document.to_string(), "LinkConfig/eth0");
    assert_eq!(c.changes[0].path.to_string(), "mtu");
}

#[test]
fn the_same_configuration_is_unchanged() {
    let docs = [main_doc("img:1", "cp-1"), auth_config("https://a.example")];
    let c = classify(&docs, &docs);
    assert!(c.is_unchanged());
    assert_eq!(c.class, None);
    assert_eq!(c.to_string(), "unchanged");
}

#[test]
fn duplicate_documents_are_compared_as_a_whole() {
    let dup = [hostname_doc("a"), hostname_doc("a")];
    assert!(classify(&dup, &dup).is_unchanged());
    let c = classify(&dup, &[hostname_doc("a"), hostname_doc("b")]);
    assert_eq!(c.changes.len(), 1);
    assert!(c.changes[0].path.is_whole_document());
}

#[test]
fn values_that_are_not_documents_still_classify_conservatively() {
    let c = classify(&[json!(1)], &[json!("x")]);
    assert_eq!(c.class, Some(ChangeClass::RebootRequired));
}

#[test]
fn path_segments_with_dots_are_quoted() {
    let labels =
        |v: &str| json!({"apiVersion": "v1alpha1", "kind": "X", "labels": {"node.kubernetes.io/role": v}});
    let c = classify(&[labels("a")], &[labels("b")]);
    assert_eq!(
        c.changes[0].path.to_string(),
        "labels.\"node.kubernetes.io/role\""
    );
}

#[test]
fn hashes_classify_each_document_by_its_whole_document_rule() {
    let old = hashes(&[
        ("KubeAuthenticationConfig", "aa"),
        ("v1alpha1", "11"),
        ("HostnameConfig", "h1"),
    ]);
    let same = classify_hashes(&old, &old);
    assert!(same.is_unchanged());

    let auth_only = hashes(&[
        ("KubeAuthenticationConfig", "bb"),
        ("v1alpha1", "11"),
        ("HostnameConfig", "h1"),
    ]);
    assert_eq!(
        classify_hashes(&old, &auth_only).class,
        Some(ChangeClass::ApiServerRestart)
    );

    // The install rule is a field rule: at document granularity the main document is reboot-required.
    let main = hashes(&[
        ("KubeAuthenticationConfig", "aa"),
        ("v1alpha1", "22"),
        ("HostnameConfig", "h1"),
    ]);
    assert_eq!(
        classify_hashes(&old, &main).class,
        Some(ChangeClass::RebootRequired)
    );

    let removed = hashes(&[("KubeAuthenticationConfig", "aa"), ("v1alpha1", "11")]);
    let c = classify_hashes(&old, &removed);
    assert_eq!(
        (c.changes[0].change, c.class),
        (ChangeKind::Removed, Some(ChangeClass::RebootRequired))
    );

    let c = classify_hashes(&BTreeMap::new(), &hashes(&[("KubeAuthenticationConfig", "aa")]));
    assert_eq!(
        (c.changes[0].change, c.class),
        (ChangeKind::Added, Some(ChangeClass::ApiServerRestart))
    );
}

#[test]
fn realistic_changes_classify_as_snapshotted() {
    let base = main_doc("factory.talos.dev/installer:v1.14.3", "cp-1");
    let cases = [
        (
            "authentication config changed",
            classify(
                &[base.clone(), auth_config("https://ichor.example.com")],
                &[base.clone(), auth_config("https://ichor.example.org")],
            ),
        ),
        (
            "unknown document changed",
            classify(
                &[base.clone(), hostname_doc("cp-1")],
                &[base.clone(), hostname_doc("cp-one")],
            ),
        ),
        (
            "installer image changed",
            classify(
                std::slice::from_ref(&base),
                &[main_doc("factory.talos.dev/installer:v1.14.4", "cp-1")],
            ),
        ),
        (
            "nothing changed",
            classify(std::slice::from_ref(&base), std::slice::from_ref(&base)),
        ),
    ];
    let rendered: Vec<_> = cases
        .iter()
        .map(|(name, c)| json!({"case": name, "classification": c, "text": c.to_string()}))
        .collect();
    insta::assert_yaml_snapshot!(rendered);
}
