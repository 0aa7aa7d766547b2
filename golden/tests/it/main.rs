//! The golden tests, one binary: every rendered artifact against its insta snapshot
//! ([`render`]), the golden journals' replays ([`journals`]), and our AuthenticationConfiguration
//! validator against the real kube-apiserver's verdicts ([`apiserver_validator`]).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod apiserver_validator;
mod journals;
mod render;
