//! The generated code of the hand-written protobuf subsets in `proto/`: at the top, the Talos
//! machine API (`proto/talos/machine.proto`, package `machine`: the messages, the
//! `MachineService` client, and a server trait the tests implement to fake a Talos node); in
//! [`cosi`] the COSI state's `Get`; in [`config`] the spec of the machine configuration resource.

#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("machine");

/// The COSI resource state (package `cosi.resource`): `State.Get`, its client and a server
/// trait the tests implement.
pub mod cosi {
    tonic::include_proto!("cosi.resource");
}

/// Talos's configuration resources (package `resource.config`): `MachineConfigSpec`, the
/// `proto_spec` of a `MachineConfigs.config.talos.dev` resource.
pub mod config {
    tonic::include_proto!("resource.config");
}
