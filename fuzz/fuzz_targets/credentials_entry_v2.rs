//! The `credentials_entry_v2` fuzz target: its body, its input format and the properties it checks are
//! `ichor_fuzz_targets::credentials_entry_v2` (fuzz/targets/src/credentials_entry_v2.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ichor_fuzz_targets::credentials_entry_v2::run(data));
