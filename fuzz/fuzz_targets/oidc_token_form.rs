//! The `oidc_token_form` fuzz target: its body, its input format and the properties it checks are
//! `ichor_fuzz_targets::oidc_token_form` (fuzz/targets/src/oidc_token_form.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ichor_fuzz_targets::oidc_token_form::run(data));
