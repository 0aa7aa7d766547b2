//! The parts of `TalosMachine` identity needs: which cluster, which role, where, and what was
//! last applied to it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// A Talos node of a cluster (identity's view).
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "ichor.maesh.dev",
    version = "v1alpha1",
    kind = "TalosMachine",
    plural = "talosmachines",
    namespaced,
    status = "TalosMachineStatus",
    derive = "PartialEq",
    doc = "A Talos node of a cluster (identity's view: cluster, role, address, applied configuration)."
)]
#[serde(rename_all = "camelCase")]
pub struct TalosMachineSpec {
    /// The name of the `TalosCluster` (same namespace) this machine belongs to.
    #[schemars(length(max = 253))]
    pub cluster: String,
    /// Control plane or worker.
    pub role: MachineRole,
    /// The node's address (IP or DNS name) for the Talos API (50000) and the kube-apiserver (6443).
    #[schemars(length(max = 253))]
    pub address: String,
}

/// The role of a machine in its cluster.
#[derive(
    schemars::JsonSchema,
    Serialize,
    Deserialize,
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
)]
#[serde(rename_all = "lowercase")]
pub enum MachineRole {
    /// Runs etcd and the kube-apiserver.
    #[serde(rename = "controlplane")]
    ControlPlane,
    /// Runs workloads only.
    #[default]
    Worker,
}

/// What is applied on the machine, and whether it needs an apiserver restart.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TalosMachineStatus {
    /// sha256 of the whole machine configuration last applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_config_hash: Option<String>,
    /// sha256 (hex) of each machine-config document last applied, keyed by document kind (for
    /// example `KubeAuthenticationConfig`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub applied_document_hashes: BTreeMap<String, String>,
    /// `Ready`; `Ready=False` with reason `APIServerRestartRequired` when the rendered
    /// authentication document differs from the applied one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
