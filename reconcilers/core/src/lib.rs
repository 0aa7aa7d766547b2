//! The Ichor identity controller's decisions, without I/O: the identity graph's nodes on the
//! `ichor-graph` engine ([`identity`]) and the one reconcile loop its drivers run ([`cycle`]):
//! the cluster controller (`ichor-controller`), `ichor dev`, and the simulation (`sim`) of
//! tests, golden journals and benchmarks.
//!
//! - [`identity`]: the graph (pure: no client, no clock), its credentials projection, and the
//!   offline replay of a journal;
//! - [`cycle`]: events in, decisions out, the sink's results folded back; leadership, reissue,
//!   back-off and the round limit;
//! - [`perform`]: the effect performers (RSA and HMAC keys, the Ichor CA and leaf) over a
//!   [`perform::KeyMaterial`] — the only place new randomness enters a decision's result;
//! - [`memory`]: the in-memory half of the sinks that keep objects themselves;
//! - [`problem`]: why a sink could not carry out an action, by kind;
//! - `sim` (feature `sim`, off by default; on in this crate's own tests): the deterministic
//!   simulation driver and its fixtures, for tests, golden journals and benchmarks — never in a
//!   shipped binary.
//!
//! Nothing here uses tokio, a Kubernetes client, the file system or the network.
#![forbid(unsafe_code)]

pub mod cycle;
pub mod identity;
pub mod memory;
pub mod perform;
pub mod problem;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
