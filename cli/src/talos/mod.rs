//! A client for the Talos machine API (`machine.MachineService` on port 50000 of every node):
//! the `talosconfig` file that holds the mutual-TLS credentials ([`talosconfig`]), the
//! generated protobuf subset ([`proto`]) and the calls `ichor config apply` makes ([`client`]).
//!
//! Facts (field numbers, modes, the `node` metadata key, the Ed25519 key label) are from
//! `shared/spec/talos-machine-api.md`.

pub mod client;
pub mod proto;
pub mod talosconfig;
