//! The `oidc_factor_form` fuzz target: its body, its input format and the properties it checks are
//! `ichor_fuzz_targets::oidc_factor_form` (fuzz/targets/src/oidc_factor_form.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ichor_fuzz_targets::oidc_factor_form::run(data));
