//! The `cli_oidc_responses` fuzz target: its body, its input format and the properties it checks are
//! `ichor_fuzz_targets::cli_oidc_responses` (fuzz/targets/src/cli_oidc_responses.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ichor_fuzz_targets::cli_oidc_responses::run(data));
