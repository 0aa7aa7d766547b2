//! The integration tests of the engine, one test binary: the toy graph shaped like the real
//! one (shared with the benchmarks and the profiling example), tests of the engine on it and
//! property tests.
//!
//! Proptest keeps the regressions of `properties.rs` in
//! `tests/proptest-regressions/properties.txt`: for a source file below a `main.rs`, it looks
//! beside that root, not beside the file.
#![allow(clippy::unwrap_used)]

mod engine;
mod properties;
mod toy;
