//! Test support shared by the `user_*` and `kubectl` tests: an https server on 127.0.0.1 for any
//! axum router (the kit's test CA and server), the login cache of a temporary `$HOME`, and the
//! real binary with that `$HOME`; a Helm release Secret of the chart and a fake `helm`.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, missing_docs)]

use std::{path::Path, sync::Arc};

use ichor_cli::commands::init::{helm::Helm, release::encode_release};
use serde_json::{Value, json};

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

pub fn b64(s: &str) -> String {
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, s)
}

/// A deployed release Secret of chart `chart`, with user values `config`, as Helm writes it.
pub fn release_secret(name: &str, chart: &str, config: Value) -> Value {
    let record = json!({
        "name": name, "version": 2, "namespace": "ichor-system",
        "chart": {
            "metadata": {"apiVersion": "v2", "name": chart, "version": "0.1.0", "appVersion": "0.1.0"},
            "templates": [{"name": "templates/issuer/deployment.yaml", "data": b64("kind: Deployment\n")}],
            "files": [],
            "values": {"ichorUI": {"users": {"enabled": false, "externalURL": ""}}},
        },
        "config": config,
    });
    json!({"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
           "metadata": {"name": format!("sh.helm.release.v1.{name}.v2"), "namespace": "ichor-system",
                        "labels": {"owner": "helm", "status": "deployed", "name": name, "version": "2"}},
           "data": {"release": b64(&encode_release(&record))}})
}

/// A release's values after `ichor init`: users on at `url`, cluster `prod` rolled out.
pub fn users_on(url: &str) -> Value {
    json!({"ichorUI": {"users": {"enabled": true, "externalURL": url}},
        "controller": {"rollout": {"clusters": ["prod"]}}})
}

/// A fake helm in `dir` that appends its argv (one line per call) to `dir/argv`, copies the
/// chart's Chart.yaml to `dir/seen-Chart.yaml` on an upgrade, and fails the upgrade when
/// `dir/fail` exists.
pub fn fake_helm(dir: &Path) -> Helm {
    let script = dir.join("helm");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nd='{d}'\nprintf '%s\\n' \"$*\" >> \"$d/argv\"\ncase \"$1\" in\n  version) echo v3.19.0+gfake ;;\n  \
             upgrade) cp \"$3/Chart.yaml\" \"$d/seen-Chart.yaml\" || exit 1\n    \
             if [ -e \"$d/fail\" ]; then echo 'Error: UPGRADE FAILED: another operation is in progress' >&2; exit 1; fi ;;\nesac\n",
            d = dir.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    Helm {
        program: script.into(),
    }
}

pub fn helm_argv(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("argv"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}
