//! The golden tests, one binary: every rendered artifact against its insta snapshot
//! ([`render`]), the golden journals' replays ([`journals`]), our AuthenticationConfiguration
//! validator against the real kube-apiserver's verdicts ([`apiserver_validator`]), every
//! rendered KubeAuthenticationConfig through Talos's own validator ([`talos_validator`]), and
//! the names of the design spelled only in `ichor_renderers::contract` ([`contract`]).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod apiserver_validator;
mod contract;
mod journals;
mod render;
mod snapshot_bodies;
mod talos_validator;
