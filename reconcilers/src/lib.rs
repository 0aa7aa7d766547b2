//! The Ichor identity controller. This crate holds, so far:
//!
//! - [`admission`]: the validating admission webhooks (router and HTTPS server);
//! - [`identity`]: the identity graph (pure: no client, no clock), its credentials projection,
//!   and the offline replay of a journal;
//! - [`sim`]: a deterministic stand-in for the applier (fake key generation, rcgen certificates)
//!   that drives the graph to its fixed point, for tests, golden journals and benchmarks;
//! - [`perform`]: the real effect performers (RSA and HMAC keys, the Ichor CA and leaf);
//! - [`local`]: the World's local source and the local applier of `ichor dev`;
//! - [`apply`]: the Kubernetes applier of `ichor-controller` (server-side apply, status writes,
//!   effects written with optimistic concurrency, the webhook serving certificate);
//! - [`run`]: `ichor-controller run`, the in-cluster loop (watchers, Lease election, metrics).
#![forbid(unsafe_code)]

pub mod admission;
pub mod apply;
pub mod identity;
pub mod local;
pub mod perform;
pub mod run;
pub mod sim;
