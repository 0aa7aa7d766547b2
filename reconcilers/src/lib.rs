//! The Ichor identity controller's cluster driver of the one reconcile loop
//! (`ichor_controller_core::cycle`):
//!
//! - [`run`]: `ichor-controller run`: kube-runtime watchers → journal → loop → applier, Lease
//!   leader election, metrics;
//! - [`apply`]: the Kubernetes applier (server-side apply, status writes, effects written with
//!   optimistic concurrency, the webhook configuration's `caBundle`s; a write that meets a
//!   conflict is handed back as stale, for the graph to decide again);
//! - [`admission`]: the validating admission webhooks (router and HTTPS server);
//! - [`cli`]: the `ichor-controller` command line (`run`, `replay`, `gen-journal`).
#![forbid(unsafe_code)]

pub mod admission;
pub mod apply;
pub mod cli;
pub mod run;
