//! [`Authorizer`]: the kube-apiserver's RBAC decision for resource requests, as a pure function
//! of a [`Policy`], a [`Subject`] and the request's [`Attributes`].
//!
//! Semantics (those of `plugin/pkg/auth/authorizer/rbac` in Kubernetes):
//! - a ClusterRoleBinding grants its ClusterRole's rules in every namespace and cluster-wide; a
//!   RoleBinding grants its Role's (or ClusterRole's) rules in its own namespace only;
//! - a binding applies when a subject is the `User` of that name, a `Group` the subject is in,
//!   or the `ServiceAccount` whose user name is `system:serviceaccount:<ns>:<name>` (a missing
//!   namespace is the binding's);
//! - a rule allows when its verbs, API groups, resources and resource names all match; `*` in
//!   verbs, groups or resources matches anything; a subresource request matches the rule
//!   resource `resource/subresource` or `*/subresource` only, never the bare `resource`; empty
//!   `resourceNames` matches any name;
//! - RBAC only allows: nothing matching is a denial. A binding whose role does not exist grants
//!   nothing.
//!
//! Non-resource requests (URL paths) are not modelled: no Ichor call asks about one.

use k8s_openapi::api::rbac::v1::{PolicyRule, Subject as RbacSubject};

use super::policy::Policy;

/// Who asks: the Kubernetes user name and groups (for an Ichor user `ichor:<name>` and
/// `ichor:<role>` per role).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subject {
    /// The user name.
    pub user: String,
    /// The groups.
    pub groups: Vec<String>,
}

impl Subject {
    /// A subject with a user name and groups.
    pub fn new<S: AsRef<str>>(user: impl Into<String>, groups: &[S]) -> Self {
        Self {
            user: user.into(),
            groups: groups.iter().map(|g| g.as_ref().to_owned()).collect(),
        }
    }
}

/// What is asked for: the resource attributes of a request (as in a `SubjectAccessReview`'s
/// `resourceAttributes`). An empty string means "not set" for every field but `verb` and
/// `resource`; the core API group is the empty string; an empty `namespace` is a cluster-wide
/// request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Attributes {
    /// `get`, `list`, `create`, … or a custom verb (`start`, `override`, `download`).
    pub verb: String,
    /// The API group (`""` for core).
    pub api_group: String,
    /// The resource (plural).
    pub resource: String,
    /// The subresource, or empty.
    pub subresource: String,
    /// The namespace, or empty for cluster-wide.
    pub namespace: String,
    /// The object's name, or empty.
    pub name: String,
}

impl Attributes {
    /// A request for `verb` on `resource` of `api_group`, cluster-wide, any name.
    pub fn new(verb: &str, api_group: &str, resource: &str) -> Self {
        Self {
            verb: verb.to_owned(),
            api_group: api_group.to_owned(),
            resource: resource.to_owned(),
            ..Self::default()
        }
    }

    /// The same request on a subresource.
    #[must_use]
    pub fn subresource(mut self, subresource: &str) -> Self {
        self.subresource = subresource.to_owned();
        self
    }

    /// The same request in a namespace.
    #[must_use]
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = namespace.to_owned();
        self
    }

    /// The same request on one named object.
    #[must_use]
    pub fn name(mut self, name: &str) -> Self {
        self.name = name.to_owned();
        self
    }

    /// `resource` or `resource/subresource`, as RBAC rules name it.
    pub fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// Evaluates requests against a [`Policy`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Authorizer {
    policy: Policy,
}

const ALL: &str = "*";
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

impl Authorizer {
    /// An authorizer over these objects.
    pub fn new(policy: Policy) -> Self {
        Self { policy }
    }

    /// The policy evaluated.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Whether RBAC allows `subject` to do what `attributes` describe.
    pub fn allows(&self, subject: &Subject, attributes: &Attributes) -> bool {
        self.granting_rules(subject, &attributes.namespace)
            .any(|rule| rule_allows(rule, attributes))
    }

    /// Every rule granted to `subject` that applies in `namespace` (empty: cluster-wide only).
    fn granting_rules<'a>(
        &'a self,
        subject: &'a Subject,
        namespace: &'a str,
    ) -> impl Iterator<Item = &'a PolicyRule> + 'a {
        let cluster = self
            .policy
            .cluster_role_bindings
            .iter()
            .filter(move |b| applies_to(subject, b.subjects.as_deref().unwrap_or_default(), ""))
            .filter(|b| b.role_ref.kind == "ClusterRole" && b.role_ref.api_group == RBAC_GROUP)
            .filter_map(|b| self.policy.cluster_role(&b.role_ref.name))
            .flat_map(|r| r.rules.as_deref().unwrap_or_default());
        let namespaced = self
            .policy
            .role_bindings
            .iter()
            .filter(move |b| !namespace.is_empty() && b.metadata.namespace.as_deref() == Some(namespace))
            .filter(move |b| applies_to(subject, b.subjects.as_deref().unwrap_or_default(), namespace))
            .filter(|b| b.role_ref.api_group == RBAC_GROUP)
            .flat_map(move |b| {
                let rules = match b.role_ref.kind.as_str() {
                    "ClusterRole" => self
                        .policy
                        .cluster_role(&b.role_ref.name)
                        .and_then(|r| r.rules.as_deref()),
                    "Role" => self
                        .policy
                        .role(namespace, &b.role_ref.name)
                        .and_then(|r| r.rules.as_deref()),
                    _ => None,
                };
                rules.unwrap_or_default()
            });
        cluster.chain(namespaced)
    }
}

/// Whether a binding with `subjects` (in `binding_namespace`, empty for a ClusterRoleBinding)
/// applies to `subject`.
fn applies_to(subject: &Subject, subjects: &[RbacSubject], binding_namespace: &str) -> bool {
    subjects.iter().any(|s| match s.kind.as_str() {
        "User" => s.name == subject.user,
        "Group" => subject.groups.contains(&s.name),
        "ServiceAccount" => {
            let ns = s
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_namespace);
            !ns.is_empty() && subject.user == format!("system:serviceaccount:{ns}:{}", s.name)
        }
        _ => false,
    })
}

/// Whether one rule allows a resource request.
fn rule_allows(rule: &PolicyRule, attributes: &Attributes) -> bool {
    let matches = |list: &[String], value: &str| list.iter().any(|v| v == ALL || v == value);
    matches(&rule.verbs, &attributes.verb)
        && matches(
            rule.api_groups.as_deref().unwrap_or_default(),
            &attributes.api_group,
        )
        && resource_matches(rule.resources.as_deref().unwrap_or_default(), attributes)
        && name_matches(
            rule.resource_names.as_deref().unwrap_or_default(),
            &attributes.name,
        )
}

fn resource_matches(resources: &[String], attributes: &Attributes) -> bool {
    let combined = attributes.combined_resource();
    let sub = attributes.subresource.as_str();
    resources.iter().any(|r| {
        r == ALL
            || *r == combined
            || (!sub.is_empty() && r.strip_prefix("*/").is_some_and(|rest| rest == sub))
    })
}

fn name_matches(names: &[String], name: &str) -> bool {
    names.is_empty() || names.iter().any(|n| n == name)
}
