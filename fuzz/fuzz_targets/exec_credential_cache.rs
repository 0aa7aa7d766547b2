//! The `exec_credential_cache` fuzz target: its body, its input format and the properties it checks are
//! `ichor_fuzz_targets::exec_credential_cache` (fuzz/targets/src/exec_credential_cache.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ichor_fuzz_targets::exec_credential_cache::run(data));
