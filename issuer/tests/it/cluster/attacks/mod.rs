//! Attacks on a real control plane under the chart's RBAC, one file per attack, each named by it.

mod compromised_issuer_impersonates_the_controller_manager;
mod deleted_admin_held_by_her_own_finalizer;
