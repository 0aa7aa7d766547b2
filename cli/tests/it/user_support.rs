//! Test support shared by the `user_*` and `kubectl` tests: an https server on 127.0.0.1 for any
//! axum router (the kit's test CA and server), the login cache of a temporary `$HOME`, and the
//! real binary with that `$HOME`.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, missing_docs)]

use std::{path::Path, sync::Arc};

use ichor_cli::commands::auth::{
    cache::{CACHE_VERSION, CacheDir, CacheEntry, Endpoints},
    secret::Secret,
};

/// A test CA and an https server configuration for 127.0.0.1 signed by it.
pub struct TestCa {
    pub ca_pem: String,
    pub server_config: Arc<rustls::ServerConfig>,
}

impl TestCa {
    pub fn new() -> Self {
        let ca = ichor_testkit::pki::TestCa::new("ichor cli test CA").unwrap();
        let leaf = ca.serving("127.0.0.1").unwrap();
        Self {
            server_config: ichor_testkit::pki::server_config(&leaf).unwrap(),
            ca_pem: ca.pem,
        }
    }
}

/// Serves `app` over https on 127.0.0.1 from `runtime`; returns the base URL.
pub fn serve_https(runtime: &tokio::runtime::Runtime, ca: &TestCa, app: axum::Router) -> String {
    ichor_testkit::issuer::https::serve(runtime, Arc::clone(&ca.server_config), app)
}

pub use crate::support::{ichor_command, text};
pub use ichor_testkit::issuer::https::server_runtime;

/// The login cache of `home`.
pub fn cache_dir(home: &Path) -> CacheDir {
    CacheDir::new(home.join(".ichor/auth"))
}

/// Stores a login for (`issuer`, `ichor-cli`, `audience`) in `home`'s cache.
pub fn seed_login(
    home: &Path,
    issuer: &str,
    audience: &str,
    id_token: &str,
    exp: i64,
    refresh_token: Option<&str>,
) {
    cache_dir(home)
        .store(&CacheEntry {
            v: CACHE_VERSION,
            issuer: issuer.into(),
            client_id: "ichor-cli".into(),
            audience: audience.into(),
            endpoints: Some(Endpoints {
                authorization: format!("{issuer}/oidc/authorize"),
                token: format!("{issuer}/oidc/token"),
                revocation: Some(format!("{issuer}/oidc/revoke")),
            }),
            subject: "alice".into(),
            groups: vec!["ichor:viewer".into()],
            id_token: Secret::new(id_token.into()),
            id_token_exp: exp,
            refresh_token: refresh_token.map(|t| Secret::new(t.into())),
        })
        .unwrap();
}
