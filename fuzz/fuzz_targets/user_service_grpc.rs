//! The `user_service_grpc` fuzz target: its body, its input format and the properties it checks are
//! `ichor_fuzz_targets::user_service_grpc` (fuzz/targets/src/user_service_grpc.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ichor_fuzz_targets::user_service_grpc::run(data));
