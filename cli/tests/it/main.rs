//! The integration tests of `ichor-cli`, one binary with a module per area (one link of the CLI
//! and the issuer instead of one per file). [`support`], [`user_support`] and [`dev_support`]
//! hold what several areas share that the test kit (`ichor_testkit`) does not; [`apiserver`]
//! runs on a real control plane, one at a time in nextest's control-plane group.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

mod dev_support;
mod support;
mod user_support;

mod apiserver;
mod attacks;
mod auth;
mod auth_cache;
mod auth_logout;
mod auth_slow_down;
mod config_apply;
mod dev_e2e;
mod key_retention;
mod kubectl;
mod launcher;
mod node;
mod offline;
mod user_api;
mod user_bootstrap;
