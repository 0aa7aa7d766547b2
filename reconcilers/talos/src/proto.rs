//! The generated code of `proto/talos/machine.proto` (package `machine`): the messages, the
//! `MachineService` client, and a server trait the tests implement to fake a Talos node.

#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("machine");
