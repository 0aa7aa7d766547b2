//! The `keys_json` fuzz target: its body, its input format and the properties it checks are
//! `ichor_fuzz_targets::keys_json` (fuzz/targets/src/keys_json.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ichor_fuzz_targets::keys_json::run(data));
