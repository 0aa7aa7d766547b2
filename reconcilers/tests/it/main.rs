//! The integration tests of `ichor-reconcilers`, one binary with a module per area.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod admission;
