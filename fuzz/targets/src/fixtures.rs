//! The fixtures every target shares: fixed signing keys, a fixed clock, an in-memory user store
//! and an issuer wired to them, so every target is deterministic (same input, same path).
//!
//! Placeholders let the fuzzer reach past signature checks it cannot forge: a body or token
//! containing [`CODE`], [`REFRESH`], [`TICKET`] or [`ID_TOKEN`] has it replaced by a token
//! validly signed for the fixed keys and clock (see [`expand`]). Seeds use them; mutations keep
//! or break them.
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use async_trait::async_trait;
use ichor_issuer::{
    keys::{KeyRing, LoadedKeys},
    oidc::{Clock, Issuer, IssuerConfig, Settings, TrustedProxies, request::s256_challenge},
    store::{StoreError, StoredUser, UserStore, Version},
    tokens::{self, CodeClaims, IdTokenClaims, RefreshClaims, TicketClaims},
};
use ichor_renderers::{
    auth::credentials::CredentialsEntry,
    crd::UsersSettings,
    trust::{
        HmacKey, KeysDocument, RsaKey,
        keys::{HmacSecret, PrivateKeyPem},
    },
};
use jiff::{SignedDuration, Timestamp};
use prometheus_client::registry::Registry;

/// The issuer URL of every fixture.
pub const ISSUER: &str = "https://ichor.example.com";
/// The `ichor-cli` redirect URI the fixtures use.
pub const CLI_REDIRECT: &str = "http://127.0.0.1:38123/callback";
/// The PKCE verifier of the fixture code.
pub const VERIFIER: &str = "verifier-0123456789-abcdefghijklmnopqrstuvwxyz";
/// Placeholder for a valid authorization code of alice for `ichor-cli`.
pub const CODE: &str = "@CODE@";
/// Placeholder for a valid refresh token of alice's family `f1`.
pub const REFRESH: &str = "@REFRESH@";
/// Placeholder for a valid login ticket.
pub const TICKET: &str = "@TICKET@";
/// Placeholder for a valid `ichor-ui` ID token of alice.
pub const ID_TOKEN: &str = "@ID_TOKEN@";
/// The fixed family id of alice's refresh family.
pub const FAMILY: &str = "f1";
/// An argon2id PHC string (never checked by the token or revoke endpoints).
const HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$BwcHBwcHBwcHBwcHBwcHBw$\
                    9hZ+8cNJ3lSgdrc6q6DqUHmaLfmeEgKqRTZn9xpSXWg";

const PEM: &str = include_str!("../../../issuer/tests/fixtures/rsa3072-1.pkcs8.pem");

/// The fixed "now" of every target.
pub fn now() -> Timestamp {
    "2026-06-01T00:00:00Z".parse().expect("now")
}

fn key_start() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().expect("start")
}

/// The fixed keys document: one RSA key `k-1` and one HMAC key `h-1`, live from January 2026.
pub fn document() -> &'static KeysDocument {
    static DOC: OnceLock<KeysDocument> = OnceLock::new();
    DOC.get_or_init(|| {
        let t = key_start();
        let rsa = RsaKey::new(
            "k-1".into(),
            PrivateKeyPem::new(PEM.into()).expect("pem"),
            t,
            t,
            None,
        );
        let hmac = HmacKey::new("h-1".into(), HmacSecret::new([1; 32]), t, t, None);
        KeysDocument::new(vec![rsa.expect("rsa")], vec![hmac.expect("hmac")]).expect("doc")
    })
}

/// The key ring holding the fixed keys, loaded once (RSA parsing is slow) and shared by every
/// issuer the targets build.
pub fn ring() -> &'static Arc<KeyRing> {
    static RING: OnceLock<Arc<KeyRing>> = OnceLock::new();
    RING.get_or_init(|| {
        Arc::new(KeyRing::with_keys(
            LoadedKeys::from_document(document()).expect("load"),
        ))
    })
}

/// The fixed keys.
pub fn keys() -> Arc<LoadedKeys> {
    ring().load().expect("keys are loaded")
}

/// Alice's credentials entry with the family [`FAMILY`] started an hour before [`now`].
pub fn alice_entry() -> &'static CredentialsEntry {
    static ENTRY: OnceLock<CredentialsEntry> = OnceLock::new();
    ENTRY.get_or_init(|| {
        let start = now() - SignedDuration::from_hours(1);
        CredentialsEntry::new(HASH.into(), start - SignedDuration::from_hours(24), false)
            .start_family(
                FAMILY,
                "ichor-cli",
                "ichor-kube",
                start,
                SignedDuration::from_hours(12),
            )
            .expect("family")
    })
}

fn code_claims() -> CodeClaims {
    let now = now().as_second();
    CodeClaims {
        iss: ISSUER.into(),
        jti: "jti-1".into(),
        client_id: "ichor-cli".into(),
        redirect_uri: CLI_REDIRECT.into(),
        sub: "alice".into(),
        nonce: "nonce-1".into(),
        code_challenge: s256_challenge(VERIFIER),
        offline_access: true,
        audience: "ichor-kube".into(),
        iat: now - 10,
        exp: now + 50,
    }
}

fn ticket_claims() -> TicketClaims {
    let now = now().as_second();
    TicketClaims {
        iss: ISSUER.into(),
        client_id: "ichor-cli".into(),
        redirect_uri: CLI_REDIRECT.into(),
        state: "state-1".into(),
        nonce: "nonce-1".into(),
        code_challenge: s256_challenge(VERIFIER),
        offline_access: true,
        audience: "ichor-kube".into(),
        iat: now,
        exp: now + 300,
    }
}

fn refresh_claims() -> (RefreshClaims, Timestamp) {
    let family = alice_entry().family(FAMILY).expect("family");
    let claims = RefreshClaims {
        iss: ISSUER.into(),
        sub: "alice".into(),
        client_id: family.client.clone(),
        audience: family.aud.clone(),
        fam: FAMILY.into(),
        generation: family.generation,
        iat: family.iat.as_second(),
        exp: family.exp.as_second(),
    };
    (claims, family.rotated_at.unwrap_or(family.iat))
}

/// The valid tokens the placeholders stand for, minted once.
struct Valid {
    code: String,
    refresh: String,
    ticket: String,
    id_token: String,
}

fn valid() -> &'static Valid {
    static VALID: OnceLock<Valid> = OnceLock::new();
    VALID.get_or_init(|| {
        let keys = &keys();
        let (refresh, key_at) = refresh_claims();
        let now = now();
        let id = IdTokenClaims {
            iss: ISSUER.into(),
            sub: "alice".into(),
            aud: "ichor-ui".into(),
            exp: now.as_second() + 300,
            iat: now.as_second(),
            nonce: None,
            groups: vec!["admin".into()],
        };
        Valid {
            code: tokens::sign_artifact(keys, &code_claims(), now, now).expect("code"),
            refresh: tokens::sign_artifact(keys, &refresh, key_at, now).expect("refresh"),
            ticket: tokens::sign_artifact(keys, &ticket_claims(), now, now).expect("ticket"),
            id_token: tokens::sign_id_token(keys, &id, now).expect("id token"),
        }
    })
}

/// `input` with each placeholder replaced by its valid token.
pub fn expand(input: &str) -> String {
    if !input.contains('@') {
        return input.to_owned();
    }
    let v = valid();
    input
        .replace(CODE, &v.code)
        .replace(REFRESH, &v.refresh)
        .replace(TICKET, &v.ticket)
        .replace(ID_TOKEN, &v.id_token)
}

/// HMAC-SHA256 over `input` with the fixed HMAC key (to sign fuzzed payloads).
pub fn hmac(input: &[u8]) -> Vec<u8> {
    let signer = josekit::jws::HS256
        .signer_from_bytes([1u8; 32])
        .expect("hmac key");
    josekit::jws::JwsSigner::sign(&signer, input).expect("hmac")
}

/// A fixed clock at [`now`].
pub struct FixedClock;

impl Clock for FixedClock {
    fn now(&self) -> Timestamp {
        now()
    }
}

/// A user store in memory: alice (admin, with [`alice_entry`]) and carol (no password).
pub struct MemoryStore {
    creds: Mutex<Option<CredentialsEntry>>,
    version: Mutex<u64>,
}

impl MemoryStore {
    /// A fresh store.
    pub fn new() -> Self {
        MemoryStore {
            creds: Mutex::new(Some(alice_entry().clone())),
            version: Mutex::new(1),
        }
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

/// The guarded value, also after a panic in another thread held the lock (a fuzz input that
/// panics ends the process anyway; a regression test reports it and goes on).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn user(name: &str) -> Option<StoredUser> {
    let roles = match name {
        "alice" => vec!["admin".to_owned()],
        "carol" => vec!["viewer".to_owned()],
        _ => return None,
    };
    Some(StoredUser {
        name: name.to_owned(),
        roles,
        disabled: false,
        display_name: None,
        email: None,
    })
}

#[async_trait]
impl UserStore for MemoryStore {
    async fn get_user(&self, name: &str) -> Result<Option<StoredUser>, StoreError> {
        Ok(user(name))
    }

    async fn list_users(&self) -> Result<Vec<StoredUser>, StoreError> {
        Ok(["alice", "carol"].into_iter().filter_map(user).collect())
    }

    async fn read_credentials(&self, name: &str) -> Result<(Option<CredentialsEntry>, Version), StoreError> {
        let v = *lock(&self.version);
        let entry = if name == "alice" {
            lock(&self.creds).clone()
        } else {
            None
        };
        Ok((entry, Version(v.to_string())))
    }

    async fn write_credentials(
        &self,
        name: &str,
        expected: &Version,
        entry: Option<&CredentialsEntry>,
    ) -> Result<Version, StoreError> {
        let mut v = lock(&self.version);
        if expected.0 != v.to_string() {
            return Err(StoreError::Conflict(name.to_owned()));
        }
        if name == "alice" {
            *lock(&self.creds) = entry.cloned();
        }
        *v += 1;
        Ok(Version(v.to_string()))
    }
}

/// A fresh issuer (fresh rate limits, code ledger and store) over the fixed keys and clock.
pub fn issuer() -> Arc<Issuer> {
    let ring = Arc::clone(ring());
    let settings = Arc::new(Settings::new(UsersSettings::resolve(None).expect("settings")));
    let mut registry = Registry::default();
    let issuer = Issuer::new(
        IssuerConfig {
            external_url: ISSUER.into(),
            trusted_proxies: TrustedProxies::none(),
        },
        ring,
        Arc::new(MemoryStore::new()),
        settings,
        &mut registry,
    )
    .expect("issuer")
    .with_clock(Arc::new(FixedClock));
    Arc::new(issuer)
}

/// Posts `data` as an `application/x-www-form-urlencoded` body to `path` of a fresh router,
/// placeholders expanded when the bytes are text (see [`expand`]), and returns the answer.
pub fn post_form(path: &str, data: &[u8]) -> (axum::http::StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let body = match std::str::from_utf8(data) {
        Ok(text) => expand(text).into_bytes(),
        Err(_) => data.to_vec(),
    };
    let request = axum::http::Request::post(path)
        .header(
            axum::http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(axum::body::Body::from(body))
        .expect("request");
    send(request)
}

/// Sends one request through the external router of a fresh [`issuer`] on a current-thread
/// runtime and returns the status, headers and body (printed when `ICHOR_FUZZ_SHOW` is set, to
/// check what a seed reaches).
pub fn send(
    request: axum::http::Request<axum::body::Body>,
) -> (axum::http::StatusCode, axum::http::HeaderMap, Vec<u8>) {
    use tower::ServiceExt;
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    let runtime = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    });
    runtime.block_on(async {
        let router = ichor_issuer::oidc::external_router(issuer());
        let response = router.oneshot(request).await.expect("infallible");
        let status = response.status();
        let headers = response.headers().clone();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("body");
        if std::env::var_os("ICHOR_FUZZ_SHOW").is_some() {
            eprintln!("{status} {}", String::from_utf8_lossy(&body));
        }
        (status, headers, body.to_vec())
    })
}
