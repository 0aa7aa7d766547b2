//! The Ichor identity domain, pure: CRD types, the formats of every produced object, the render
//! functions, password hashing and policy rules, the `AuthenticationConfiguration` validator,
//! fieldmeta rules and rollout plans.
//!
//! Nothing in this crate touches the network or a Kubernetes client, and every render function
//! is deterministic: time comes in as an argument (`now`), randomness is requested as an effect.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod auth;
pub mod authn;
pub mod cluster;
pub mod cni;
pub mod contract;
pub mod crd;
pub mod fieldmeta;
pub mod manifest;
pub mod rbac;
pub mod rollout;
pub mod trust;
