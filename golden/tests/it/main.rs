//! The golden tests, one binary: every rendered artifact against its insta snapshot
//! ([`render`]), the golden journals' replays ([`journals`]), our AuthenticationConfiguration
//! validator against the real kube-apiserver's verdicts ([`apiserver_validator`]), and every
//! rendered KubeAuthenticationConfig through Talos's own validator ([`talos_validator`]).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod apiserver_validator;
mod journals;
mod render;
mod talos_validator;
