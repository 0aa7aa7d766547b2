//! The fixtures every target shares: fixed signing keys, a fixed clock, an in-memory user store
//! and an issuer wired to them (the test kit's: `ichor_testkit::issuer`), so every target is
//! deterministic (same input, same path).
//!
//! Placeholders let the fuzzer reach past signature checks it cannot forge: a body or token
//! containing [`CODE`], [`REFRESH`], [`TICKET`], [`ID_TOKEN`] or [`FACTOR`] has it replaced by
//! a token validly signed for the fixed keys and clock, and [`TOTP`] or [`RECOVERY`] by a code
//! dave's second factor accepts (see [`expand`]). Seeds use them; mutations keep or break them.
use std::sync::{Arc, OnceLock};

use ichor_issuer::{
    keys::{KeyRing, LoadedKeys},
    oidc::{Settings, request::s256_challenge},
    store::UserStore,
    tokens::{self, CodeClaims, FactorClaims, RefreshClaims, TicketClaims},
};
use ichor_renderers::{
    auth::credentials::CredentialsEntry,
    crd::UsersSettings,
    trust::{
        HmacKey, KeysDocument, RsaKey,
        keys::{HmacSecret, PrivateKeyPem},
    },
};
use ichor_testkit::issuer::{
    clock::ManualClock,
    harness::{Harness, TOTP_SECRET, cli_family_entry, factor_entry_with_hash, id_claims, replica},
    keys::PEMS,
    store::MemoryStore,
};
use jiff::{SignedDuration, Timestamp};

/// The issuer URL of every fixture, the `ichor-cli` redirect URI and the PKCE verifier of the
/// fixture code: the kit's.
pub use ichor_testkit::issuer::harness::{CLI_REDIRECT, ISSUER, VERIFIER};
/// Placeholder for a valid authorization code of alice for `ichor-cli`.
pub const CODE: &str = "@CODE@";
/// Placeholder for a valid refresh token of alice's family `f1`.
pub const REFRESH: &str = "@REFRESH@";
/// Placeholder for a valid login ticket.
pub const TICKET: &str = "@TICKET@";
/// Placeholder for a valid `ichor-ui` ID token of alice.
pub const ID_TOKEN: &str = "@ID_TOKEN@";
/// Placeholder for a valid second-factor ticket of dave (who has an authenticator app and
/// recovery codes) for `ichor-cli`.
pub const FACTOR: &str = "@FACTOR@";
/// Placeholder for the code dave's authenticator app shows at [`now`].
pub const TOTP: &str = "@TOTP@";
/// Placeholder for one of dave's recovery codes.
pub const RECOVERY: &str = "@RECOVERY@";
/// The fixed family id of alice's refresh family.
pub const FAMILY: &str = "f1";
/// An argon2id PHC string (never checked by the token or revoke endpoints).
const HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$BwcHBwcHBwcHBwcHBwcHBw$\
                    9hZ+8cNJ3lSgdrc6q6DqUHmaLfmeEgKqRTZn9xpSXWg";

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
            PrivateKeyPem::new(PEMS[0].into()).expect("pem"),
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
        cli_family_entry(HASH, start - SignedDuration::from_hours(24), FAMILY, start)
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
        amr: Vec::new(),
        iat: now - 10,
        exp: now + 50,
    }
}

/// dave's credentials entry (an authenticator app of [`TOTP_SECRET`] and recovery codes), made
/// once, and his recovery codes.
fn dave() -> &'static (CredentialsEntry, Vec<String>) {
    static DAVE: OnceLock<(CredentialsEntry, Vec<String>)> = OnceLock::new();
    // The kit's factors on an entry with the fixed hash: no argon2id run in a fuzz build.
    DAVE.get_or_init(|| factor_entry_with_hash(HASH))
}

fn factor_claims() -> FactorClaims {
    let now = now().as_second();
    FactorClaims {
        iss: ISSUER.into(),
        sub: "dave".into(),
        request: ticket_claims(),
        nb: dave().0.not_before.to_string(),
        dev: None,
        factors: vec!["totp".into(), "recovery".into()],
        used: dave().0.factor_use_mark(),
        passkey: None,
        iat: now,
        exp: now + 300,
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
    factor: String,
    totp: String,
    recovery: String,
}

fn valid() -> &'static Valid {
    static VALID: OnceLock<Valid> = OnceLock::new();
    VALID.get_or_init(|| {
        let keys = &keys();
        let (refresh, key_at) = refresh_claims();
        let now = now();
        let id = id_claims(ISSUER, "alice", "ichor-ui", &["admin"], now);
        Valid {
            code: tokens::sign_artifact(keys, &code_claims(), now, now).expect("code"),
            refresh: tokens::sign_artifact(keys, &refresh, key_at, now).expect("refresh"),
            ticket: tokens::sign_artifact(keys, &ticket_claims(), now, now).expect("ticket"),
            id_token: tokens::sign_id_token(keys, &id, now).expect("id token"),
            factor: tokens::sign_artifact(keys, &factor_claims(), now, now).expect("factor ticket"),
            totp: ichor_renderers::auth::totp::code_at(TOTP_SECRET, now).expect("totp code"),
            recovery: dave().1[0].clone(),
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
        .replace(FACTOR, &v.factor)
        .replace(TOTP, &v.totp)
        .replace(RECOVERY, &v.recovery)
}

/// HMAC-SHA256 over `input` with the fixed HMAC key (to sign fuzzed payloads).
pub fn hmac(input: &[u8]) -> Vec<u8> {
    let signer = josekit::jws::HS256
        .signer_from_bytes([1u8; 32])
        .expect("hmac key");
    josekit::jws::JwsSigner::sign(&signer, input).expect("hmac")
}

/// A fresh in-process issuer (fresh rate limits, code ledger and store) over the fixed keys,
/// a clock standing at [`now`] and the kit's memory store holding alice (admin, with
/// [`alice_entry`]), carol (viewer, no password) and dave (admin, with a second factor).
pub fn harness() -> Harness {
    let store = Arc::new(MemoryStore::default());
    store.add_user("alice", &["admin"], Some(alice_entry().clone()));
    store.add_user("carol", &["viewer"], None);
    store.add_user("dave", &["admin"], Some(dave().0.clone()));
    let settings = Arc::new(Settings::new(UsersSettings::resolve(None).expect("settings")));
    replica(
        Arc::clone(&store) as Arc<dyn UserStore>,
        store,
        Arc::clone(ring()),
        settings,
        Arc::new(ManualClock::new(now())),
    )
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

/// Sends one request through the external router of a fresh [`harness`] on a current-thread
/// runtime and returns the status, headers and body (printed when `ICHOR_FUZZ_SHOW` is set, to
/// check what a seed reaches).
pub fn send(
    request: axum::http::Request<axum::body::Body>,
) -> (axum::http::StatusCode, axum::http::HeaderMap, Vec<u8>) {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    let runtime = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    });
    let reply = runtime.block_on(harness().send(request));
    if std::env::var_os("ICHOR_FUZZ_SHOW").is_some() {
        eprintln!("{} {}", reply.status, reply.text());
    }
    (reply.status, reply.headers, reply.body.to_vec())
}
