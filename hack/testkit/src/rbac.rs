//! Least privilege, measured: the RBAC rules a manifest (the chart) grants a ServiceAccount,
//! matched against what that ServiceAccount actually asked the API server (its audit events).
//!
//! [`grants_for`] reads the Roles, ClusterRoles and their bindings from a YAML stream and keeps
//! those bound to one ServiceAccount; [`usage`] walks the audit events of that account and
//! reports each request the authorizer refused, each request allowed by something other than
//! those grants, and each verb and resource of each granted rule that no request used. The
//! matching is RBAC's own (`rbac/v1` `PolicyRule` semantics: API group, resource or
//! `resource/subresource`, verb, resource names, the binding's namespace); an impersonated
//! request uses the `impersonate` verb on `users/<name>` and `groups/<group>` (legacy
//! impersonation) or, allowed by a constrained mode (`impersonate:user-info`), that verb on
//! `authentication.k8s.io` `users/<name>` and `groups/<group>` and `impersonate-on:<mode>:<verb>`
//! on the object it acts on; and a
//! server-side apply that creates its object uses `create` of that name as well as `patch`.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context as _;
use serde::Deserialize;

use crate::control_plane::AuditEvent;

/// One `rbac/v1` PolicyRule (resource rules only).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// API groups (`""`: core).
    #[serde(default)]
    pub api_groups: Vec<String>,
    /// Resources (`secrets`, `ichorusers/status`).
    #[serde(default)]
    pub resources: Vec<String>,
    /// When not empty, the only object names the rule covers.
    #[serde(default)]
    pub resource_names: Vec<String>,
    /// Verbs.
    #[serde(default)]
    pub verbs: Vec<String>,
}

fn any_or(list: &[String], value: &str) -> bool {
    list.iter().any(|v| v == "*" || v == value)
}

impl Rule {
    /// Whether the rule covers `verb` on `resource` (with `/subresource`) named `name` in
    /// `group`, the way the RBAC authorizer decides.
    pub fn covers(&self, group: &str, resource: &str, name: &str, verb: &str) -> bool {
        any_or(&self.api_groups, group)
            && any_or(&self.resources, resource)
            && any_or(&self.verbs, verb)
            && (self.resource_names.is_empty()
                || (!name.is_empty() && self.resource_names.iter().any(|n| n == name)))
    }
}

/// A role bound to the ServiceAccount, where it applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// `Role ichor-system/ichor-controller` or `ClusterRole ichor-controller`.
    pub role: String,
    /// The namespace the grant holds in (`None`: every namespace and cluster-scoped objects).
    pub namespace: Option<String>,
    /// The role's rules.
    pub rules: Vec<Rule>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Doc {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    rules: Vec<Rule>,
    #[serde(default)]
    role_ref: Option<RoleRef>,
    #[serde(default)]
    subjects: Vec<Subject>,
}

#[derive(Default, Deserialize)]
struct Meta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: Option<String>,
}

#[derive(Deserialize)]
struct RoleRef {
    kind: String,
    name: String,
}

#[derive(Deserialize)]
struct Subject {
    kind: String,
    name: String,
    #[serde(default)]
    namespace: Option<String>,
}

/// The grants of the ServiceAccount `namespace/name` in the YAML stream `manifest`: each Role
/// or ClusterRole a RoleBinding or ClusterRoleBinding of the stream binds to it.
///
/// # Errors
/// A document that is not YAML, or a binding whose role is not in the stream.
pub fn grants_for(manifest: &str, namespace: &str, name: &str) -> anyhow::Result<Vec<Grant>> {
    let mut roles: BTreeMap<(String, Option<String>, String), Vec<Rule>> = BTreeMap::new();
    let mut bindings = Vec::new();
    for (n, document) in serde_yaml::Deserializer::from_str(manifest).enumerate() {
        let value =
            serde_yaml::Value::deserialize(document).with_context(|| format!("document {n} is not YAML"))?;
        if value.is_null() {
            continue;
        }
        let doc: Doc = serde_yaml::from_value(value).with_context(|| format!("document {n}"))?;
        match doc.kind.as_str() {
            "Role" => {
                roles.insert(
                    ("Role".into(), doc.metadata.namespace, doc.metadata.name),
                    doc.rules,
                );
            }
            "ClusterRole" => {
                roles.insert(("ClusterRole".into(), None, doc.metadata.name), doc.rules);
            }
            "RoleBinding" | "ClusterRoleBinding" => bindings.push(doc),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for b in bindings {
        let bound = b.subjects.iter().any(|s| {
            s.kind == "ServiceAccount" && s.name == name && s.namespace.as_deref() == Some(namespace)
        });
        let Some(role_ref) = b.role_ref.filter(|_| bound) else {
            continue;
        };
        let where_ = if b.kind == "RoleBinding" {
            b.metadata.namespace.clone()
        } else {
            None
        };
        let role_ns = if role_ref.kind == "Role" {
            b.metadata.namespace.clone()
        } else {
            None
        };
        let key = (role_ref.kind.clone(), role_ns.clone(), role_ref.name.clone());
        let rules = roles.get(&key).with_context(|| {
            format!(
                "{} {} binds {} {}, which the manifest does not hold",
                b.kind, b.metadata.name, role_ref.kind, role_ref.name
            )
        })?;
        let role = match &role_ns {
            Some(ns) => format!("{} {ns}/{}", role_ref.kind, role_ref.name),
            None => format!("{} {}", role_ref.kind, role_ref.name),
        };
        out.push(Grant {
            role,
            namespace: where_,
            rules: rules.clone(),
        });
    }
    Ok(out)
}

/// What the ServiceAccount did with its grants.
#[derive(Debug, Default)]
pub struct Usage {
    /// Requests the authorizer refused that no granted rule covers (`verb resource ns/name:
    /// reason`): what the grants lack.
    pub forbidden: Vec<String>,
    /// Requests refused although a granted rule covers them (an apiserver refuses while its
    /// RBAC cache is still empty after a start).
    pub refused_while_granted: usize,
    /// Requests allowed, but by no rule of the grants.
    pub outside: Vec<String>,
    /// Each verb and resource of each granted rule that no request used
    /// (`Role ichor-system/ichor-controller rule 2: patch secrets [ichor-user-credentials]`).
    pub unused: Vec<String>,
    /// How many requests each `verb resource` made (for the note).
    pub requests: BTreeMap<String, usize>,
}

impl Usage {
    /// What two runs under the same grants did together (two layouts of one store, say): every
    /// request of either, and as unused only what neither used.
    #[must_use]
    pub fn and(mut self, other: Usage) -> Usage {
        self.forbidden.extend(other.forbidden);
        self.refused_while_granted += other.refused_while_granted;
        self.outside.extend(other.outside);
        self.unused.retain(|rule| other.unused.contains(rule));
        for (request, n) in other.requests {
            *self.requests.entry(request).or_default() += n;
        }
        self
    }

    /// Fails naming each request that the grants refused (`who` lacks it) or that something
    /// else allowed.
    ///
    /// # Errors
    /// Either list is not empty.
    pub fn check_granted(&self, who: &str) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.forbidden.is_empty(),
            "the chart does not grant what {who} needs: {:#?}",
            self.forbidden
        );
        anyhow::ensure!(
            self.outside.is_empty(),
            "{who} was allowed by something other than the chart: {:#?}",
            self.outside
        );
        Ok(())
    }

    /// Fails naming each granted verb that no request used, but those in `exempt`.
    ///
    /// # Errors
    /// Some granted verb is unused.
    pub fn check_all_used(&self, who: &str, exempt: &[&str]) -> anyhow::Result<()> {
        let unused: Vec<&String> = self
            .unused
            .iter()
            .filter(|u| !exempt.contains(&u.as_str()))
            .collect();
        anyhow::ensure!(
            unused.is_empty(),
            "the chart grants what {who} never used: {unused:#?}"
        );
        Ok(())
    }
}

/// One authorization check of a request: group, resource (with `/subresource`), namespace,
/// name, verb.
struct Check {
    group: String,
    resource: String,
    namespace: String,
    name: String,
    verb: String,
}

fn checks_of(event: &AuditEvent) -> Vec<Check> {
    let mut out = Vec::new();
    if let Some(user) = &event.impersonated_user {
        let constraint = event
            .authentication_metadata
            .as_ref()
            .map(|m| m.impersonation_constraint.as_str())
            .filter(|c| c.starts_with("impersonate:"));
        let (group, verb) = match constraint {
            Some(c) => ("authentication.k8s.io", c),
            None => ("", "impersonate"),
        };
        out.push(Check {
            group: group.into(),
            resource: "users".into(),
            namespace: String::new(),
            name: user.username.clone(),
            verb: verb.into(),
        });
        for g in user.groups.iter().filter(|g| *g != "system:authenticated") {
            out.push(Check {
                group: group.into(),
                resource: "groups".into(),
                namespace: String::new(),
                name: g.clone(),
                verb: verb.into(),
            });
        }
        if let (Some(c), Some(o)) = (constraint, &event.object_ref) {
            let mode = c.trim_start_matches("impersonate:");
            let resource = if o.subresource.is_empty() {
                o.resource.clone()
            } else {
                format!("{}/{}", o.resource, o.subresource)
            };
            out.push(Check {
                group: o.api_group.clone(),
                resource,
                namespace: o.namespace.clone(),
                name: o.name.clone(),
                verb: format!("impersonate-on:{mode}:{}", event.verb),
            });
        }
    } else if let Some(o) = &event.object_ref {
        let resource = if o.subresource.is_empty() {
            o.resource.clone()
        } else {
            format!("{}/{}", o.resource, o.subresource)
        };
        // A server-side apply that creates its object (201) is also authorized as a create of
        // that name, inside the request (no audit event of its own).
        if event.verb == "patch" && event.code() == 201 {
            out.push(Check {
                group: o.api_group.clone(),
                resource: resource.clone(),
                namespace: o.namespace.clone(),
                name: o.name.clone(),
                verb: "create".into(),
            });
        }
        out.push(Check {
            group: o.api_group.clone(),
            resource,
            namespace: o.namespace.clone(),
            name: o.name.clone(),
            verb: event.verb.clone(),
        });
    }
    out
}

/// Matches the audit events of `username` against `grants`.
pub fn usage(grants: &[Grant], events: &[AuditEvent], username: &str) -> Usage {
    let mut out = Usage::default();
    let mut seen = BTreeSet::new();
    let mut used: BTreeSet<(usize, usize, String, String)> = BTreeSet::new();
    for event in events.iter().filter(|e| e.user.username == username) {
        if !seen.insert(event.audit_id.clone()) {
            continue;
        }
        let checks = checks_of(event);
        if checks.is_empty() {
            continue;
        }
        *out.requests.entry(event.describe()).or_default() += 1;
        // An impersonated request is decided for the person it names: its refusal says nothing
        // of the impersonation, which passed.
        let refused =
            event.impersonated_user.is_none() && (event.decision() == Some("forbid") || event.code() == 403);
        for check in &checks {
            let mut matched = false;
            for (g, grant) in grants.iter().enumerate() {
                if grant.namespace.as_ref().is_some_and(|ns| *ns != check.namespace) {
                    continue;
                }
                for (r, rule) in grant.rules.iter().enumerate() {
                    if rule.covers(&check.group, &check.resource, &check.name, &check.verb) {
                        matched = true;
                        if !refused {
                            used.insert((g, r, check.verb.clone(), check.resource.clone()));
                        }
                    }
                }
            }
            match (matched, refused) {
                (false, true) => out
                    .forbidden
                    .push(format!("{}: {}", event.describe(), event.reason())),
                // Granted, yet refused: an apiserver that has not loaded its RBAC objects yet
                // (just started) answers 403 for a while.
                (true, true) => out.refused_while_granted += 1,
                (false, false) if event.impersonated_user.is_none() => {
                    out.outside
                        .push(format!("{}: {}", event.describe(), event.reason()));
                }
                _ => {}
            }
        }
    }
    for (g, grant) in grants.iter().enumerate() {
        for (r, rule) in grant.rules.iter().enumerate() {
            for verb in &rule.verbs {
                for resource in &rule.resources {
                    if !used.contains(&(g, r, verb.clone(), resource.clone())) {
                        let names = if rule.resource_names.is_empty() {
                            String::new()
                        } else {
                            format!(" {:?}", rule.resource_names)
                        };
                        out.unused
                            .push(format!("{} rule {r}: {verb} {resource}{names}", grant.role));
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const MANIFEST: &str = "\
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: r, namespace: ns}
rules:
- apiGroups: [\"\"]
  resources: [secrets]
  resourceNames: [a]
  verbs: [get, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: r, namespace: ns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}
subjects: [{kind: ServiceAccount, name: sa, namespace: ns}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: other}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: missing}
subjects: [{kind: ServiceAccount, name: someone-else, namespace: ns}]
";

    fn event(id: &str, verb: &str, name: &str, decision: &str) -> AuditEvent {
        serde_json::from_value(serde_json::json!({
            "auditID": id, "stage": "ResponseComplete", "verb": verb, "requestURI": "/x",
            "user": {"username": "system:serviceaccount:ns:sa"},
            "objectRef": {"resource": "secrets", "namespace": "ns", "name": name},
            "responseStatus": {"code": if decision == "allow" { 200 } else { 403 }},
            "annotations": {"authorization.k8s.io/decision": decision}
        }))
        .unwrap()
    }

    #[test]
    fn a_used_verb_counts_an_unused_one_is_named_and_a_refusal_is_reported() {
        let grants = grants_for(MANIFEST, "ns", "sa").unwrap();
        assert_eq!(grants.len(), 1, "only the binding of this account counts");
        assert_eq!(grants[0].role, "Role ns/r");
        let events = [
            event("1", "get", "a", "allow"),
            event("1", "get", "a", "allow"),
            event("2", "get", "b", "forbid"),
        ];
        let u = usage(&grants, &events, "system:serviceaccount:ns:sa");
        assert_eq!(u.unused, ["Role ns/r rule 0: update secrets [\"a\"]"]);
        assert_eq!(u.forbidden.len(), 1, "{:?}", u.forbidden);
        assert!(u.outside.is_empty());
        assert_eq!(u.requests.values().sum::<usize>(), 2, "one request per audit ID");
    }

    #[test]
    fn a_constrained_impersonation_uses_the_mode_verb_and_the_impersonate_on_verb() {
        let manifest = "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: imp}
rules:
  - {apiGroups: [authentication.k8s.io], resources: [users], verbs: ['impersonate:user-info']}
  - {apiGroups: [authentication.k8s.io], resources: [groups], resourceNames: ['ichor:admin'], verbs: ['impersonate:user-info']}
  - {apiGroups: [''], resources: [users], verbs: [impersonate]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: imp}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: imp}
subjects: [{kind: ServiceAccount, name: sa, namespace: ns}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: on, namespace: ns}
rules:
  - {apiGroups: [ichor.maesh.dev], resources: [ichorusers], verbs: ['impersonate-on:user-info:create', 'impersonate-on:user-info:delete']}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: on, namespace: ns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: on}
subjects: [{kind: ServiceAccount, name: sa, namespace: ns}]
";
        let grants = grants_for(manifest, "ns", "sa").unwrap();
        let event: AuditEvent = serde_json::from_value(serde_json::json!({
            "auditID": "1", "stage": "ResponseComplete", "verb": "create", "requestURI": "/x",
            "user": {"username": "system:serviceaccount:ns:sa"},
            "impersonatedUser": {"username": "ichor:alice", "groups": ["ichor:admin", "system:authenticated"]},
            "authenticationMetadata": {"impersonationConstraint": "impersonate:user-info"},
            "objectRef": {"resource": "ichorusers", "namespace": "ns", "apiGroup": "ichor.maesh.dev"},
            "responseStatus": {"code": 201},
            "annotations": {"authorization.k8s.io/decision": "allow"}
        }))
        .unwrap();
        let u = usage(&grants, &[event], "system:serviceaccount:ns:sa");
        assert!(u.outside.is_empty() && u.forbidden.is_empty(), "{u:?}");
        assert_eq!(
            u.unused,
            [
                "ClusterRole imp rule 2: impersonate users",
                "Role ns/on rule 0: impersonate-on:user-info:delete ichorusers"
            ]
        );
    }

    #[test]
    fn a_named_rule_does_not_cover_a_create_nor_another_name() {
        let rule = Rule {
            api_groups: vec![String::new()],
            resources: vec!["secrets".into()],
            resource_names: vec!["a".into()],
            verbs: vec!["create".into(), "get".into()],
        };
        assert!(!rule.covers("", "secrets", "", "create"));
        assert!(!rule.covers("", "secrets", "b", "get"));
        assert!(!rule.covers("", "secrets/status", "a", "get"));
        assert!(rule.covers("", "secrets", "a", "get"));
    }
}
