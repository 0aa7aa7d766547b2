//! rollout: the plan that restarts the kube-apiserver of each control plane of a cluster, one at
//! a time, to take a new trust configuration (seed 000, "Amendment: the apiserver restart rolls
//! out one control plane at a time").
//!
//! [`plan`] decides which control planes need the restart (their applied document hashes
//! classify as [`ChangeClass::ApiServerRestart`] against the rendered ones) and in which order;
//! the executor in `reconcilers` carries each step out: apply the rendered machine configuration
//! with no reboot, then wait for that node's `https://<address>:6443/readyz` before the next.
//! No drain (the node keeps its workloads), no reboot (identity never reboots a machine).
//! [`restart_required`] gives the `Ready` condition identity puts on each control plane meanwhile.
//!
//! # Caveats
//! - Only the document kinds in `desired_hashes` are compared: they are the documents the caller
//!   renders. Other documents on a machine belong to other subsystems and are not looked at.
//! - A machine that reports no applied document hashes at all (never applied by this controller,
//!   or applied before the hashes were recorded) is treated as needing the restart: applying the
//!   same configuration again is harmless and costs one restart, while skipping it could leave a
//!   control plane on an old trust configuration with nothing reporting it.
//! - The `/readyz` port is the Talos default, 6443 (spec talos-machine-api.md §5); a cluster
//!   that moves it with `KubeAPIServerConfig.apiPort` is not modelled here.

mod condition;

use std::{collections::BTreeMap, fmt, net::IpAddr};

use kube::ResourceExt;
use serde::Serialize;

pub use condition::{REASON_CONFIGURATION_APPLIED, ReadyCondition, restart_required};

use crate::{
    crd::{MachineRole, TalosMachine},
    fieldmeta::{ChangeClass, Classification, classify_hashes},
};

/// What the plan does, word for word as the seed's amendment says it.
pub const PLAN_SUMMARY: &str =
    "Restarts the Kubernetes API server on each control plane, one at a time; no reboot.";

/// The warning added when the cluster has a single control plane.
pub const SINGLE_CONTROL_PLANE_WARNING: &str = "This cluster has one control plane: the Kubernetes API is \
     unavailable while its API server restarts (typically 15 to 45 seconds).";

/// The kube-apiserver port whose `/readyz` each step waits for (Talos's default).
pub const APISERVER_PORT: u16 = 6443;

/// The rollout of an apiserver restart over one cluster's control planes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutPlan {
    /// The `TalosCluster` name.
    pub cluster: String,
    /// [`PLAN_SUMMARY`].
    pub summary: &'static str,
    /// How many control planes the cluster has (whether or not they need the restart).
    pub control_planes: usize,
    /// Warnings an operator must read before confirming (empty when there is nothing to do).
    pub warnings: Vec<String>,
    /// The steps, in the order they run; empty when every control plane is up to date.
    pub steps: Vec<RolloutStep>,
}

impl RolloutPlan {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

/// One control plane's restart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStep {
    /// The `TalosMachine` name.
    pub machine: String,
    /// Its address (`spec.address`).
    pub address: String,
    /// What the step does, as one sentence.
    pub action: String,
    /// The URL whose `200 ok` ends the step.
    pub readyz_url: String,
    /// The document kinds that differ from what the machine reports applied.
    pub documents: Vec<String>,
    /// The machine reports no applied documents at all (see the module's caveats).
    pub never_applied: bool,
}

/// Why no plan could be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RolloutError {
    /// A control plane's change needs a reboot, which this rollout never does.
    #[error(
        "cluster {cluster}: control plane {machine} needs a reboot to apply {documents}: an API server \
         restart rollout never reboots a machine, so this plan is refused; roll that change with a \
         reboot-capable config operation first"
    )]
    RebootRequired {
        /// The cluster.
        cluster: String,
        /// The first control plane (by name) that needs it.
        machine: String,
        /// The documents that need it, comma-separated.
        documents: String,
    },
    /// A control plane has no address the `/readyz` check can use.
    #[error(
        "cluster {cluster}: control plane {machine}: spec.address {address:?} is not an IP address or DNS \
         name, so its API server's /readyz cannot be checked; set spec.address"
    )]
    InvalidAddress {
        /// The cluster.
        cluster: String,
        /// The machine.
        machine: String,
        /// The address as written (at most 256 characters).
        address: String,
    },
}

/// The control planes of `cluster_name` (by `spec.cluster`), sorted by name then address.
pub(crate) fn control_planes<'a>(cluster_name: &str, machines: &'a [TalosMachine]) -> Vec<&'a TalosMachine> {
    let mut cps: Vec<&TalosMachine> = machines
        .iter()
        .filter(|m| m.spec.cluster == cluster_name && m.spec.role == MachineRole::ControlPlane)
        .collect();
    cps.sort_by(|a, b| (a.name_any(), &a.spec.address).cmp(&(b.name_any(), &b.spec.address)));
    cps
}

/// The machine's applied hashes of the kinds in `desired`, and whether it reports none at all.
pub(crate) fn classify_machine(
    machine: &TalosMachine,
    desired: &BTreeMap<String, String>,
) -> (Classification, bool) {
    let applied = machine.status.as_ref().map(|s| &s.applied_document_hashes);
    let never_applied = applied.is_none_or(BTreeMap::is_empty);
    let relevant: BTreeMap<String, String> = applied
        .into_iter()
        .flatten()
        .filter(|(kind, _)| desired.contains_key(*kind))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (classify_hashes(&relevant, desired), never_applied)
}

/// The apiserver-restart plan for the cluster `cluster_name`: one step per control plane whose
/// applied documents classify as [`ChangeClass::ApiServerRestart`] against `desired_hashes`
/// (document kind → sha256 hex of the rendered document), ordered by machine name. Workers are
/// never in it. Control planes whose change is [`ChangeClass::Safe`] are left to the machine
/// controller, which applies safe changes directly.
///
/// # Errors
/// [`RolloutError::RebootRequired`] when any control plane's change needs a reboot (the plan is
/// refused whole); [`RolloutError::InvalidAddress`] when a control plane to restart has an address
/// that no `/readyz` URL can be made of.
pub fn plan(
    cluster_name: &str,
    machines: &[TalosMachine],
    desired_hashes: &BTreeMap<String, String>,
) -> Result<RolloutPlan, RolloutError> {
    let cps = control_planes(cluster_name, machines);
    let mut steps = Vec::new();
    for machine in &cps {
        let (classification, never_applied) = classify_machine(machine, desired_hashes);
        let documents: Vec<String> = classification
            .documents()
            .iter()
            .map(|d| d.kind.clone())
            .collect();
        match classification.class {
            Some(ChangeClass::RebootRequired) => {
                let reboot: Vec<&str> = classification
                    .changes
                    .iter()
                    .filter(|c| c.class == ChangeClass::RebootRequired)
                    .map(|c| c.document.kind.as_str())
                    .collect();
                return Err(RolloutError::RebootRequired {
                    cluster: cluster_name.to_owned(),
                    machine: machine.name_any(),
                    documents: reboot.join(", "),
                });
            }
            Some(ChangeClass::ApiServerRestart) => {
                let address = machine.spec.address.as_str();
                let readyz_url = readyz_url(address).ok_or_else(|| RolloutError::InvalidAddress {
                    cluster: cluster_name.to_owned(),
                    machine: machine.name_any(),
                    address: address.chars().take(256).collect(),
                })?;
                steps.push(RolloutStep {
                    machine: machine.name_any(),
                    address: address.to_owned(),
                    action: format!(
                        "apply the rendered machine configuration (no reboot), then wait for {readyz_url}"
                    ),
                    readyz_url,
                    documents,
                    never_applied,
                });
            }
            Some(ChangeClass::Safe) | None => {}
        }
    }
    let warnings = if !steps.is_empty() && cps.len() == 1 {
        vec![SINGLE_CONTROL_PLANE_WARNING.to_owned()]
    } else {
        Vec::new()
    };
    Ok(RolloutPlan {
        cluster: cluster_name.to_owned(),
        summary: PLAN_SUMMARY,
        control_planes: cps.len(),
        warnings,
        steps,
    })
}

/// `https://<address>:6443/readyz`, with an IPv6 address in brackets; `None` when `address` is
/// neither an IP address nor a DNS name.
pub fn readyz_url(address: &str) -> Option<String> {
    let host = match address.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => format!("[{v6}]"),
        Ok(IpAddr::V4(v4)) => v4.to_string(),
        Err(_) if is_dns_name(address) => address.to_ascii_lowercase(),
        Err(_) => return None,
    };
    Some(format!("https://{host}:{APISERVER_PORT}/readyz"))
}

/// RFC 1123 host name: dot-separated labels of letters, digits and `-`, each 1 to 63 long and not
/// starting or ending with `-`, 253 characters at most.
fn is_dns_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

impl fmt::Display for RolloutPlan {
    /// The text `ichor config apply` and `ichor render` print.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.steps.is_empty() {
            return write!(
                f,
                "Cluster {}: nothing to do; every control plane runs the rendered configuration.",
                self.cluster
            );
        }
        writeln!(f, "Cluster {}: {}", self.cluster, self.summary)?;
        for warning in &self.warnings {
            writeln!(f, "Warning: {warning}")?;
        }
        for (i, step) in self.steps.iter().enumerate() {
            write!(
                f,
                "\n{}. {} ({}): {}.",
                i + 1,
                step.machine,
                step.address,
                step.action
            )?;
            if step.never_applied {
                write!(
                    f,
                    "\n   It reports no applied configuration, so it is restarted to be sure it runs the rendered one."
                )?;
            } else {
                write!(f, "\n   Changed: {}.", step.documents.join(", "))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
