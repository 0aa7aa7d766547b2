//! The apiservers' audit log, for tests that must know what a component asked the API server
//! and what RBAC answered: every request of a ServiceAccount at the `Metadata` level (no bodies),
//! nothing of anyone else. [`Options::audit`](super::Options::audit) turns it on; each apiserver
//! writes its own `audit.log` (JSON lines, written before the response, the log backend's
//! `blocking` mode), and [`ControlPlane::audit_events`] reads them all.

use std::path::Path;

use anyhow::Context as _;
use serde::Deserialize;

use super::ControlPlane;

/// The audit policy: the requests of ServiceAccounts, metadata only; a watch is recorded when it
/// starts (`ResponseStarted`) as well as when it ends.
pub const AUDIT_POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: [\"system:serviceaccounts\"]
- level: None
";

/// The object a request was about, as the apiserver's request info saw it (a list or watch with
/// the field selector `metadata.name=N` carries the name `N`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// The resource (`secrets`), without the subresource.
    #[serde(default)]
    pub resource: String,
    /// The subresource (`status`), empty when none.
    #[serde(default)]
    pub subresource: String,
    /// The namespace, empty for a cluster-scoped request.
    #[serde(default)]
    pub namespace: String,
    /// The object's name, empty for a create or a list of many.
    #[serde(default)]
    pub name: String,
    /// The API group, empty for the core group.
    #[serde(default)]
    pub api_group: String,
}

/// Who made a request (or whom it impersonated).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct UserInfo {
    /// The user name.
    #[serde(default)]
    pub username: String,
    /// The groups.
    #[serde(default)]
    pub groups: Vec<String>,
}

/// How a request was authenticated.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticationMetadata {
    /// The constrained impersonation mode's verb that allowed the impersonation
    /// (`impersonate:user-info`); empty for legacy impersonation.
    #[serde(default)]
    pub impersonation_constraint: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct ResponseStatus {
    #[serde(default)]
    code: u16,
}

/// One audit event (the fields tests read).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    /// The request's ID (one request has an event per stage).
    #[serde(rename = "auditID")]
    pub audit_id: String,
    /// `ResponseStarted` (long-running requests) or `ResponseComplete`, `Panic`.
    pub stage: String,
    /// The Kubernetes verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`).
    pub verb: String,
    /// The request URI.
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    /// Who authenticated.
    pub user: UserInfo,
    /// Whom the request impersonated, if anyone.
    #[serde(default)]
    pub impersonated_user: Option<UserInfo>,
    /// How the request was authenticated (which constrained impersonation mode allowed it).
    #[serde(default)]
    pub authentication_metadata: Option<AuthenticationMetadata>,
    /// The object, absent for a non-resource URL (`/api`, `/version`).
    #[serde(default)]
    pub object_ref: Option<ObjectRef>,
    #[serde(default)]
    response_status: Option<ResponseStatus>,
    /// `authorization.k8s.io/decision`, `authorization.k8s.io/reason`, …
    #[serde(default)]
    pub annotations: std::collections::BTreeMap<String, String>,
}

impl AuditEvent {
    /// The HTTP status of the answer (0 while a long-running request has not ended).
    pub fn code(&self) -> u16 {
        self.response_status.as_ref().map_or(0, |s| s.code)
    }

    /// The authorizer's decision (`allow`, `forbid`), if it was asked.
    pub fn decision(&self) -> Option<&str> {
        self.annotations
            .get("authorization.k8s.io/decision")
            .map(String::as_str)
    }

    /// Why the authorizer decided so (`RBAC: allowed by RoleBinding "…" of Role "…" to …`).
    pub fn reason(&self) -> &str {
        self.annotations
            .get("authorization.k8s.io/reason")
            .map_or("", String::as_str)
    }

    /// `verb resource[/subresource] namespace/name` for messages.
    pub fn describe(&self) -> String {
        match &self.object_ref {
            Some(o) => {
                let resource = if o.subresource.is_empty() {
                    o.resource.clone()
                } else {
                    format!("{}/{}", o.resource, o.subresource)
                };
                let group = if o.api_group.is_empty() {
                    String::new()
                } else {
                    format!(".{}", o.api_group)
                };
                format!("{} {resource}{group} {}/{}", self.verb, o.namespace, o.name)
            }
            None => format!("{} {}", self.verb, self.request_uri),
        }
    }
}

/// Reads one audit log; a line cut by a write in progress (the last one) is skipped.
pub fn read_audit_log(path: &Path) -> anyhow::Result<Vec<AuditEvent>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    for (n, line) in lines.iter().enumerate() {
        match serde_json::from_str::<AuditEvent>(line) {
            Ok(e) => out.push(e),
            Err(_) if n + 1 == lines.len() && !text.ends_with('\n') => {}
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("{} line {}: not an audit event", path.display(), n + 1));
            }
        }
    }
    Ok(out)
}

impl ControlPlane {
    /// Every audit event of every apiserver so far, one per request and stage (empty unless the
    /// control plane started with [`Options::audit`](super::Options::audit)).
    pub fn audit_events(&self) -> anyhow::Result<Vec<AuditEvent>> {
        let mut all = Vec::new();
        for i in 0..self.len() {
            all.extend(read_audit_log(&self.audit_log(i))?);
        }
        Ok(all)
    }

    /// Apiserver `i`'s audit log.
    pub fn audit_log(&self, i: usize) -> std::path::PathBuf {
        self.root.join(format!("apiserver-{i}")).join("audit.log")
    }
}
