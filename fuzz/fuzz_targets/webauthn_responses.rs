//! The `webauthn_responses` fuzz target: its body, its input format and the properties it checks are
//! `ichor_fuzz_targets::webauthn_responses` (fuzz/targets/src/webauthn_responses.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ichor_fuzz_targets::webauthn_responses::run(data));
