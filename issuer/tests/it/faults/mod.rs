//! Faults, each a test. Every test is bounded in time and uses loopback only.
//!
//! - `kill -9` of the real `ichor-issuer` process, several times, while it rotates refresh
//!   tokens into the local store: the credentials file always parses, every entry parses, and no
//!   family a client saw succeed is lost or set back.
//! - A key rotation under load against the real binary: `keys.json` is replaced by the
//!   controller's next document while refreshes run; a relying party that verifies every ID token
//!   with the served JWKS (re-fetched on an unknown `kid`) sees no failure.
//! - Two replicas on one local state directory racing rotations of one family: one rotation
//!   per generation, both answers the same successor, and the loser's token is a grace retry for
//!   10 seconds and a detected reuse (family revoked) after.
//! - The Kubernetes store unreachable, then back: clear 503s that name no user, and the same
//!   router serves again without a restart.
//! - ±2 minutes of clock skew between two replicas sharing keys and store.
//! - One user with the most sessions, all refreshing flat out on the local store: no 503, no
//!   session lost; a refresh answered 503 (the user's line full, every write a conflict) wrote
//!   nothing and its retry succeeds; the sign-in that ends the oldest session logs and counts it.
//!
//! Covered elsewhere (not repeated here): a half-written `keys.json`
//! (`server_reload.rs`), concurrent writers on the Kubernetes store (`store_kube.rs`), a store
//! outage at the code grant and concurrent refreshes with one token (`flows.rs`), a rotation in
//! the middle of one session (`id_tokens.rs`), the webhook's SubjectAccessReview timing out
//! (`reconcilers/tests/admission.rs`).
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::too_many_lines
)]

use std::{
    collections::BTreeMap,
    net::IpAddr,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use crate::common::{
    CLI_REDIRECT, Harness, ManualClock, MemoryStore, UI_REDIRECT, VERIFIER, claims, jose_header, replica,
};
use crate::{common, conformance_common};
use axum::http::StatusCode;
use http_body_util::BodyExt as _;
use ichor_issuer::{
    keys::KeyRing,
    oidc::Settings,
    store::{UserStore, Version, kube::KubeStore, local::LocalStore},
};
use ichor_renderers::auth::credentials::CredentialsEntry;
use ichor_testkit::issuer::sign_in::{self, Authorize, SlowDown};
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

// === shared helpers ===

fn refresh_of(v: &Value) -> String {
    v["refresh_token"].as_str().expect("refresh_token").to_owned()
}

fn generation_of(refresh_token: &str) -> u64 {
    claims(refresh_token)["generation"].as_u64().expect("generation")
}

fn family_of(refresh_token: &str) -> String {
    claims(refresh_token)["fam"].as_str().expect("fam").to_owned()
}

fn user_yaml(name: &str, roles: &str) -> String {
    conformance_common::user_yaml(name, roles)
}

/// An HTTPS client trusting `ca_pem` whose connections leave from `source` (a loopback address
/// of its own, so each client has its own rate-limit bucket).
fn client_from(ca_pem: &str, source: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap())
        .redirect(reqwest::redirect::Policy::none())
        .local_address(IpAddr::from(source))
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// The outcome of one refresh over HTTP.
enum Refresh {
    Ok(Value),
    /// An HTTP answer other than 200: status and body.
    Refused(u16, String),
    /// No answer (the process died).
    Lost,
}

async fn http_refresh(client: &reqwest::Client, issuer: &str, token: &str) -> Refresh {
    let sent = client
        .post(format!("{issuer}/oidc/token"))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", token),
            ("client_id", "ichor-cli"),
        ])
        .send()
        .await;
    let Ok(response) = sent else {
        return Refresh::Lost;
    };
    let status = response.status().as_u16();
    let Ok(body) = response.text().await else {
        return Refresh::Lost;
    };
    if status == 200 {
        Refresh::Ok(serde_json::from_str(&body).unwrap())
    } else {
        Refresh::Refused(status, body)
    }
}

/// Parses the credentials file as the store does: the document, then every entry on its own.
fn parse_credentials_file(path: &Path) -> BTreeMap<String, CredentialsEntry> {
    let bytes = std::fs::read(path).unwrap();
    let doc: Value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("the credentials file does not parse after kill -9: {e}"));
    assert!(doc["generation"].is_u64(), "generation: {doc}");
    doc["entries"]
        .as_object()
        .expect("entries")
        .iter()
        .map(|(user, value)| {
            let entry = CredentialsEntry::parse(user, value.to_string().as_bytes())
                .unwrap_or_else(|e| panic!("the entry of {user} does not parse after kill -9: {e}"));
            (user.clone(), entry)
        })
        .collect()
}

pub(crate) mod busy_user;
mod clock_skew;
mod key_rotation;
mod kill_9;
mod kube_outage;
mod replica_race;
