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

pub use compose::{
    KubeCaError, Routers, Served, compose, external_verifier, kube_cluster, kube_routers, local_routers,
    local_routers_with, oidc_routers, read_kube_ca,
};
pub use config::{CaFile, Config, ConfigError, ExternalTls, KubeconfigSettings, StoreConfig};
pub use flags::{
    DEFAULT_ICHOR_TLS_DIR, DEFAULT_KEYS_FILE, DEFAULT_KUBE_CLUSTER_NAME, DEFAULT_METRICS_LISTEN,
    ExternalFlags, Flags, IN_CLUSTER_CA_FILE, InternalFlags, IssuerArgs, KubeconfigFlags, MAX_KUBE_CA_BYTES,
    MAX_REFRESH_LIFETIME, MAX_TOKEN_TTL, MIN_REFRESH_LIFETIME, MIN_TOKEN_TTL, StoreKind,
};
#[cfg(feature = "watch")]
pub use process::main;
pub use runtime::{Listeners, RunError, RunOptions, open_kube, open_store, run};
