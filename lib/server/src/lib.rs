//! What the Ichor binaries serve with, generic over what they serve: file-backed values
//! reloaded on change ([`reload`]), the rustls configuration whose certificate follows its files
//! ([`tls`]), the HTTPS accept loop with graceful shutdown ([`serve()`], and [`serve_http`] without TLS), health, readiness and
//! Prometheus metrics ([`health`], [`metrics`]), trusted-proxy networks ([`cidr`]), log set-up
//! ([`logging`]), the shutdown signal ([`shutdown`]) and the reading of a manifest tree from the
//! file system ([`manifest_files`], whose parsing is `ichor_renderers`'), and the atomic, durable
//! write of every file the binaries keep ([`atomic_file`]).
//!
//! Nothing here knows about OpenID Connect or talks to Kubernetes: the issuer hands in its OIDC
//! routers, the controller its admission router.
#![forbid(unsafe_code)]

pub mod atomic_file;
pub mod cidr;
pub mod health;
pub mod logging;
pub mod manifest_files;
pub mod metrics;
pub mod reload;
mod serve;
pub mod shutdown;
pub mod tls;

pub use serve::{ServeOptions, serve, serve_http};
