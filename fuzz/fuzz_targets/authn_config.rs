//! The `authn_config` fuzz target: its body, its input format and the properties it checks are
//! `ichor_fuzz_targets::authn_config` (fuzz/targets/src/authn_config.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ichor_fuzz_targets::authn_config::run(data));
