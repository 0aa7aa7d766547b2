//! The `talos_machine_config` fuzz target: its body, its input format and the properties it checks are
//! `ichor_fuzz_targets::talos_machine_config` (fuzz/targets/src/talos_machine_config.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ichor_fuzz_targets::talos_machine_config::run(data));
