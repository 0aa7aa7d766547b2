//! Shared test harness: an in-memory `UserStore` honouring the optimistic-version contract, a
//! manual clock, keys made by the controller's own timeline, and request helpers over
//! `Router::oneshot`.
#![allow(dead_code, missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{
        Arc, Mutex, OnceLock,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use async_trait::async_trait;
use axum::{
    Router,
    body::{Body, Bytes},
    extract::ConnectInfo,
    http::{HeaderMap, Request, StatusCode, header},
};
use ichor_issuer::{
    keys::{KeyRing, LoadedKeys},
    oidc::{self, Clock, Issuer, IssuerConfig, Settings, TrustedProxies, request::s256_challenge},
    store::{StoreError, StoredUser, UserStore, Version},
};
use ichor_renderers::{
    auth::{Password, credentials::CredentialsEntry, hash::hash_password},
    crd::{GoDuration, UsersSettings, UsersSpec},
    trust::{
        HmacKey, KeyEffect, KeysDocument, KeysPlan, RsaKey, TimelineSettings,
        keys::{HmacSecret, PrivateKeyPem},
    },
};
use jiff::{SignedDuration, Timestamp};
use prometheus_client::registry::Registry;
use tower::ServiceExt;

pub const ISSUER: &str = "https://ichor.example.com";
pub const UI_REDIRECT: &str = "https://ichor.example.com/auth/callback";
pub const CLI_REDIRECT: &str = "http://127.0.0.1:38123/callback";
pub const PASSWORD: &str = "correct horse battery staple";
pub const VERIFIER: &str = "verifier-0123456789-abcdefghijklmnopqrstuvwxyz";
pub const PEMS: [&str; 3] = [
    include_str!("../fixtures/rsa3072-1.pkcs8.pem"),
    include_str!("../fixtures/rsa3072-2.pkcs8.pem"),
    include_str!("../fixtures/rsa3072-3.pkcs8.pem"),
];

/// The argon2id hash of [`PASSWORD`], computed once per test binary.
pub fn password_hash() -> String {
    static HASH: OnceLock<String> = OnceLock::new();
    HASH.get_or_init(|| hash_password(&Password::new(PASSWORD), &[7; 16]).expect("hash"))
        .clone()
}

// === MemoryStore ===

#[derive(Default)]
struct Data {
    users: BTreeMap<String, StoredUser>,
    creds: BTreeMap<String, CredentialsEntry>,
}

/// An in-memory store with one version for the whole credentials object (like the Secret's
/// resourceVersion), so concurrent writers conflict as they would against Kubernetes.
#[derive(Default)]
pub struct MemoryStore {
    data: Mutex<Data>,
    version: AtomicU64,
    pub unavailable: AtomicBool,
    pub writes: AtomicU64,
    pub credential_reads: AtomicU64,
}

impl MemoryStore {
    pub fn add_user(&self, name: &str, roles: &[&str], entry: Option<CredentialsEntry>) {
        let mut d = self.data.lock().unwrap();
        d.users.insert(
            name.to_owned(),
            StoredUser {
                name: name.to_owned(),
                roles: roles.iter().map(|r| (*r).to_owned()).collect(),
                disabled: false,
                display_name: None,
                email: None,
            },
        );
        if let Some(e) = entry {
            d.creds.insert(name.to_owned(), e);
        }
        self.version.fetch_add(1, Ordering::SeqCst);
    }

    pub fn update_user(&self, name: &str, f: impl FnOnce(&mut StoredUser)) {
        let mut d = self.data.lock().unwrap();
        f(d.users.get_mut(name).expect("user"));
    }

    pub fn delete_user(&self, name: &str) {
        self.data.lock().unwrap().users.remove(name);
    }

    pub fn entry(&self, name: &str) -> Option<CredentialsEntry> {
        self.data.lock().unwrap().creds.get(name).cloned()
    }

    pub fn set_entry(&self, name: &str, entry: CredentialsEntry) {
        self.data.lock().unwrap().creds.insert(name.to_owned(), entry);
        self.version.fetch_add(1, Ordering::SeqCst);
    }

    fn check(&self) -> Result<(), StoreError> {
        if self.unavailable.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable("test store is down".into()));
        }
        Ok(())
    }
}

#[async_trait]
impl UserStore for MemoryStore {
    async fn get_user(&self, name: &str) -> Result<Option<StoredUser>, StoreError> {
        self.check()?;
        Ok(self.data.lock().unwrap().users.get(name).cloned())
    }

    async fn list_users(&self) -> Result<Vec<StoredUser>, StoreError> {
        self.check()?;
        Ok(self.data.lock().unwrap().users.values().cloned().collect())
    }

    async fn read_credentials(&self, name: &str) -> Result<(Option<CredentialsEntry>, Version), StoreError> {
        self.check()?;
        self.credential_reads.fetch_add(1, Ordering::SeqCst);
        let d = self.data.lock().unwrap();
        let v = self.version.load(Ordering::SeqCst);
        Ok((d.creds.get(name).cloned(), Version(v.to_string())))
    }

    async fn write_credentials(
        &self,
        name: &str,
        expected: &Version,
        entry: Option<&CredentialsEntry>,
    ) -> Result<Version, StoreError> {
        self.check()?;
        // Yield so concurrent writers interleave like real network calls.
        tokio::task::yield_now().await;
        let mut d = self.data.lock().unwrap();
        let current = self.version.load(Ordering::SeqCst);
        if expected.0 != current.to_string() {
            return Err(StoreError::Conflict(name.to_owned()));
        }
        match entry {
            Some(e) => d.creds.insert(name.to_owned(), e.clone()),
            None => d.creds.remove(name),
        };
        self.writes.fetch_add(1, Ordering::SeqCst);
        self.version.store(current + 1, Ordering::SeqCst);
        Ok(Version((current + 1).to_string()))
    }
}

// === ManualClock ===

pub struct ManualClock(Mutex<Timestamp>);

impl ManualClock {
    pub fn new(at: Timestamp) -> Self {
        ManualClock(Mutex::new(at))
    }
    pub fn advance(&self, d: SignedDuration) {
        let mut t = self.0.lock().unwrap();
        *t = t.checked_add(d).expect("advance");
    }
    pub fn set(&self, at: Timestamp) {
        *self.0.lock().unwrap() = at;
    }
    pub fn now_ts(&self) -> Timestamp {
        *self.0.lock().unwrap()
    }
    pub fn now_secs(&self) -> i64 {
        self.now_ts().as_second()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().unwrap()
    }
}

// === keys ===

pub fn start() -> Timestamp {
    "2027-01-01T00:00:00Z".parse().expect("ts")
}

pub fn timeline_settings() -> TimelineSettings {
    TimelineSettings::new(SignedDuration::from_mins(15), SignedDuration::from_hours(48))
        .expect("settings")
        .with_rotation_period(SignedDuration::from_hours(24))
        .expect("period")
}

/// Performs a plan's effects the way the controller's applier does, with fixture keys.
pub fn realize(plan: &KeysPlan, current: Option<&KeysDocument>, pem_index: &mut usize) -> KeysDocument {
    let mut doc = plan.apply_changes(current);
    for effect in &plan.effects {
        let k = effect.key();
        match effect {
            KeyEffect::GenerateRsa(_) => {
                let pem = PrivateKeyPem::new(PEMS[*pem_index % PEMS.len()].to_owned()).expect("pem");
                *pem_index += 1;
                let key = RsaKey::new(k.kid.clone(), pem, k.created_at, k.active_from, k.retire_after);
                doc.insert_rsa(key.expect("rsa")).expect("insert");
            }
            KeyEffect::GenerateHmac(_) => {
                let secret = HmacSecret::new([u8::try_from(*pem_index % 250).expect("u8") + 1; 32]);
                *pem_index += 1;
                let key = HmacKey::new(k.kid.clone(), secret, k.created_at, k.active_from, k.retire_after);
                doc.insert_hmac(key.expect("hmac")).expect("insert");
            }
        }
    }
    doc
}

/// The first keys document at `at`, as the controller's timeline makes it.
pub fn first_document(at: Timestamp) -> KeysDocument {
    let plan = ichor_renderers::trust::plan(at, None, &timeline_settings());
    realize(&plan, None, &mut 0)
}

pub fn settings() -> UsersSettings {
    settings_with(12 * 3600)
}

pub fn settings_with(refresh_secs: i64) -> UsersSettings {
    UsersSettings::resolve(Some(&UsersSpec {
        token_ttl: Some(GoDuration::from_secs(300)),
        refresh_lifetime: Some(GoDuration::from_secs(refresh_secs)),
        ..Default::default()
    }))
    .expect("settings")
}

// === Harness ===

pub struct Harness {
    pub issuer: Arc<Issuer>,
    pub router: Router,
    pub internal: Router,
    pub store: Arc<MemoryStore>,
    pub clock: Arc<ManualClock>,
    pub ring: Arc<KeyRing>,
    pub settings: Arc<Settings>,
    pub registry: Arc<Registry>,
    pub peer: SocketAddr,
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn location(&self) -> String {
        self.headers
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    }
    pub fn error(&self) -> String {
        self.json()["error"].as_str().unwrap_or("").to_owned()
    }
}

pub fn entry(must_change: bool) -> CredentialsEntry {
    CredentialsEntry::new(
        password_hash(),
        start() - SignedDuration::from_hours(24),
        must_change,
    )
}

pub fn query_param(url: &str, name: &str) -> Option<String> {
    let url = url::Url::parse(url).ok()?;
    url.query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

impl Harness {
    /// alice (admin) and carol (viewer) with [`PASSWORD`]; mallory exists without a password.
    pub fn new() -> Harness {
        Self::with_proxies(TrustedProxies::none())
    }

    pub fn with_proxies(trusted_proxies: TrustedProxies) -> Harness {
        let store = Arc::new(MemoryStore::default());
        store.add_user("alice", &["admin"], Some(entry(false)));
        store.add_user("carol", &["viewer"], Some(entry(false)));
        store.add_user("mallory", &["viewer"], None);
        let clock = Arc::new(ManualClock::new(start()));
        let ring = Arc::new(KeyRing::with_keys(
            LoadedKeys::from_document(&first_document(start())).expect("keys"),
        ));
        let settings = Arc::new(Settings::new(settings()));
        assemble(
            Arc::clone(&store) as Arc<dyn UserStore>,
            store,
            ring,
            settings,
            clock,
            trusted_proxies,
        )
    }

    pub fn metrics(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("encode");
        out
    }

    pub async fn send_to(&self, router: &Router, mut req: Request<Body>) -> Reply {
        if req.extensions().get::<ConnectInfo<SocketAddr>>().is_none() {
            req.extensions_mut().insert(ConnectInfo(self.peer));
        }
        let response = router.clone().oneshot(req).await.expect("infallible");
        let status = response.status();
        let headers = response.headers().clone();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("body");
        Reply {
            status,
            headers,
            body,
        }
    }

    pub async fn send(&self, req: Request<Body>) -> Reply {
        self.send_to(&self.router, req).await
    }

    pub async fn get(&self, uri: &str) -> Reply {
        self.send(Request::get(uri).body(Body::empty()).expect("req"))
            .await
    }

    pub async fn get_json(&self, uri: &str) -> Reply {
        self.send(
            Request::get(uri)
                .header(header::ACCEPT, "application/json")
                .body(Body::empty())
                .expect("req"),
        )
        .await
    }

    pub async fn post_form(&self, uri: &str, form: &str) -> Reply {
        self.send(
            Request::post(uri)
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from(form.to_owned()))
                .expect("req"),
        )
        .await
    }

    pub async fn post_json(&self, uri: &str, json: serde_json::Value) -> Reply {
        self.send(
            Request::post(uri)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(json.to_string()))
                .expect("req"),
        )
        .await
    }

    /// The query of an authorization request.
    pub fn authorize_query(client: &str, redirect: &str, scope: &str, extra: &str) -> String {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        q.append_pair("response_type", "code")
            .append_pair("client_id", client)
            .append_pair("redirect_uri", redirect)
            .append_pair("state", "st-1")
            .append_pair("nonce", "no-1")
            .append_pair("scope", scope)
            .append_pair("code_challenge", &s256_challenge(VERIFIER))
            .append_pair("code_challenge_method", "S256");
        format!("/oidc/authorize?{}{extra}", q.finish())
    }

    /// A ticket from the JSON authorize flow.
    pub async fn ticket(&self, client: &str, redirect: &str, scope: &str, extra: &str) -> String {
        let reply = self
            .get_json(&Self::authorize_query(client, redirect, scope, extra))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        reply.json()["ticket"].as_str().expect("ticket").to_owned()
    }

    pub async fn login(&self, ticket: &str, user: &str, password: &str) -> Reply {
        self.post_json(
            "/oidc/login",
            serde_json::json!({"ticket": ticket, "username": user, "password": password}),
        )
        .await
    }

    /// Signs `user` in for `client` and returns the code.
    pub async fn code(&self, user: &str, client: &str, redirect: &str, scope: &str, extra: &str) -> String {
        let ticket = self.ticket(client, redirect, scope, extra).await;
        let reply = self.login(&ticket, user, PASSWORD).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        let redirect_uri = reply.json()["redirect_uri"]
            .as_str()
            .expect("redirect")
            .to_owned();
        assert_eq!(query_param(&redirect_uri, "state").as_deref(), Some("st-1"));
        query_param(&redirect_uri, "code").expect("code")
    }

    pub async fn exchange(&self, code: &str, client: &str, redirect: &str, verifier: &str) -> Reply {
        let body = form(&[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("client_id", client),
            ("redirect_uri", redirect),
            ("code_verifier", verifier),
        ]);
        self.post_form("/oidc/token", &body).await
    }

    /// A full CLI sign-in with `offline_access`: the token response.
    pub async fn cli_session(&self, user: &str) -> serde_json::Value {
        let code = self
            .code(user, "ichor-cli", CLI_REDIRECT, "openid offline_access", "")
            .await;
        let reply = self.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        reply.json()
    }

    pub async fn refresh(&self, token: &str, client: &str, audience: Option<&str>) -> Reply {
        let mut pairs = vec![
            ("grant_type", "refresh_token"),
            ("refresh_token", token),
            ("client_id", client),
        ];
        if let Some(a) = audience {
            pairs.push(("audience", a));
        }
        let body = form(&pairs);
        self.post_form("/oidc/token", &body).await
    }

    pub async fn revoke(&self, pairs: &[(&str, &str)]) -> Reply {
        let body = form(pairs);
        self.post_form("/oidc/revoke", &body).await
    }

    pub fn keys(&self) -> Arc<LoadedKeys> {
        self.ring.load().expect("keys")
    }
}

/// An urlencoded form body.
pub fn form(pairs: &[(&str, &str)]) -> String {
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        q.append_pair(k, v);
    }
    q.finish()
}

/// The claims of a JWT, decoded without verification (for assertions).
pub fn claims(token: &str) -> serde_json::Value {
    use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
    let payload = token.split('.').nth(1).expect("payload");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).expect("b64")).expect("json")
}

/// The header of a JWT, decoded without verification.
pub fn jose_header(token: &str) -> serde_json::Value {
    use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
    let header = token.split('.').next().expect("header");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).expect("b64")).expect("json")
}

/// One more replica of the in-process issuer over `store`, `ring` and `settings`, with its own
/// clock. (`Harness::store` is an unused placeholder when the store is not a `MemoryStore`.)
pub fn replica(
    store: Arc<dyn UserStore>,
    memory: Arc<MemoryStore>,
    ring: Arc<KeyRing>,
    settings: Arc<Settings>,
    clock: Arc<ManualClock>,
) -> Harness {
    assemble(store, memory, ring, settings, clock, TrustedProxies::none())
}

/// The issuer over `store` with its routers: how every harness is built.
fn assemble(
    store: Arc<dyn UserStore>,
    memory: Arc<MemoryStore>,
    ring: Arc<KeyRing>,
    settings: Arc<Settings>,
    clock: Arc<ManualClock>,
    trusted_proxies: TrustedProxies,
) -> Harness {
    let mut registry = Registry::default();
    let issuer = Issuer::new(
        IssuerConfig {
            external_url: format!("{ISSUER}/"),
            trusted_proxies,
        },
        Arc::clone(&ring),
        store,
        Arc::clone(&settings),
        &mut registry,
    )
    .expect("issuer")
    .with_clock(Arc::clone(&clock) as Arc<dyn Clock>);
    let issuer = Arc::new(issuer);
    Harness {
        router: oidc::external_router(Arc::clone(&issuer)),
        internal: oidc::internal_router(Arc::clone(&issuer)),
        issuer,
        store: memory,
        clock,
        ring,
        settings,
        registry: Arc::new(registry),
        peer: "192.0.2.10:50000".parse().expect("addr"),
    }
}
