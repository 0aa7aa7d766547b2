//! The bodies of the fuzz targets in `fuzz/` (one module per target, each with the `run` its
//! `cargo fuzz` binary calls on every input) and the fixtures they share ([`fixtures`]).
//!
//! Kept apart from `fuzz/` so that the root workspace builds them on the normal toolchain: its
//! test `tests/corpus.rs` feeds every committed seed (`fuzz/corpus/<target>/*`) to the same
//! function as the fuzzer, so the corpora are regression tests without libFuzzer or sanitizers.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod fixtures;

pub mod admission_review;
pub mod authn_config;
pub mod cli_oidc_responses;
pub mod credentials_entry;
pub mod credentials_entry_v2;
pub mod exec_credential_cache;
pub mod jws_tokens;
pub mod keys_json;
pub mod kubeconfig;
pub mod oidc_authorize_query;
pub mod oidc_factor_form;
pub mod oidc_revoke_form;
pub mod oidc_token_form;
pub mod talos_machine_config;
pub mod totp_code;
pub mod user_service_grpc;
pub mod webauthn_responses;

/// One fuzz target: its name (of the `cargo fuzz` binary, of `fuzz/fuzz_targets/<name>.rs` and of
/// the seed directory `fuzz/corpus/<name>/`) and the function its binary calls.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// The target's name.
    pub name: &'static str,
    /// Runs one input: returns normally or panics on a broken property.
    pub run: fn(&[u8]),
}

/// Every fuzz target, by name.
pub const TARGETS: &[Target] = &[
    target("admission_review", admission_review::run),
    target("authn_config", authn_config::run),
    target("cli_oidc_responses", cli_oidc_responses::run),
    target("credentials_entry", credentials_entry::run),
    target("credentials_entry_v2", credentials_entry_v2::run),
    target("exec_credential_cache", exec_credential_cache::run),
    target("jws_tokens", jws_tokens::run),
    target("keys_json", keys_json::run),
    target("kubeconfig", kubeconfig::run),
    target("oidc_authorize_query", oidc_authorize_query::run),
    target("oidc_factor_form", oidc_factor_form::run),
    target("oidc_revoke_form", oidc_revoke_form::run),
    target("oidc_token_form", oidc_token_form::run),
    target("talos_machine_config", talos_machine_config::run),
    target("totp_code", totp_code::run),
    target("user_service_grpc", user_service_grpc::run),
    target("webauthn_responses", webauthn_responses::run),
];

const fn target(name: &'static str, run: fn(&[u8])) -> Target {
    Target { name, run }
}
