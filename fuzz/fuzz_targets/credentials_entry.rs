//! The `credentials_entry` fuzz target: its body, its input format and the properties it checks are
//! `ichor_fuzz_targets::credentials_entry` (fuzz/targets/src/credentials_entry.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ichor_fuzz_targets::credentials_entry::run(data));
