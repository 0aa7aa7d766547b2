//! The integration tests of `ichor-controller`, one binary with a module per area (the real
//! control-plane tests are the binary `cluster`, run one at a time by nextest's control-plane
//! group).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod admission;
mod apply;
mod attacks;
mod chart_contract;
mod cli;
mod run;
