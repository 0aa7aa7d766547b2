//! The Talos machine API as both binaries use it: the `ichor` CLI (`ichor config apply`) and the
//! controller (the rolling apiserver restart).
//!
//! - [`talosconfig`]: the `talosconfig` file that holds the mutual-TLS credentials.
//! - [`proto`]: the generated protobuf subset (machine API, COSI state, the machine
//!   configuration resource).
//! - [`client`]: the calls made to a node (`Version`, `ApplyConfiguration`, reading its machine
//!   configuration).
//! - [`machine_config`]: the pure merge of a rendered document into a node's configuration.
//! - [`readyz`]: the kube-apiserver `/readyz` probe and the wait for a restart.
//! - [`rollout`]: one rollout step on a node (read its configuration, merge, `NO_REBOOT` apply,
//!   rollback), as both the controller and the offline `ichor config apply --dir` perform it.
//!
//! Facts (field numbers, modes, the `node` metadata key, the Ed25519 key label) are from
//! `shared/spec/talos-machine-api.md`.
#![forbid(unsafe_code)]

pub mod client;
pub mod machine_config;
pub mod proto;
pub mod readyz;
pub mod rollout;
pub mod talosconfig;
