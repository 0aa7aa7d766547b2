//! The Ichor OpenID Connect issuer: a small, stateless OP for two fixed public clients
//! (`ichor-ui`, `ichor-cli`), reading the signing keys and TLS material the controller produces
//! (read-only) and writing only user data (credentials entries).
//!
//! Modules: [`api`] (the `UserService`, gRPC and gRPC-web), [`keys`] (the loaded signing material
//! and the JWKS), [`tokens`] (ID tokens and the HMAC artifacts: ticket, code, refresh token),
//! [`store`] (users and credentials), [`external`] (the site's own OpenID provider beside Ichor's), [`installation`] (the runtime settings of a cluster),
//! [`oidc`] (the HTTP endpoints), [`downloads`] (the CLI install page) and [`cli`] (flags). TLS
//! listeners, reload, health and metrics are the shared `ichor_server`.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod api;
pub mod cli;
pub mod downloads;
pub mod external;
#[cfg(feature = "watch")]
pub mod follow;
pub mod https_url;
pub mod installation;
pub mod keys;
pub mod oidc;
pub mod passkeys;
pub mod store;
pub mod talos_cluster;
pub mod tokens;
pub mod ui;
