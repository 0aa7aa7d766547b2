//! The full render of one cluster: its `KubeAuthenticationConfig`, how each control plane's
//! applied configuration compares with it, and the rollout that brings them in line.
//!
//! This is the pure core of `ichor render`, of the controller's per-cluster nodes and of
//! `ichor config apply`'s plan; it composes [`crate::authn`], [`crate::fieldmeta`] and
//! [`crate::rollout`].

use std::collections::BTreeMap;

use serde::Serialize;

use crate::{
    auth::second_factor_policy::SecondFactorPolicy,
    authn::{self, IchorTrust, RenderError, Rendered},
    contract::USER_PREFIX,
    crd::{MachineRole, TalosCluster, TalosMachine},
    fieldmeta::{self, Classification},
    rollout::{self, ReadyCondition, RolloutError, RolloutPlan},
    trust::IssuerTrust,
};

/// The document kind identity renders into each control plane's machine configuration.
pub const AUTHENTICATION_DOCUMENT: &str = crate::authn::talos::TALOS_KIND;

/// Everything rendered for one cluster.
#[derive(Debug, Clone)]
pub struct ClusterRender {
    /// `namespace/name` of the `TalosCluster`.
    pub cluster: String,
    /// The authentication document, or why there is none. An invalid configuration never
    /// leaves the renderer: it is an error here, never a document.
    pub authentication: Result<Rendered, RenderError>,
    /// One entry per machine of the cluster (sorted by name).
    pub machines: Vec<MachineRender>,
    /// The apiserver-restart rollout (absent when nothing was rendered).
    pub rollout: Option<Result<RolloutPlan, RolloutError>>,
}

/// How one machine's applied configuration compares with the render.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineRender {
    /// The `TalosMachine` name.
    pub name: String,
    /// Control plane or worker.
    pub role: MachineRole,
    /// The change between what the machine reports applied and what was rendered (workers
    /// carry no authentication document, so theirs is always empty).
    pub classification: Classification,
    /// The `Ready` condition identity wants on it, when identity has an opinion.
    pub condition: Option<ReadyCondition>,
}

impl ClusterRender {
    /// The document hashes the machines are compared against (empty without a document).
    pub fn desired_hashes(&self) -> BTreeMap<String, String> {
        match &self.authentication {
            Ok(r) => BTreeMap::from([(AUTHENTICATION_DOCUMENT.to_owned(), r.sha256.clone())]),
            Err(_) => BTreeMap::new(),
        }
    }
}

impl From<&IssuerTrust> for IchorTrust {
    fn from(t: &IssuerTrust) -> Self {
        IchorTrust {
            discovery_url: t.discovery_url.clone(),
            ca_pem: t.ca_pem.clone(),
        }
    }
}

/// Render one cluster. `machines` may hold machines of other clusters; only those whose
/// `spec.cluster` names this cluster (in its namespace) are considered. `second_factor` is the
/// installation's policy in force ([`crate::crd::second_factor_in_force`]): a change of it that
/// changes the rendered rules changes the document, so the control planes restart like for any
/// other change of it.
pub fn render_cluster(
    cluster: &TalosCluster,
    machines: &[TalosMachine],
    trust: Option<&IssuerTrust>,
    second_factor: &SecondFactorPolicy,
) -> ClusterRender {
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let ichor_trust = trust.map(IchorTrust::from);
    let authentication = authn::render(cluster, ichor_trust.as_ref(), second_factor);

    let mut own: Vec<TalosMachine> = machines
        .iter()
        .filter(|m| m.spec.cluster == name && m.metadata.namespace.clone().unwrap_or_default() == namespace)
        .cloned()
        .collect();
    own.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));

    let desired: BTreeMap<String, String> = match &authentication {
        Ok(r) => BTreeMap::from([(AUTHENTICATION_DOCUMENT.to_owned(), r.sha256.clone())]),
        Err(_) => BTreeMap::new(),
    };
    let conditions: BTreeMap<String, ReadyCondition> = if desired.is_empty() {
        BTreeMap::new()
    } else {
        rollout::restart_required(&own, &desired).into_iter().collect()
    };

    let machines = own
        .iter()
        .map(|m| {
            let machine_name = m.metadata.name.clone().unwrap_or_default();
            let classification = if m.spec.role == MachineRole::ControlPlane && !desired.is_empty() {
                let applied = m.status.as_ref().map(|s| &s.applied_document_hashes);
                let applied: BTreeMap<String, String> = applied
                    .map(|a| {
                        a.iter()
                            .filter(|(k, _)| desired.contains_key(*k))
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect()
                    })
                    .unwrap_or_default();
                fieldmeta::classify_hashes(&applied, &desired)
            } else {
                Classification::default()
            };
            MachineRender {
                condition: conditions.get(&machine_name).cloned(),
                name: machine_name,
                role: m.spec.role,
                classification,
            }
        })
        .collect();

    let rollout = (!desired.is_empty()).then(|| rollout::plan(&name, &own, &desired));
    ClusterRender {
        cluster: format!("{namespace}/{name}"),
        authentication,
        machines,
        rollout,
    }
}

/// The report of a whole directory of manifests: what `ichor render` prints and the golden
/// tests pin.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RenderReport {
    /// Problems with the inputs that are not tied to one cluster (the trust ConfigMap, the
    /// installation settings, users), each naming the object and field.
    pub problems: Vec<String>,
    /// One entry per user.
    pub users: Vec<UserReport>,
    /// One entry per cluster.
    pub clusters: Vec<ClusterReport>,
}

/// A user as the issuer would see it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UserReport {
    /// `namespace/name`.
    pub user: String,
    /// The Kubernetes user name (`ichor:<name>`).
    pub kubernetes_user: String,
    /// The Kubernetes groups (`ichor:<role>`).
    pub groups: Vec<String>,
    /// Whether the user is disabled.
    pub disabled: bool,
}

/// One cluster in a [`RenderReport`].
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterReport {
    /// `namespace/name`.
    pub cluster: String,
    /// sha256 of the rendered document, when one was rendered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The rendered `KubeAuthenticationConfig` document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document: Option<serde_json::Value>,
    /// The document as applied (YAML, in the document's own field order), for people.
    #[serde(skip)]
    pub yaml: Option<String>,
    /// Why nothing was rendered (one line per error, each naming the field).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// Each machine's classification and condition.
    pub machines: Vec<MachineRender>,
    /// The rollout plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutPlan>,
    /// Why no rollout plan could be made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout_error: Option<String>,
}

impl RenderReport {
    /// Whether every cluster rendered and nothing was wrong with the inputs.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
            && self
                .clusters
                .iter()
                .all(|c| c.errors.is_empty() && c.rollout_error.is_none())
    }
}

/// Render every cluster of a directory of manifests. The trust comes from the ConfigMap
/// `ichor-system/ichor-oidc-trust` when the directory has one, the second-factor policy from its
/// `IchorInstallation` when it has one ([`installations_second_factor`]).
pub fn render_manifests(manifests: &crate::manifest::Manifests) -> RenderReport {
    use crate::{auth::roles, crd::UsersSettings, trust};

    let mut problems = Vec::new();
    let trust_cm = manifests.configmaps.iter().find(|cm| {
        cm.metadata.name.as_deref() == Some(trust::TRUST_CONFIGMAP)
            && cm.metadata.namespace.as_deref() == Some(trust::NAMESPACE)
    });
    let issuer_trust = match trust_cm.map(IssuerTrust::from_configmap) {
        Some(Ok(t)) => Some(t),
        Some(Err(e)) => {
            problems.push(format!(
                "ConfigMap {}/{}: {e}",
                trust::NAMESPACE,
                trust::TRUST_CONFIGMAP
            ));
            None
        }
        None => None,
    };
    for inst in &manifests.installations {
        if let Err(e) = UsersSettings::resolve(inst.spec.users.as_ref()) {
            problems.push(format!(
                "IchorInstallation {}: {e}",
                inst.metadata.name.as_deref().unwrap_or_default()
            ));
        }
    }
    let mut users = Vec::new();
    for u in &manifests.users {
        let name = u.metadata.name.clone().unwrap_or_default();
        let ns = u.metadata.namespace.clone().unwrap_or_default();
        if let Err(e) = crate::auth::user_name::UserName::parse(&name) {
            problems.push(format!("IchorUser {ns}/{name}: {e}"));
        }
        for e in roles::role_errors(&u.spec.roles) {
            problems.push(format!("IchorUser {ns}/{name}: {e}"));
        }
        users.push(UserReport {
            user: format!("{ns}/{name}"),
            kubernetes_user: format!("{USER_PREFIX}{name}"),
            groups: u.spec.roles.iter().map(|r| format!("{USER_PREFIX}{r}")).collect(),
            disabled: u.spec.disabled,
        });
    }
    let second_factor = installations_second_factor(&manifests.installations);
    let clusters = manifests
        .clusters
        .iter()
        .map(|c| {
            let r = render_cluster(c, &manifests.machines, issuer_trust.as_ref(), &second_factor);
            let (sha256, document, yaml, errors) = match &r.authentication {
                Ok(rendered) => (
                    Some(rendered.sha256.clone()),
                    serde_json::to_value(&rendered.document).ok(),
                    Some(rendered.yaml.clone()),
                    Vec::new(),
                ),
                Err(e) => (None, None, None, render_error_lines(e)),
            };
            let (rollout, rollout_error) = match r.rollout {
                Some(Ok(p)) => (Some(p), None),
                Some(Err(e)) => (None, Some(e.to_string())),
                None => (None, None),
            };
            ClusterReport {
                cluster: r.cluster,
                sha256,
                document,
                yaml,
                errors,
                machines: r.machines,
                rollout,
                rollout_error,
            }
        })
        .collect();
    RenderReport {
        problems,
        users,
        clusters,
    }
}

/// The second-factor policy in force for these `IchorInstallation`s, by the rule the issuer and
/// the controller use ([`crate::crd::second_factor_in_force`]: the first by name decides).
pub fn installations_second_factor(installations: &[crate::crd::IchorInstallation]) -> SecondFactorPolicy {
    let by_name = installations
        .iter()
        .map(|i| (i.metadata.name.clone().unwrap_or_default(), i.spec.users.clone()))
        .collect();
    crate::crd::second_factor_in_force(&by_name)
}

/// One line per error, each naming the field (the validator's list is split, not aggregated).
fn render_error_lines(e: &RenderError) -> Vec<String> {
    match e {
        RenderError::Invalid(errors) => errors
            .iter()
            .map(|e| format!("invalid authentication configuration: {e}"))
            .collect(),
        RenderError::Prefix(errors) => errors.iter().map(ToString::to_string).collect(),
        other => vec![other.to_string()],
    }
}

impl std::fmt::Display for RenderReport {
    /// The human report of `ichor render`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for p in &self.problems {
            writeln!(f, "problem: {p}")?;
        }
        for c in &self.clusters {
            writeln!(f, "# TalosCluster {}", c.cluster)?;
            if let (Some(yaml), Some(sha)) = (&c.yaml, &c.sha256) {
                writeln!(f, "## KubeAuthenticationConfig (sha256 {sha})")?;
                writeln!(f, "{}", yaml.trim_end())?;
            }
            for e in &c.errors {
                writeln!(f, "error: {e}")?;
            }
            if !c.machines.is_empty() {
                writeln!(f, "## Machines")?;
                for m in &c.machines {
                    let role = match m.role {
                        MachineRole::ControlPlane => "controlplane",
                        MachineRole::Worker => "worker",
                    };
                    let state = match &m.condition {
                        Some(cond) if !cond.status => {
                            format!("Ready=False ({}): {}", cond.reason, cond.message)
                        }
                        Some(cond) => format!("Ready=True ({})", cond.reason),
                        None => "up to date".to_owned(),
                    };
                    writeln!(f, "{:<24} {:<13} {state}", m.name, role)?;
                }
            }
            if let Some(plan) = &c.rollout {
                writeln!(f, "## Rollout plan")?;
                writeln!(f, "{}", plan.to_string().trim_end())?;
            }
            if let Some(e) = &c.rollout_error {
                writeln!(f, "error: {e}")?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}
