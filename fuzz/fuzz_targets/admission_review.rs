//! The `admission_review` fuzz target: its body, its input format and the properties it checks are
//! `ichor_fuzz_targets::admission_review` (fuzz/targets/src/admission_review.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ichor_fuzz_targets::admission_review::run(data));
