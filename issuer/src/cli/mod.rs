//! The `ichor-issuer` command line: flags (each with an environment variable), their validation
//! into a [`Config`], and [`run`], which loads the watched files, binds nothing itself (the
//! caller passes [`Listeners`]) and serves the two HTTPS listeners and the metrics one:
//!
//! - the external listener (default `0.0.0.0:8443`): the OIDC routes, `/healthz` and `/readyz`
//!   (not `/metrics`), with the operator's certificate (`--tls-cert-file`/`--tls-key-file`) or the
//!   Ichor leaf; and the `UserService` (gRPC and gRPC-web): with `--store local` authorized in
//!   process ([`local_routers`]), with `--store kube` by the kube-apiserver and written as the
//!   caller ([`kube_routers`]);
//! - the internal listener (default `0.0.0.0:8444`): discovery and JWKS only, with the Ichor leaf;
//! - the metrics listener (default `0.0.0.0:9090`, plain HTTP, for the pod network only):
//!   `/metrics`, `/healthz` and `/readyz`, like the controller's `--metrics-listen`.

mod compose;
mod config;
mod flags;
#[cfg(feature = "watch")]
mod process;
mod runtime;

pub use compose::*;
pub use config::*;
pub use flags::*;
#[cfg(feature = "watch")]
pub use process::main;
pub use runtime::*;
