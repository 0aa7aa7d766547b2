//! The issuer's HTTPS infrastructure, generic over what it serves: file-backed values reloaded on
//! change ([`reload`]), the rustls configuration whose certificate follows its files ([`tls`]),
//! the HTTPS accept loop with graceful shutdown ([`serve()`]), health, readiness and Prometheus
//! metrics ([`health`], [`metrics`]) and trusted-proxy networks ([`cidr`]).
//!
//! Nothing here knows about OpenID Connect: the OIDC routers are handed in by the caller
//! (see [`crate::cli::run`]).

pub mod cidr;
pub mod health;
pub mod metrics;
pub mod reload;
mod serve;
pub mod tls;

pub use serve::{ServeOptions, serve};
