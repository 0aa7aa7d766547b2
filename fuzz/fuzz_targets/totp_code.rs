//! The `totp_code` fuzz target: its body, its input format and the properties it checks are
//! `ichor_fuzz_targets::totp_code` (fuzz/targets/src/totp_code.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ichor_fuzz_targets::totp_code::run(data));
