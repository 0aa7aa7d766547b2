//! The `oidc_authorize_query` fuzz target: its body, its input format and the properties it checks are
//! `ichor_fuzz_targets::oidc_authorize_query` (fuzz/targets/src/oidc_authorize_query.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ichor_fuzz_targets::oidc_authorize_query::run(data));
