//! The issuer in process for tests: its routers over a [`MemoryStore`], a [`ManualClock`]
//! and keys made by the controller's own timeline ([`super::keys`]), with request helpers over
//! `Router::oneshot` and the sign-in flow driven through the real endpoints.

use std::{
    net::SocketAddr,
    sync::{Arc, OnceLock},
};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::ConnectInfo,
    http::{HeaderMap, Request, StatusCode, header},
};
use ichor_issuer::{
    keys::{KeyRing, LoadedKeys},
    oidc::{self, Clock, Issuer, IssuerConfig, Settings, TrustedProxies},
    store::UserStore,
    tokens::{self, IdTokenClaims},
};
use ichor_renderers::{
    auth::{
        Password,
        credentials::{CredentialsEntry, Factors, Family, TotpFactor},
        hash::hash_password,
        recovery,
    },
    crd::{GoDuration, UsersSettings, UsersSpec},
};
use jiff::{SignedDuration, Timestamp};
use prometheus_client::registry::Registry;
use tower::ServiceExt;

pub use super::sign_in::{CLI_REDIRECT, query_param};
use super::{clock::ManualClock, keys::first_document, sign_in::Authorize, store::MemoryStore};

/// The external URL of every in-process issuer.
pub const ISSUER: &str = "https://ichor.example.com";
/// The redirect URI of `ichor-ui`.
pub const UI_REDIRECT: &str = "https://ichor.example.com/auth/callback";
/// The password of the seeded users.
pub const PASSWORD: &str = "correct horse battery staple";
/// The PKCE verifier of the sign-ins.
pub const VERIFIER: &str = "verifier-0123456789-abcdefghijklmnopqrstuvwxyz";

/// The argon2id hash of `password` (a fixed salt: tests compare nothing but its checks).
pub fn hash_of(password: &str) -> String {
    hash_password(&Password::new(password), &[7; 16]).expect("hash")
}

/// The argon2id hash of [`PASSWORD`], computed once per test binary.
pub fn password_hash() -> String {
    static HASH: OnceLock<String> = OnceLock::new();
    HASH.get_or_init(|| hash_of(PASSWORD)).clone()
}

/// The time every harness starts at.
pub fn start() -> Timestamp {
    "2027-01-01T00:00:00Z".parse().expect("ts")
}

/// The users settings of the harness: 5-minute tokens, 12-hour refresh families.
pub fn settings() -> UsersSettings {
    settings_with(12 * 3600)
}

/// As [`settings`], with refresh families of `refresh_secs`.
pub fn settings_with(refresh_secs: i64) -> UsersSettings {
    UsersSettings::resolve(Some(&UsersSpec {
        token_ttl: Some(GoDuration::from_secs(300)),
        refresh_lifetime: Some(GoDuration::from_secs(refresh_secs)),
        ..Default::default()
    }))
    .expect("settings")
}

/// As [`settings`], with the second-factor policy `second_factor`
/// (`spec.users.secondFactor` as an installation writes it, for example
/// `{"roles": {"admin": "required"}}`).
pub fn settings_with_second_factor(second_factor: serde_json::Value) -> UsersSettings {
    let spec = UsersSpec {
        second_factor: Some(serde_json::from_value(second_factor).expect("spec.users.secondFactor")),
        ..UsersSpec::default()
    };
    UsersSettings {
        second_factor: UsersSettings::resolve(Some(&spec))
            .expect("settings")
            .second_factor,
        ..settings()
    }
}

/// One in-process issuer and what it runs on.
pub struct Harness {
    /// The issuer.
    pub issuer: Arc<Issuer>,
    /// Its external router (what the Service exposes).
    pub router: Router,
    /// Its internal router (discovery and JWKS for the apiserver).
    pub internal: Router,
    /// Its store (a placeholder when the issuer runs on another store, see [`replica`]).
    pub store: Arc<MemoryStore>,
    /// Its clock.
    pub clock: Arc<ManualClock>,
    /// Its signing keys.
    pub ring: Arc<KeyRing>,
    /// Its runtime settings.
    pub settings: Arc<Settings>,
    /// Its metrics.
    pub registry: Arc<Registry>,
    /// The client address of requests that carry none.
    pub peer: SocketAddr,
}

/// One answer of a router.
pub struct Reply {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

impl Reply {
    /// The body as JSON (`null` when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    /// The `Location` header (empty when none).
    pub fn location(&self) -> String {
        self.headers
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    }
    /// The OAuth `error` of a JSON body (empty when none).
    pub fn error(&self) -> String {
        self.json()["error"].as_str().unwrap_or("").to_owned()
    }
    /// The value of the device cookie the answer sets, if it sets one.
    pub fn device_cookie(&self) -> Option<String> {
        self.headers
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|v| v.strip_prefix(&format!("{}=", oidc::devices::COOKIE)))
            .and_then(|v| v.split(';').next())
            .map(str::to_owned)
    }
}

/// A credentials entry with [`PASSWORD`], valid since a day before [`start`].
pub fn entry(must_change: bool) -> CredentialsEntry {
    CredentialsEntry::new(
        password_hash(),
        start() - SignedDuration::from_hours(24),
        must_change,
    )
}

/// The authenticator-app secret of [`factor_entry`].
pub const TOTP_SECRET: &str = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ";

/// A credentials entry as [`entry`] with a second factor: an authenticator app of
/// [`TOTP_SECRET`] and ten recovery codes, which are returned.
pub fn factor_entry() -> (CredentialsEntry, Vec<String>) {
    factor_entry_with_hash(&password_hash())
}

/// As [`factor_entry`], with the password hash `hash` (a fixed one spares an argon2id run).
pub fn factor_entry_with_hash(hash: &str) -> (CredentialsEntry, Vec<String>) {
    let mut entry = CredentialsEntry::new(hash.to_owned(), start() - SignedDuration::from_hours(24), false);
    let made = recovery::generate(
        &std::array::from_fn(|i| (i as u8).wrapping_mul(37).wrapping_add(11)),
        start(),
    )
    .expect("recovery codes");
    entry.factors = Factors {
        totp: Some(TotpFactor {
            secret: TOTP_SECRET.to_owned(),
            created_at: start() - SignedDuration::from_hours(24),
            last_step: 0,
        }),
        recovery: Some(made.stored),
        ..Factors::default()
    };
    (entry, made.codes)
}

/// A credentials entry with `hash`, valid since `not_before`, holding one refresh family
/// `family` of `ichor-cli` for `ichor-kube`, started at `at` for twelve hours.
pub fn cli_family_entry(hash: &str, not_before: Timestamp, family: &str, at: Timestamp) -> CredentialsEntry {
    CredentialsEntry::new(hash.to_owned(), not_before, false)
        .start_family(
            family,
            "ichor-cli",
            "ichor-kube",
            at,
            SignedDuration::from_hours(12),
        )
        .expect("family")
}

/// The claims of an ID token by `iss` of `sub` in `groups` for `aud`, issued at `at` for five
/// minutes, without a nonce.
pub fn id_claims(iss: &str, sub: &str, aud: &str, groups: &[&str], at: Timestamp) -> IdTokenClaims {
    IdTokenClaims {
        iss: iss.to_owned(),
        sub: sub.to_owned(),
        aud: aud.to_owned(),
        exp: at.as_second() + 300,
        iat: at.as_second(),
        nonce: None,
        auth_time: None,
        groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        amr: vec!["pwd".to_owned()],
    }
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

impl Harness {
    /// alice (admin) and carol (viewer) with [`PASSWORD`]; mallory exists without a password.
    pub fn new() -> Harness {
        Self::with_proxies(TrustedProxies::none())
    }

    /// As [`Harness::new`], trusting `trusted_proxies` for the client address.
    pub fn with_proxies(trusted_proxies: TrustedProxies) -> Harness {
        Self::configured(trusted_proxies, |issuer| issuer)
    }

    /// As [`Harness::new`], the shared argon2id queue waiting for the known devices' lane for
    /// at most `hold` at a time ([`Issuer::with_lane_hold`]).
    pub fn with_lane_hold(hold: std::time::Duration) -> Harness {
        Self::configured(TrustedProxies::none(), |issuer| issuer.with_lane_hold(hold))
    }

    /// As [`Harness::new`], without the write caps ([`Issuer::with_family_writes_per_minute`]
    /// 0): tests of another bound that drive one account past what a person does.
    pub fn with_write_caps_off() -> Harness {
        Self::configured(TrustedProxies::none(), |issuer| {
            issuer.with_family_writes_per_minute(0)
        })
    }

    /// As [`Harness::new`], the internal discovery document advertising `jwks_uri`
    /// ([`Issuer::with_internal_jwks_uri`], the issuer's `--internal-jwks-uri`).
    pub fn with_internal_jwks_uri(jwks_uri: &str) -> Harness {
        let jwks_uri = jwks_uri.to_owned();
        Self::configured(TrustedProxies::none(), |issuer| {
            issuer.with_internal_jwks_uri(Some(jwks_uri))
        })
    }

    fn configured(trusted_proxies: TrustedProxies, configure: impl FnOnce(Issuer) -> Issuer) -> Harness {
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
            configure,
        )
    }

    /// The metrics in the Prometheus text format.
    pub fn metrics(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("encode");
        out
    }

    /// Sends `req` through `router` (from [`Harness::peer`] unless it names its client).
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

    /// Sends `req` through the external router.
    pub async fn send(&self, req: Request<Body>) -> Reply {
        self.send_to(&self.router, req).await
    }

    /// `GET uri`.
    pub async fn get(&self, uri: &str) -> Reply {
        self.send(Request::get(uri).body(Body::empty()).expect("req"))
            .await
    }

    /// `GET uri` accepting JSON.
    pub async fn get_json(&self, uri: &str) -> Reply {
        self.send(
            Request::get(uri)
                .header(header::ACCEPT, "application/json")
                .body(Body::empty())
                .expect("req"),
        )
        .await
    }

    /// `POST uri` with a urlencoded form.
    pub async fn post_form(&self, uri: &str, form: &str) -> Reply {
        self.send(
            Request::post(uri)
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from(form.to_owned()))
                .expect("req"),
        )
        .await
    }

    /// `POST uri` with a JSON body.
    pub async fn post_json(&self, uri: &str, json: serde_json::Value) -> Reply {
        self.send(
            Request::post(uri)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(json.to_string()))
                .expect("req"),
        )
        .await
    }

    /// The query of an authorization request (state `st-1`, nonce `no-1`, [`VERIFIER`]).
    pub fn authorize_query(client: &str, redirect: &str, scope: &str, extra: &str) -> String {
        let request = Authorize {
            client_id: client,
            redirect_uri: redirect,
            scope,
            ..Authorize::cli(VERIFIER)
        };
        format!("/oidc/authorize?{}{extra}", request.query())
    }

    /// A ticket from the JSON authorize flow.
    pub async fn ticket(&self, client: &str, redirect: &str, scope: &str, extra: &str) -> String {
        let reply = self
            .get_json(&Self::authorize_query(client, redirect, scope, extra))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        reply.json()["ticket"].as_str().expect("ticket").to_owned()
    }

    /// A browser's authorize step for `ichor-cli` on [`CLI_REDIRECT`] with scope `openid`: where
    /// it is sent (the sign-in page, `/oidc/login?ticket=…`) and the ticket in that address.
    pub async fn sign_in_page(&self) -> (String, String) {
        let location = self
            .get(&Self::authorize_query("ichor-cli", CLI_REDIRECT, "openid", ""))
            .await
            .location();
        let ticket = query_param(&format!("https://x{location}"), "ticket").expect("ticket");
        (location, ticket)
    }

    /// The login step: `ticket` with `user` and `password`.
    pub async fn login(&self, ticket: &str, user: &str, password: &str) -> Reply {
        self.post_json(
            "/oidc/login",
            serde_json::json!({"ticket": ticket, "username": user, "password": password}),
        )
        .await
    }

    /// The second step of a sign-in: the second-factor ticket of the login step's answer, and
    /// a typed code.
    pub async fn factor(&self, factor_ticket: &str, code: &str) -> Reply {
        self.post_json(
            "/oidc/login/factor",
            serde_json::json!({"factor_ticket": factor_ticket, "code": code}),
        )
        .await
    }

    /// The login step from `peer`, carrying the device cookie `device` when given.
    pub async fn login_from(
        &self,
        peer: SocketAddr,
        ticket: &str,
        user: &str,
        password: &str,
        device: Option<&str>,
    ) -> Reply {
        let mut req = Request::post("/oidc/login").header(header::CONTENT_TYPE, "application/json");
        if let Some(value) = device {
            req = req.header(header::COOKIE, format!("{}={value}", oidc::devices::COOKIE));
        }
        let body = serde_json::json!({"ticket": ticket, "username": user, "password": password});
        let mut req = req.body(Body::from(body.to_string())).expect("req");
        req.extensions_mut().insert(ConnectInfo(peer));
        self.send(req).await
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

    /// The code exchange at the token endpoint.
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

    /// A refresh grant, for `audience` when given.
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

    /// A refresh grant of `ichor-cli` sent from the client address `peer` (each address has its
    /// own per-source bucket, so a load spread over addresses measures the grant, not the limit).
    pub async fn refresh_from(&self, token: &str, peer: SocketAddr) -> Reply {
        let body = form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", token),
            ("client_id", "ichor-cli"),
        ]);
        let mut req = Request::post("/oidc/token")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(body))
            .expect("req");
        req.extensions_mut().insert(ConnectInfo(peer));
        self.send(req).await
    }

    /// The refresh token of the current generation of `family` (id `fam`) of `sub`, signed as
    /// the issuer signs it: for seeding many sessions without one argon2id sign-in each.
    pub fn mint_refresh(&self, sub: &str, fam: &str, family: &Family) -> String {
        tokens::sign_refresh(&self.keys(), ISSUER, sub, fam, family, self.clock.now_ts()).expect("sign")
    }

    /// A revocation with the form `pairs`.
    pub async fn revoke(&self, pairs: &[(&str, &str)]) -> Reply {
        let body = form(pairs);
        self.post_form("/oidc/revoke", &body).await
    }

    /// The keys it signs with now.
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

/// One more replica of the in-process issuer over `store`, `ring` and `settings`, with its own
/// clock. (`Harness::store` is an unused placeholder when the store is not a `MemoryStore`.)
pub fn replica(
    store: Arc<dyn UserStore>,
    memory: Arc<MemoryStore>,
    ring: Arc<KeyRing>,
    settings: Arc<Settings>,
    clock: Arc<ManualClock>,
) -> Harness {
    assemble(
        store,
        memory,
        ring,
        settings,
        clock,
        TrustedProxies::none(),
        |issuer| issuer,
    )
}

/// The issuer over `store` with its routers: how every harness is built.
fn assemble(
    store: Arc<dyn UserStore>,
    memory: Arc<MemoryStore>,
    ring: Arc<KeyRing>,
    settings: Arc<Settings>,
    clock: Arc<ManualClock>,
    trusted_proxies: TrustedProxies,
    configure: impl FnOnce(Issuer) -> Issuer,
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
    let issuer = Arc::new(configure(issuer));
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

/// The `UserService` configuration of the tests for the issuer `issuer`: the cluster `prod` at
/// `https://10.0.0.10:6443` with the placeholder CA [`CLUSTER_CA_PEM`], and no session cache.
pub fn api_config(issuer: &str) -> ichor_issuer::api::ApiConfig {
    let mut config = ichor_issuer::api::ApiConfig::new(
        issuer,
        Some(ichor_issuer::api::ClusterInfo {
            name: "prod".into(),
            endpoint: "https://10.0.0.10:6443".into(),
            ca_pem: CLUSTER_CA_PEM.into(),
        }),
    )
    .expect("api config");
    config.session_ttl = std::time::Duration::ZERO;
    config
}

/// The CA of the cluster `prod` a kubeconfig names (a placeholder: nothing connects to it).
pub const CLUSTER_CA_PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIBATAKBggqhkjOPQQDAjAVMRMwEQYDVQQDEwprdWJl\n-----END CERTIFICATE-----\n";
