//! The `kubeconfig` fuzz target: its body, its input format and the properties it checks are
//! `ichor_fuzz_targets::kubeconfig` (fuzz/targets/src/kubeconfig.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ichor_fuzz_targets::kubeconfig::run(data));
