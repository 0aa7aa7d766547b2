#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::auth::roles::BuiltinRole;

const ICHOR: &str = "ichor.maesh.dev";
const SYS: &str = "ichor-system";

fn builtin() -> Authorizer {
    Authorizer::new(Policy::builtin().unwrap())
}

fn member_of(role: BuiltinRole) -> Subject {
    Subject::new(
        format!("ichor:{}-user", role.name()),
        &[role.group(), "system:authenticated"],
    )
}

const ICHOR_RESOURCES: [&str; 8] = [
    "talosclusters",
    "talosmachines",
    "talosconfigpatches",
    "talosoperations",
    "talosstorages",
    "talosetcdbackups",
    "ichorinstallations",
    "ichorusers",
];

const ICHOR_SUBRESOURCES: [&str; 18] = [
    "ichorusers/password",
    "ichorinstallations/users",
    "ichorusers/status",
    "talosclusters/authentication",
    "talosclusters/cilium-values",
    "talosclusters/endpoint",
    "talosclusters/credentials",
    "talosclusters/status",
    "talosoperations/shutdown",
    "talosoperations/ca-rotation",
    "talosoperations/etcd-restore",
    "talosoperations/node-reset",
    "talosoperations/node-shutdown",
    "talosoperations/config",
    "talosoperations/node-reboot",
    "talosmachines/support-bundle",
    "talosmachines/etcd-snapshot",
    "talosmachines/packet-capture",
];

const CORE_RESOURCES: [&str; 8] = [
    "nodes",
    "pods",
    "services",
    "secrets",
    "configmaps",
    "events",
    "pods/portforward",
    "pods/exec",
];

const VERBS: [&str; 14] = [
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "start",
    "override",
    "download",
    "impersonate",
    "escalate",
    "bind",
];

const NAMESPACES: [&str; 3] = [SYS, "default", ""];

/// ADR 0094 decision 4's table (with the events, cilium-values, installation-users and endpoint
/// amendments), written out independently of the YAML: what `role` may do.
fn table_allows(role: BuiltinRole, a: &Attributes) -> bool {
    use BuiltinRole::{Admin, Operator};
    let resource = a.combined_resource();
    let verb = a.verb.as_str();
    let in_system = a.namespace == SYS;
    let read = matches!(verb, "get" | "list" | "watch");
    match (a.api_group.as_str(), resource.as_str()) {
        // viewer
        (
            ICHOR,
            "talosclusters" | "talosmachines" | "talosconfigpatches" | "talosoperations" | "talosstorages"
            | "talosetcdbackups" | "ichorinstallations",
        ) if read => true,
        ("", "nodes" | "pods") if matches!(verb, "get" | "list") => true,
        ("", "services") if in_system && matches!(verb, "get" | "list") => true,
        ("", "pods/portforward") if in_system && verb == "create" => true,
        ("" | "events.k8s.io", "events") if in_system && read => true,
        // operator
        (ICHOR, "talosconfigpatches" | "talosoperations")
            if role >= Operator && matches!(verb, "create" | "update" | "patch" | "delete") =>
        {
            true
        }
        (ICHOR, "talosmachines" | "talosclusters" | "ichorinstallations")
            if role >= Operator && matches!(verb, "update" | "patch") =>
        {
            true
        }
        // admin
        (ICHOR, "talosmachines" | "talosclusters") if role == Admin && verb == "delete" => true,
        (ICHOR, "ichorusers")
            if role == Admin
                && matches!(
                    verb,
                    "get" | "list" | "watch" | "create" | "update" | "patch" | "delete" | "deletecollection"
                ) =>
        {
            true
        }
        (
            ICHOR,
            "ichorusers/password"
            | "ichorinstallations/users"
            | "talosclusters/authentication"
            | "talosclusters/cilium-values"
            | "talosclusters/endpoint",
        ) if role == Admin && verb == "update" => true,
        (
            ICHOR,
            "talosoperations/shutdown"
            | "talosoperations/ca-rotation"
            | "talosoperations/etcd-restore"
            | "talosoperations/node-reset"
            | "talosoperations/node-shutdown",
        ) if role == Admin && verb == "start" => true,
        (ICHOR, "talosclusters" | "talosconfigpatches" | "talosmachines")
            if role == Admin && verb == "override" =>
        {
            true
        }
        (
            ICHOR,
            "talosmachines/support-bundle"
            | "talosmachines/etcd-snapshot"
            | "talosmachines/packet-capture"
            | "talosclusters/credentials",
        ) if role == Admin && verb == "download" => true,
        _ => false,
    }
}

/// Every request the exhaustive test asks about.
fn universe() -> Vec<Attributes> {
    let mut out = Vec::new();
    let split = |r: &str| match r.split_once('/') {
        Some((res, sub)) => (res.to_owned(), sub.to_owned()),
        None => (r.to_owned(), String::new()),
    };
    let groups: [(&str, Vec<&str>); 3] = [
        (
            ICHOR,
            ICHOR_RESOURCES
                .iter()
                .chain(&ICHOR_SUBRESOURCES)
                .copied()
                .collect(),
        ),
        ("", CORE_RESOURCES.to_vec()),
        ("events.k8s.io", vec!["events"]),
    ];
    for (group, resources) in &groups {
        for r in resources {
            let (resource, sub) = split(r);
            for verb in VERBS {
                for ns in NAMESPACES {
                    out.push(
                        Attributes::new(verb, group, &resource)
                            .subresource(&sub)
                            .namespace(ns)
                            .name("x"),
                    );
                }
            }
        }
    }
    out
}

#[test]
fn the_shipped_file_parses_into_the_three_roles_their_bindings_and_the_namespaced_access() {
    let policy = Policy::builtin().unwrap();
    let names: Vec<_> = policy
        .cluster_roles
        .iter()
        .map(|r| r.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["ichor-viewer", "ichor-operator", "ichor-admin"]);
    for role in BuiltinRole::ALL {
        let binding = policy
            .cluster_role_bindings
            .iter()
            .find(|b| b.metadata.name.as_deref() == Some(role.cluster_role()))
            .unwrap();
        assert_eq!(binding.role_ref.kind, "ClusterRole");
        assert_eq!(binding.role_ref.name, role.cluster_role());
        let subjects = binding.subjects.as_deref().unwrap();
        assert_eq!(subjects.len(), 1);
        assert_eq!(
            (subjects[0].kind.as_str(), subjects[0].name.as_str()),
            ("Group", role.group())
        );
    }
    assert_eq!(policy.cluster_role_bindings.len(), 3);
    assert_eq!(policy.roles.len(), 1);
    assert_eq!(policy.roles[0].metadata.namespace.as_deref(), Some(SYS));
    assert_eq!(policy.role_bindings.len(), 1);
    let groups: Vec<_> = policy.role_bindings[0]
        .subjects
        .as_deref()
        .unwrap()
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(groups, ["ichor:viewer", "ichor:operator", "ichor:admin"]);
}

#[test]
fn every_built_in_role_allows_exactly_what_the_decision_4_table_says() {
    let authorizer = builtin();
    let mut checked = 0;
    for role in BuiltinRole::ALL {
        let subject = member_of(role);
        for attributes in universe() {
            let want = table_allows(role, &attributes);
            assert_eq!(
                authorizer.allows(&subject, &attributes),
                want,
                "{role}: {attributes:?} should be {}",
                if want { "allowed" } else { "denied" }
            );
            checked += 1;
        }
    }
    assert!(checked > 3000, "only {checked} requests checked");
}

#[test]
fn each_role_includes_every_right_of_the_one_below() {
    let authorizer = builtin();
    for attributes in universe() {
        let [viewer, operator, admin] =
            BuiltinRole::ALL.map(|r| authorizer.allows(&member_of(r), &attributes));
        assert!(!viewer || operator, "operator lacks {attributes:?}");
        assert!(!operator || admin, "admin lacks {attributes:?}");
    }
}

#[test]
fn viewer_rows_allowed_and_denied() {
    let a = builtin();
    let viewer = member_of(BuiltinRole::Viewer);
    assert!(a.allows(
        &viewer,
        &Attributes::new("watch", ICHOR, "talosetcdbackups").namespace(SYS)
    ));
    assert!(a.allows(&viewer, &Attributes::new("list", "", "nodes")));
    assert!(
        a.allows(
            &viewer,
            &Attributes::new("create", "", "pods")
                .subresource("portforward")
                .namespace(SYS)
        )
    );
    assert!(
        !a.allows(
            &viewer,
            &Attributes::new("create", "", "pods")
                .subresource("portforward")
                .namespace("kube-system")
        )
    );
    assert!(!a.allows(
        &viewer,
        &Attributes::new("get", "", "services").namespace("default")
    ));
    assert!(!a.allows(
        &viewer,
        &Attributes::new("get", ICHOR, "ichorusers").namespace(SYS)
    ));
    assert!(
        !a.allows(&viewer, &Attributes::new("get", "", "events")),
        "no cluster-wide events"
    );
    assert!(!a.allows(
        &viewer,
        &Attributes::new("update", ICHOR, "talosclusters").namespace(SYS)
    ));
}

#[test]
fn operator_rows_allowed_and_denied() {
    let a = builtin();
    let operator = member_of(BuiltinRole::Operator);
    assert!(a.allows(
        &operator,
        &Attributes::new("create", ICHOR, "talosoperations").namespace(SYS)
    ));
    assert!(a.allows(&operator, &Attributes::new("patch", ICHOR, "ichorinstallations")));
    assert!(!a.allows(
        &operator,
        &Attributes::new("delete", ICHOR, "talosmachines").namespace(SYS)
    ));
    assert!(
        !a.allows(
            &operator,
            &Attributes::new("update", ICHOR, "talosclusters")
                .subresource("authentication")
                .namespace(SYS)
        )
    );
    assert!(
        !a.allows(
            &operator,
            &Attributes::new("update", ICHOR, "talosclusters")
                .subresource("cilium-values")
                .namespace(SYS)
        )
    );
    assert!(
        !a.allows(
            &operator,
            &Attributes::new("start", ICHOR, "talosoperations")
                .subresource("shutdown")
                .namespace(SYS)
        )
    );
    assert!(!a.allows(
        &operator,
        &Attributes::new("create", ICHOR, "ichorusers").namespace(SYS)
    ));
}

#[test]
fn admin_rows_allowed_and_denied() {
    let a = builtin();
    let admin = member_of(BuiltinRole::Admin);
    assert!(
        a.allows(
            &admin,
            &Attributes::new("update", ICHOR, "ichorusers")
                .subresource("password")
                .namespace(SYS)
        )
    );
    assert!(
        a.allows(
            &admin,
            &Attributes::new("start", ICHOR, "talosoperations")
                .subresource("node-reset")
                .namespace(SYS)
        )
    );
    assert!(
        a.allows(
            &admin,
            &Attributes::new("download", ICHOR, "talosclusters")
                .subresource("credentials")
                .namespace(SYS)
        )
    );
    assert!(a.allows(
        &admin,
        &Attributes::new("override", ICHOR, "talosmachines").namespace(SYS)
    ));
    assert!(
        !a.allows(
            &admin,
            &Attributes::new("patch", ICHOR, "ichorusers")
                .subresource("password")
                .namespace(SYS)
        )
    );
    assert!(!a.allows(&admin, &Attributes::new("get", "", "secrets").namespace(SYS)));
    assert!(!a.allows(&admin, &Attributes::new("impersonate", "", "users")));
    assert!(
        !a.allows(
            &admin,
            &Attributes::new("update", ICHOR, "talosclusters")
                .subresource("status")
                .namespace(SYS)
        )
    );
}

#[test]
fn no_built_in_object_mentions_secrets_impersonate_escalate_bind_or_a_wildcard() {
    let policy = Policy::builtin().unwrap();
    let rules = policy
        .cluster_roles
        .iter()
        .flat_map(|r| r.rules.clone().unwrap_or_default())
        .chain(
            policy
                .roles
                .iter()
                .flat_map(|r| r.rules.clone().unwrap_or_default()),
        );
    let mut count = 0;
    for rule in rules {
        count += 1;
        for verb in &rule.verbs {
            assert!(
                !["*", "impersonate", "escalate", "bind"].contains(&verb.as_str()),
                "{rule:?}"
            );
        }
        for group in rule.api_groups.iter().flatten() {
            assert_ne!(group, "*", "{rule:?}");
        }
        for resource in rule.resources.iter().flatten() {
            assert!(
                resource != "*" && !resource.starts_with("*/") && !resource.contains("secret"),
                "{rule:?}"
            );
        }
        assert!(rule.non_resource_urls.is_none(), "{rule:?}");
    }
    assert!(count >= 10);
    // And nothing at all in the file says it, not even a name.
    for line in BUILTIN_ROLES_YAML
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
    {
        assert!(
            !line.contains("secrets") && !line.contains("impersonate") && !line.contains('*'),
            "{line}"
        );
    }
}

#[test]
fn users_outside_the_built_in_groups_get_nothing() {
    let a = builtin();
    for subject in [
        Subject::new("ichor:nobody", &["system:authenticated"]),
        Subject::new("ichor:custom", &["ichor:auditor"]),
        Subject::new("ichor:admin", &["admin"]),
    ] {
        for attributes in universe() {
            assert!(!a.allows(&subject, &attributes), "{subject:?} {attributes:?}");
        }
    }
}

const CUSTOM: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: one-user-reader}
rules:
  - apiGroups: ["ichor.maesh.dev"]
    resources: ["ichorusers"]
    resourceNames: ["alice"]
    verbs: ["get"]
  - apiGroups: ["ichor.maesh.dev"]
    resources: ["*/status"]
    verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: bob-reads-alice}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: one-user-reader}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: User, name: "ichor:bob"}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: sa-in-default, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ichor-admin}
subjects:
  - {kind: ServiceAccount, name: robot}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: dangling}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: does-not-exist}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: Group, name: "ichor:dangling"}
"#;

#[test]
fn a_user_binding_honours_resource_names_and_star_subresources() {
    let a = Authorizer::new(Policy::builtin().unwrap().extend(Policy::parse(CUSTOM).unwrap()));
    let bob = Subject::new("ichor:bob", &[] as &[&str]);
    let get = |name: &str| {
        Attributes::new("get", ICHOR, "ichorusers")
            .namespace(SYS)
            .name(name)
    };
    assert!(a.allows(&bob, &get("alice")));
    assert!(!a.allows(&bob, &get("carol")));
    assert!(!a.allows(&bob, &Attributes::new("list", ICHOR, "ichorusers").namespace(SYS)));
    assert!(a.allows(
        &bob,
        &Attributes::new("get", ICHOR, "talosclusters").subresource("status")
    ));
    assert!(
        !a.allows(&bob, &Attributes::new("get", ICHOR, "talosclusters")),
        "*/status is not the resource"
    );
    let carol = Subject::new("ichor:carol", &[] as &[&str]);
    assert!(!a.allows(&carol, &get("alice")));
}

#[test]
fn a_role_binding_grants_only_in_its_namespace_and_matches_service_accounts_there() {
    let a = Authorizer::new(Policy::builtin().unwrap().extend(Policy::parse(CUSTOM).unwrap()));
    let robot = Subject::new("system:serviceaccount:default:robot", &[] as &[&str]);
    let delete = Attributes::new("delete", ICHOR, "talosclusters");
    assert!(a.allows(&robot, &delete.clone().namespace("default")));
    assert!(!a.allows(&robot, &delete.clone().namespace(SYS)));
    assert!(
        !a.allows(&robot, &delete),
        "a RoleBinding grants nothing cluster-wide"
    );
    let other = Subject::new("system:serviceaccount:other:robot", &[] as &[&str]);
    assert!(!a.allows(
        &other,
        &Attributes::new("delete", ICHOR, "talosclusters").namespace("default")
    ));
}

#[test]
fn a_binding_to_a_missing_role_grants_nothing() {
    let a = Authorizer::new(Policy::parse(CUSTOM).unwrap());
    let s = Subject::new("ichor:x", &["ichor:dangling"]);
    assert!(!a.allows(&s, &Attributes::new("get", ICHOR, "talosclusters")));
}

#[test]
fn a_star_rule_matches_anything_it_names() {
    let yaml = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: all}
rules: [{apiGroups: ["*"], resources: ["*"], verbs: ["*"]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: all}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: all}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: root}]
"#;
    let a = Authorizer::new(Policy::parse(yaml).unwrap());
    let root = Subject::new("r", &["root"]);
    assert!(
        a.allows(
            &root,
            &Attributes::new("escalate", "x.io", "things")
                .subresource("sub")
                .name("n")
        )
    );
}

#[test]
fn parsing_refuses_other_kinds_and_versions_naming_the_document() {
    let err = Policy::parse("apiVersion: v1\nkind: Secret\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "document 1: apiVersion \"v1\" is not rbac.authorization.k8s.io/v1"
    );
    let err = Policy::parse("---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Whatever\n").unwrap_err();
    assert!(
        err.to_string().starts_with("document 1: kind \"Whatever\""),
        "{err}"
    );
    let err = Policy::parse(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r}\nrules: []\n",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "document 1: Role \"r\" has no metadata.namespace"
    );
}
