//! The integration tests of `ichor-issuer`, one binary with a module per area (one link of the
//! issuer instead of one per file). The modules ending in `_common` and [`common`] hold what
//! several areas share that the test kit (`ichor_testkit::issuer`) does not; [`cluster`] runs on
//! a real control plane, one at a time in nextest's control-plane group.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

mod api_common;
mod common;
mod conformance_common;
mod server_common;

mod api_kube_backend;
mod api_kube_review;
mod api_server;
mod api_service;
mod attacks;
mod chart_contract;
mod cluster;
mod conformance_go_oidc;
mod conformance_openidconnect;
mod faults;
mod flows;
mod id_tokens;
mod known_devices;
mod login_timing;
mod passkey_ceremony;
mod passkey_sign_in;
mod protocol_edges;
mod revoke_and_discovery;
mod second_factor;
mod second_factor_policy;
mod server_cli;
mod server_http;
mod server_reload;
mod server_tls;
mod side_channels;
mod sign_in;
mod source_limits;
mod store_kube;
mod store_local;
