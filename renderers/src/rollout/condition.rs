//! The `Ready` condition identity sets on control planes waiting for an apiserver restart.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use serde::Serialize;

use crate::{
    crd::{CONDITION_READY, MachineRole, REASON_APISERVER_RESTART_REQUIRED, TalosMachine},
    fieldmeta::ChangeClass,
};

use super::classify_machine;

/// Reason of the `Ready=True` condition identity writes when a control plane it had marked
/// `APIServerRestartRequired` runs the rendered configuration again.
pub const REASON_CONFIGURATION_APPLIED: &str = "ConfigurationApplied";

/// The `Ready` condition identity wants on one machine (without the timestamps, which the
/// caller owns).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadyCondition {
    /// `Ready` true or false.
    pub status: bool,
    /// The condition's reason (CamelCase).
    pub reason: &'static str,
    /// A sentence for the operator.
    pub message: String,
}

impl ReadyCondition {
    /// The Kubernetes condition. `last_transition_time` must be the previous condition's time
    /// when its status does not change (Kubernetes convention); the caller knows which.
    pub fn to_condition(
        &self,
        last_transition_time: jiff::Timestamp,
        observed_generation: Option<i64>,
    ) -> Condition {
        Condition {
            type_: CONDITION_READY.to_owned(),
            status: if self.status { "True" } else { "False" }.to_owned(),
            reason: self.reason.to_owned(),
            message: self.message.clone(),
            last_transition_time: Time(last_transition_time),
            observed_generation,
        }
    }
}

/// The `Ready` conditions identity must write, by machine name (sorted):
/// - `Ready=False`, reason `APIServerRestartRequired`, on every control plane whose applied
///   documents classify as [`ChangeClass::ApiServerRestart`] against `desired_hashes`, the
///   message naming the changed documents and the command that rolls them;
/// - `Ready=True`, reason [`REASON_CONFIGURATION_APPLIED`], on every control plane that reports
///   `Ready=False/APIServerRestartRequired` but whose applied documents now match.
///
/// Machines not listed keep whatever `Ready` condition they have: identity sets and clears only
/// its own reason (the machine controller owns the rest, including reboot-required changes).
/// Workers never carry the authentication document, so they are never listed.
pub fn restart_required(
    machines: &[TalosMachine],
    desired_hashes: &BTreeMap<String, String>,
) -> Vec<(String, ReadyCondition)> {
    let mut out: Vec<(String, ReadyCondition)> = machines
        .iter()
        .filter(|m| m.spec.role == MachineRole::ControlPlane)
        .filter_map(|machine| {
            let (classification, _) = classify_machine(machine, desired_hashes);
            let condition = match classification.class {
                Some(ChangeClass::ApiServerRestart) => {
                    let documents: Vec<&str> = classification
                        .documents()
                        .iter()
                        .map(|d| d.kind.as_str())
                        .collect();
                    ReadyCondition {
                        status: false,
                        reason: REASON_APISERVER_RESTART_REQUIRED,
                        message: format!(
                            "{} changed: the Kubernetes API server must restart to apply it (no reboot); \
                             run `ichor config apply` to restart the control planes one at a time",
                            documents.join(", ")
                        ),
                    }
                }
                None | Some(ChangeClass::Safe) if reports_restart_required(machine) => ReadyCondition {
                    status: true,
                    reason: REASON_CONFIGURATION_APPLIED,
                    message: "The API server runs the rendered configuration.".to_owned(),
                },
                _ => return None,
            };
            Some((machine.name_any(), condition))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Whether the machine currently reports `Ready=False` with reason `APIServerRestartRequired`.
fn reports_restart_required(machine: &TalosMachine) -> bool {
    machine.status.iter().flat_map(|s| &s.conditions).any(|c| {
        c.type_ == CONDITION_READY && c.status == "False" && c.reason == REASON_APISERVER_RESTART_REQUIRED
    })
}
