//! The OpenID Connect endpoints: a small, stateless OP for the two fixed public clients.
//!
//! - [`external_router`] (8443): discovery, JWKS, `/oidc/authorize`, `/oidc/login` (the
//!   sign-in page and its form), `/oidc/token`, `/oidc/revoke`, the page's stylesheet.
//! - [`internal_router`] (8444): only discovery and JWKS, for the kube-apiserver; the discovery
//!   document's `issuer` is the external URL and its `jwks_uri` is on the host the caller used,
//!   or the operator's explicit override ([`Issuer::with_internal_jwks_uri`]).
//!
//! # Flow
//! `GET /oidc/authorize` checks the request (client, exact redirect URI, `response_type=code`,
//! PKCE S256, `state`, `nonce`, scope, audience) and answers a signed 5-minute ticket: a 302 to
//! `/oidc/login?ticket=…`, or `{"ticket": …}` with `Accept: application/json` (same checks).
//! `POST /oidc/login` verifies the ticket and the password and answers a 60-second code: a 302
//! to the redirect URI with `code`, `state` and `iss` (RFC 9207), or `{"redirect_uri": …}` for
//! a JSON request. `POST /oidc/token` redeems the code (PKCE, exact redirect URI, single use per
//! replica) or rotates a refresh token, and always answers a fresh ID token.
//!
//! # Errors at `/oidc/authorize`
//! An unknown client, a missing or non-matching redirect URI, or a repeated `client_id` or
//! `redirect_uri` is an HTML error page (400) — never a redirect, since the target is not
//! trusted. Once the client and the redirect URI are valid, every other problem is redirected
//! back to the client with `error` (`invalid_request`, `unsupported_response_type`,
//! `invalid_scope`), `error_description`, the `state` if it was acceptable, and `iss` (RFC 6749
//! 4.1.2.1). The JSON variant never redirects: every failure is a 400 JSON error.
//!
//! # Guarantees
//! - Sign-in is CSRF-safe by construction: the form carries the signed ticket and no ambient
//!   authority exists. The only cookie, the device cookie of [`devices`] (`SameSite=Strict`),
//!   buys a place in the known devices' argon2id lane and nothing else. The page runs no inline
//!   script (the UI's sign-in card from `/assets/`, its data in a JSON block) and is served with
//!   `script-src 'self'`, `frame-ancestors 'none'` and a `form-action` of this origin and the
//!   client's redirect origin.
//! - An unknown user costs one argon2id verification of a dummy hash, like a wrong password,
//!   and gets the same answer. At most two hashes run at once per process, and one more in the
//!   known devices' lane ([`devices::LANE_PERMITS`]), which goes first: while it has a check
//!   pending the shared queue starts none ([`priority`]).
//! - A store that cannot be reached yields 503 (500 `server_error` at the revocation endpoint,
//!   as the seed says) and never says anything about the user.
//! - Bodies are limited to [`MAX_BODY_BYTES`]; the second sign-in step's to
//!   [`MAX_FACTOR_BODY_BYTES`], since its ticket carries the passkey step's state.

mod authorize;
mod bearer;
pub mod devices;
mod discovery;
mod errors;
mod factor;
mod factor_page;
pub mod hash_gate;
pub mod hash_pools;
pub mod limits;
mod login;
mod metrics;
pub(crate) mod page;
pub mod password_limits;
pub mod passwords;
pub mod priority;
pub mod request;
mod revoke;
mod token;

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    sync::{Arc, Mutex, MutexGuard},
};

use arc_swap::ArcSwap;
use axum::{
    Router,
    extract::{ConnectInfo, DefaultBodyLimit, FromRequestParts},
    http::request::Parts,
    routing::{get, post},
};
use ichor_renderers::crd::UsersSettings;
use jiff::Timestamp;
use prometheus_client::registry::Registry;
use tokio::sync::Semaphore;

pub use ichor_server::cidr::TrustedProxies;
pub use metrics::Metrics;
pub use token::{ENROL_FIRST, SIGN_IN_WITH_FACTOR};

use crate::{keys::KeyRing, store::UserStore};

/// The largest request body accepted by any endpoint, in bytes.
pub const MAX_BODY_BYTES: usize = 16 * 1024;
/// The largest body of the second sign-in step, whose ticket carries the passkey step's state:
/// the public keys of the user's passkeys (about 0.5 KiB each for P-256, 1.5 KiB for RSA-2048;
/// at most ten) beside the browser's answer.
pub const MAX_FACTOR_BODY_BYTES: usize = 64 * 1024;
/// How many password hashes may be computed at once (64 MiB each).
pub const HASH_PERMITS: usize = 2;

/// Where "now" comes from. The system clock in production; tests drive a manual one.
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// The runtime settings (`IchorInstallation.spec.users`), read per issued token. The server
/// stores a new value when the installation changes; the flags give the first value.
#[derive(Debug)]
pub struct Settings {
    current: ArcSwap<UsersSettings>,
}

impl Settings {
    /// Settings starting at `initial`.
    pub fn new(initial: UsersSettings) -> Self {
        Settings {
            current: ArcSwap::from_pointee(initial),
        }
    }

    /// The current settings.
    pub fn get(&self) -> Arc<UsersSettings> {
        self.current.load_full()
    }

    /// Replaces the settings.
    pub fn store(&self, settings: UsersSettings) {
        self.current.store(Arc::new(settings));
    }
}

/// Why the issuer configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The external URL is not an absolute https URL without query or fragment.
    #[error(
        "external URL {0:?}: must be an absolute https URL (http only for a loopback address) \
         without query, fragment or user info"
    )]
    ExternalUrl(String),
}

/// What the issuer is configured with.
#[derive(Debug, Clone)]
pub struct IssuerConfig {
    /// The external URL, which is the issuer (`iss`); a trailing `/` is removed.
    pub external_url: String,
    /// Proxies whose `X-Forwarded-For` is believed.
    pub trusted_proxies: TrustedProxies,
}

/// The issuer: configuration, keys, the user store, the limits and the metrics. Share it as
/// `Arc<Issuer>` with the routers.
pub struct Issuer {
    issuer: String,
    ui_redirect: String,
    trusted_proxies: TrustedProxies,
    keys: Arc<KeyRing>,
    store: Arc<dyn UserStore>,
    settings: Arc<Settings>,
    clock: Arc<dyn Clock>,
    metrics: Metrics,
    hash_gate: passwords::HashGate,
    devices: devices::FastLane,
    forwarders: ichor_server::cidr::UntrustedForwarders,
    backoff: Arc<Mutex<limits::UserBackoff>>,
    login_buckets: Arc<Mutex<limits::TokenBuckets<limits::SourceKey>>>,
    token_buckets: Mutex<limits::TokenBuckets<limits::SourceKey>>,
    family_buckets: Mutex<limits::TokenBuckets<String>>,
    /// Rotations written per refresh family (see `BucketPolicy::FAMILY_WRITES`); `None`: no cap.
    family_writes: Option<Mutex<limits::TokenBuckets<String>>>,
    /// Sessions started per user (see `BucketPolicy::SESSION_STARTS`); `None` with no family cap.
    session_starts: Option<Mutex<limits::TokenBuckets<String>>>,
    /// Changes users make to their own credentials (see `BucketPolicy::ACCOUNT_WRITES`), shared
    /// with the `UserService` through [`Issuer::password_limits`].
    account_writes: limits::AccountWrites,
    gone_families: Mutex<limits::GoneFamilies>,
    codes: Mutex<limits::CodeLedger>,
    internal_jwks_uri: Option<String>,
    ui_files: crate::ui::UiFiles,
    relying_party: Option<crate::passkeys::RelyingParty>,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer")
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

fn check_external_url(raw: &str) -> Result<String, ConfigError> {
    let err = || ConfigError::ExternalUrl(raw.chars().take(256).collect());
    let trimmed = raw.strip_suffix('/').unwrap_or(raw);
    let url = url::Url::parse(trimmed).map_err(|_| err())?;
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => return Err(err()),
    };
    let scheme_ok = url.scheme() == "https" || (url.scheme() == "http" && loopback);
    if !scheme_ok
        || url.query().is_some()
        || url.fragment().is_some()
        || !url.username().is_empty()
        || url.password().is_some()
    {
        return Err(err());
    }
    Ok(trimmed.to_owned())
}

/// Locks a mutex, recovering from poisoning (the data are counters; a panic elsewhere must not
/// take the endpoints down).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Issuer {
    /// Builds the issuer and registers its metrics (and the store's) into `registry`.
    ///
    /// # Errors
    /// [`ConfigError`] for a bad external URL.
    pub fn new(
        config: IssuerConfig,
        keys: Arc<KeyRing>,
        store: Arc<dyn UserStore>,
        settings: Arc<Settings>,
        registry: &mut Registry,
    ) -> Result<Issuer, ConfigError> {
        let issuer = check_external_url(&config.external_url)?;
        let relying_party = crate::passkeys::RelyingParty::for_issuer(&issuer);
        let priority = Arc::new(priority::LanePriority::default());
        store.register_metrics(registry);
        for network in config.trusted_proxies.wide() {
            tracing::warn!(
                %network,
                "the trusted proxy network {network} holds more than {} addresses: any host in it can \
                 forge X-Forwarded-For and be taken for another client; list the proxies' exact \
                 addresses (/32 or /128) instead",
                ichor_server::cidr::WIDE_NETWORK
            );
        }
        Ok(Issuer {
            ui_redirect: format!("{issuer}/auth/callback"),
            issuer,
            trusted_proxies: config.trusted_proxies,
            keys,
            store,
            settings,
            clock: Arc::new(SystemClock),
            metrics: Metrics::register(registry),
            hash_gate: passwords::HashGate::new(HASH_PERMITS, passwords::DEFAULT_MAX_WAITING)
                .yielding_to(Arc::clone(&priority)),
            devices: devices::FastLane::new(devices::LANE_PERMITS, devices::LANE_MAX_WAITING, priority),
            forwarders: ichor_server::cidr::UntrustedForwarders::new(),
            backoff: Arc::new(Mutex::new(limits::UserBackoff::new())),
            login_buckets: Arc::new(Mutex::new(limits::TokenBuckets::new(
                limits::BucketPolicy::LOGIN_FAILURES,
            ))),
            token_buckets: Mutex::new(limits::TokenBuckets::new(limits::BucketPolicy::TOKEN_FAILURES)),
            family_buckets: Mutex::new(limits::TokenBuckets::new(limits::BucketPolicy::FAMILY_GRANTS)),
            family_writes: Some(Mutex::new(limits::TokenBuckets::new(
                limits::BucketPolicy::FAMILY_WRITES,
            ))),
            session_starts: Some(Mutex::new(limits::TokenBuckets::new(
                limits::BucketPolicy::SESSION_STARTS,
            ))),
            account_writes: limits::AccountWrites::new(limits::BucketPolicy::ACCOUNT_WRITES),
            gone_families: Mutex::new(limits::GoneFamilies::new()),
            codes: Mutex::new(limits::CodeLedger::new()),
            internal_jwks_uri: None,
            ui_files: crate::ui::UiFiles::from_env(),
            relying_party,
        })
    }

    /// The WebAuthn relying party of this issuer's URL; `None` when the URL names an IP
    /// address, and passkeys are not offered.
    pub fn relying_party(&self) -> Option<&crate::passkeys::RelyingParty> {
        self.relying_party.as_ref()
    }

    /// The same issuer taking the sign-in page (the UI's `login.html`) from
    /// `files` instead of where the UI routes take it ([`crate::ui::UiFiles::from_env`]).
    pub fn with_ui_files(mut self, files: crate::ui::UiFiles) -> Issuer {
        self.ui_files = files;
        self
    }

    /// The same issuer advertising `jwks_uri` (checked by the caller: `--internal-jwks-uri`) as
    /// the internal discovery document's `jwks_uri` instead of the host the caller connected to
    /// (`None`: that host, the default, which follows a recreated Service's new ClusterIP).
    pub fn with_internal_jwks_uri(mut self, jwks_uri: Option<String>) -> Issuer {
        self.internal_jwks_uri = jwks_uri;
        self
    }

    /// The same issuer writing at most `per_minute` rotations per refresh family past the burst
    /// of [`limits::BucketPolicy::FAMILY_WRITES`]; 0: no cap on rotations, nor on the sessions
    /// a user starts ([`limits::BucketPolicy::SESSION_STARTS`]), which bound the families' caps,
    /// nor on the changes users make to their own credentials
    /// ([`limits::BucketPolicy::ACCOUNT_WRITES`]): every write cap off, for benchmarks. Call it
    /// before sharing [`Issuer::password_limits`].
    pub fn with_family_writes_per_minute(mut self, per_minute: u32) -> Issuer {
        self.family_writes = (per_minute > 0).then(|| {
            Mutex::new(limits::TokenBuckets::new(limits::BucketPolicy {
                per_second: f64::from(per_minute) / 60.0,
                ..limits::BucketPolicy::FAMILY_WRITES
            }))
        });
        if per_minute == 0 {
            self.session_starts = None;
            self.account_writes = limits::AccountWrites::off();
        }
        self
    }

    /// Takes one session start from `user`'s budget, or says how long until one is available
    /// (see [`limits::BucketPolicy::SESSION_STARTS`]).
    fn reserve_session_start(&self, user: &str, now: Timestamp) -> Result<(), jiff::SignedDuration> {
        match &self.session_starts {
            Some(buckets) => lock(buckets).reserve(user.to_owned(), now).inspect_err(|_| {
                self.metrics.backoff_hit("session_starts");
            }),
            None => Ok(()),
        }
    }

    /// Takes one change of `user`'s own credentials from its budget, given back unless marked
    /// written, or says how long until one is available (see
    /// [`limits::BucketPolicy::ACCOUNT_WRITES`]).
    pub(crate) fn reserve_account_write(
        &self,
        user: &str,
        now: Timestamp,
    ) -> Result<limits::AccountWrite, jiff::SignedDuration> {
        self.account_writes.reserve(user, now).inspect_err(|_| {
            self.metrics.backoff_hit("account_writes");
        })
    }

    /// The budget of changes users make to their own credentials (tests read it).
    pub fn account_writes(&self) -> &limits::AccountWrites {
        &self.account_writes
    }

    /// Gives back a start taken by [`Issuer::reserve_session_start`] that started no session.
    fn refund_session_start(&self, user: &str, now: Timestamp) {
        if let Some(buckets) = &self.session_starts {
            lock(buckets).refund(&user.to_owned(), now);
        }
    }

    /// Takes one rotation from `family`'s write cap, or says how long until one is available
    /// (see [`limits::BucketPolicy::FAMILY_WRITES`]).
    fn reserve_family_write(&self, family: &str, now: Timestamp) -> Result<(), jiff::SignedDuration> {
        match &self.family_writes {
            Some(buckets) => lock(buckets).reserve(family.to_owned(), now).inspect_err(|_| {
                self.metrics.backoff_hit("family_writes");
            }),
            None => Ok(()),
        }
    }

    /// Gives back a rotation taken by [`Issuer::reserve_family_write`] that was not written.
    fn refund_family_write(&self, family: &str, now: Timestamp) {
        if let Some(buckets) = &self.family_writes {
            lock(buckets).refund(&family.to_owned(), now);
        }
    }

    /// The internal discovery document's `jwks_uri` override, if any.
    pub fn internal_jwks_uri(&self) -> Option<&str> {
        self.internal_jwks_uri.as_deref()
    }

    /// The same issuer reading time from `clock` (tests).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Issuer {
        self.clock = clock;
        self
    }

    /// The same issuer whose shared argon2id queue waits for the known devices' lane for at most
    /// `hold` at a time instead of [`priority::MAX_HOLD`] (tests that show the order of checks
    /// on a loaded machine). Call it before sharing [`Issuer::password_limits`].
    pub fn with_lane_hold(mut self, hold: std::time::Duration) -> Issuer {
        let priority = Arc::new(priority::LanePriority::new(hold));
        self.hash_gate = passwords::HashGate::new(HASH_PERMITS, passwords::DEFAULT_MAX_WAITING)
            .yielding_to(Arc::clone(&priority));
        self.devices = devices::FastLane::new(devices::LANE_PERMITS, devices::LANE_MAX_WAITING, priority);
        self
    }

    /// The argon2id permits of the shared gate (tests hold them to fill it).
    pub fn hash_permits(&self) -> &Arc<Semaphore> {
        self.hash_gate.semaphore()
    }

    /// The shared argon2id gate of the sign-in form.
    pub fn hash_gate(&self) -> &passwords::HashGate {
        &self.hash_gate
    }

    /// What the UserService's password work shares with this sign-in form: the argon2id gate,
    /// the per-user back-off, the per-source failure buckets, the trusted proxies and the
    /// budget of changes users make to their own credentials. Hand it to
    /// [`crate::api::ApiConfig::passwords`], so the process never runs more argon2id at once
    /// than the gate allows and a wrong old password is a failed sign-in. Take it after
    /// [`Issuer::with_lane_hold`].
    pub fn password_limits(&self) -> password_limits::PasswordLimits {
        password_limits::PasswordLimits::of(
            self.hash_gate.clone(),
            Arc::clone(&self.backoff),
            Arc::clone(&self.login_buckets),
            self.trusted_proxies.clone(),
            self.account_writes.clone(),
        )
    }

    /// The argon2id permits of the known devices' lane ([`devices::LANE_PERMITS`]), apart from
    /// [`Issuer::hash_permits`].
    pub fn device_lane_permits(&self) -> &Arc<Semaphore> {
        self.devices.permits()
    }

    /// How many known devices' sign-ins hold a place in their lane now (waiting for its permit
    /// or verifying), each holding the shared queue back.
    pub fn device_lane_pending(&self) -> usize {
        self.devices.pending()
    }

    /// The issuer identifier (the external URL, no trailing slash).
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The only redirect URI of `ichor-ui`.
    pub fn ui_redirect(&self) -> &str {
        &self.ui_redirect
    }

    /// The shared keys.
    pub fn keys(&self) -> &Arc<KeyRing> {
        &self.keys
    }

    /// Verifies an `ichor-ui` (or other audience) ID token of this issuer at the current time,
    /// for the `UserService` bearer check.
    ///
    /// # Errors
    /// [`crate::tokens::TokenError`]; `NoSigningKey` when no keys are loaded.
    pub fn verify_id_token(
        &self,
        token: &str,
        audience: &str,
    ) -> Result<crate::tokens::IdTokenClaims, crate::tokens::TokenError> {
        let keys = self.keys.load().ok_or(crate::tokens::TokenError::NoSigningKey)?;
        crate::tokens::verify_id_token(&keys, token, &self.issuer, audience, self.clock.now())
    }

    pub(crate) fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Where the sign-in page comes from.
    pub(crate) fn ui_files(&self) -> &crate::ui::UiFiles {
        &self.ui_files
    }
}

/// The source address of a request ([`ichor_server::cidr::source_address`] over the peer from
/// `ConnectInfo<SocketAddr>` and `X-Forwarded-For`). A request without `ConnectInfo` counts as
/// coming from `0.0.0.0`, so such requests share one rate-limit bucket. Forwarding headers from
/// an internal peer that is no trusted proxy are warned about
/// ([`ichor_server::cidr::UntrustedForwarders`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Source(pub IpAddr);

impl FromRequestParts<Arc<Issuer>> for Source {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<Issuer>) -> Result<Self, Self::Rejection> {
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| addr.ip());
        let xff: Vec<&str> = parts
            .headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        if let Some(peer) = peer {
            let forwarded = parts.headers.contains_key("x-forwarded-for")
                || parts.headers.contains_key(axum::http::header::FORWARDED);
            state
                .forwarders
                .observe(peer, forwarded, &state.trusted_proxies, std::time::Instant::now());
        }
        let ip = ichor_server::cidr::source_address(peer, &xff, &state.trusted_proxies)
            .unwrap_or(Ipv4Addr::UNSPECIFIED.into());
        Ok(Source(ip))
    }
}

/// The external listener's routes (8443).
///
/// The rate limits key on the peer address: serve the router with
/// `into_make_service_with_connect_info::<SocketAddr>()`, or insert `ConnectInfo<SocketAddr>`
/// into each request's extensions when driving hyper directly (TLS); without it every request
/// shares the bucket of `0.0.0.0`.
pub fn external_router(issuer: Arc<Issuer>) -> Router {
    Router::new()
        .route("/.well-known/openid-configuration", get(discovery::external))
        .route("/oidc/jwks", get(discovery::jwks))
        .route(
            "/oidc/authorize",
            get(authorize::authorize).post(authorize::authorize_form),
        )
        .route("/oidc/login", get(login::page).post(login::submit))
        .route(
            "/oidc/login/factor",
            post(factor::submit).layer(DefaultBodyLimit::max(MAX_FACTOR_BODY_BYTES)),
        )
        .route("/oidc/token", post(token::token))
        .route("/oidc/revoke", post(revoke::revoke))
        .route("/oidc/assets/login.css", get(page::stylesheet))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(issuer)
}

/// The internal listener's routes (8444): discovery and JWKS only.
pub fn internal_router(issuer: Arc<Issuer>) -> Router {
    Router::new()
        .route("/.well-known/openid-configuration", get(discovery::internal))
        .route("/oidc/jwks", get(discovery::jwks))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(issuer)
}

#[cfg(test)]
mod tests {
    use super::check_external_url;

    #[test]
    fn the_external_url_must_be_https_except_on_loopback() {
        assert_eq!(
            check_external_url("https://ichor.example.com/").as_deref(),
            Ok("https://ichor.example.com")
        );
        assert!(check_external_url("http://127.0.0.1:8443").is_ok());
        assert!(check_external_url("http://ichor.example.com").is_err());
        assert!(check_external_url("https://ichor.example.com/?x=1").is_err());
        assert!(check_external_url("https://user@ichor.example.com").is_err());
        assert!(check_external_url("ichor.example.com").is_err());
    }
}
