//! The `jws_tokens` fuzz target: its body, its input format and the properties it checks are
//! `ichor_fuzz_targets::jws_tokens` (fuzz/targets/src/jws_tokens.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ichor_fuzz_targets::jws_tokens::run(data));
