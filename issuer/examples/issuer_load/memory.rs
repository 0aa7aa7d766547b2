//! `serve-memory --dir D --port P`: the same OIDC router as the binary, over the same TLS
//! serving code, but on an in-memory store with one version per user (no file, no fsync, no
//! cross-user conflicts): the issuer's own ceiling, with the store taken out.

use anyhow::{Context as _, Result};
use async_trait::async_trait;
use ichor_issuer::{
    keys::{KeyRing, LoadedKeys},
    oidc::{Issuer, IssuerConfig, Settings, TrustedProxies},
    store::{StoreError, StoredUser, UserStore, Version},
};
use ichor_renderers::{
    auth::credentials::CredentialsEntry,
    crd::{GoDuration, UsersSettings},
    trust::KeysDocument,
};
use ichor_server::{
    ServeOptions,
    reload::WatchOptions,
    serve,
    tls::{PairFiles, server_config, watch_pair},
};
use std::{collections::HashMap, path::Path, sync::Arc, sync::Mutex};

/// Users and credentials in memory, one version per user (as if each user had its own
/// object), so concurrent refreshes of different users never conflict.
struct MemoryStore {
    users: HashMap<String, StoredUser>,
    credentials: Mutex<HashMap<String, (CredentialsEntry, u64)>>,
}

#[async_trait]
impl UserStore for MemoryStore {
    async fn get_user(&self, name: &str) -> Result<Option<StoredUser>, StoreError> {
        Ok(self.users.get(name).cloned())
    }
    async fn list_users(&self) -> Result<Vec<StoredUser>, StoreError> {
        Ok(self.users.values().cloned().collect())
    }
    async fn read_credentials(&self, name: &str) -> Result<(Option<CredentialsEntry>, Version), StoreError> {
        let map = self
            .credentials
            .lock()
            .map_err(|_| StoreError::Unavailable("poisoned".into()))?;
        Ok(match map.get(name) {
            Some((entry, v)) => (Some(entry.clone()), Version(v.to_string())),
            None => (None, Version("0".into())),
        })
    }
    async fn write_credentials(
        &self,
        name: &str,
        expected: &Version,
        entry: Option<&CredentialsEntry>,
    ) -> Result<Version, StoreError> {
        let mut map = self
            .credentials
            .lock()
            .map_err(|_| StoreError::Unavailable("poisoned".into()))?;
        let current = map.get(name).map_or(0, |(_, v)| *v);
        if expected.0 != current.to_string() {
            return Err(StoreError::Conflict(name.to_owned()));
        }
        match entry {
            Some(e) => {
                map.insert(name.to_owned(), (e.clone(), current + 1));
            }
            None => {
                map.remove(name);
            }
        }
        Ok(Version((current + 1).to_string()))
    }
}

pub(crate) async fn run(dir: &Path, port: u16) -> Result<()> {
    let doc = KeysDocument::parse(&std::fs::read(dir.join("keys.json"))?)?;
    let ring = Arc::new(KeyRing::with_keys(LoadedKeys::from_document(&doc)?));
    let creds: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("state/credentials.json"))?)?;
    let mut users = HashMap::new();
    let mut credentials = HashMap::new();
    for (name, value) in creds["entries"].as_object().context("no entries")? {
        let entry = CredentialsEntry::parse(name, value.to_string().as_bytes())?;
        credentials.insert(name.clone(), (entry, 1));
        let user = StoredUser {
            name: name.clone(),
            roles: vec!["viewer".to_owned()],
            disabled: false,
            display_name: None,
            email: None,
        };
        users.insert(name.clone(), user);
    }
    let store = Arc::new(MemoryStore {
        users,
        credentials: Mutex::new(credentials),
    });
    let settings = Arc::new(Settings::new(UsersSettings {
        token_ttl: GoDuration::from_secs(300),
        refresh_lifetime: GoDuration::from_secs(12 * 3600),
        kube_api_server_url: None,
        kube_api_tls_server_name: None,
        second_factor: ichor_renderers::auth::second_factor_policy::SecondFactorPolicy::default(),
    }));
    let mut registry = prometheus_client::registry::Registry::default();
    let issuer = Issuer::new(
        IssuerConfig {
            external_url: format!("https://127.0.0.1:{port}"),
            trusted_proxies: TrustedProxies::parse(&["127.0.0.0/8"])?,
        },
        ring,
        store,
        settings,
        &mut registry,
    )?
    // No cap on rotations, as the benchmarks run the binary (`--family-writes-per-minute 0`): the
    // load drives each session far past what a person does, which is what it measures.
    .with_family_writes_per_minute(0);
    let router = ichor_issuer::oidc::external_router(Arc::new(issuer));
    let pair = watch_pair(
        "tls",
        &PairFiles::in_secret_dir(dir.join("tls")),
        WatchOptions::default(),
    )?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("serving on https://127.0.0.1:{port}");
    serve(
        listener,
        server_config(pair)?,
        router,
        std::future::pending::<()>(),
        ServeOptions::default(),
    )
    .await;
    Ok(())
}
