//! Faults, each a test (issue 10, part 3). Every test is bounded in time and uses loopback only.
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

// === 1. kill -9 during credentials writes ===

/// The files of an `ichor-issuer` deployment that outlives its processes: the same ports (so
/// the same `iss`), keys, TLS pair, users and state directory for every start.
struct Deployment {
    dir: tempfile::TempDir,
    external: u16,
    internal: u16,
    issuer: String,
    ca_pem: String,
}

impl Deployment {
    fn new(users: &[&str]) -> Deployment {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let (ca_pem, _, _) = conformance_common::lay_out(dir.path(), users, SignedDuration::from_hours(30));
        let (external, internal) = (conformance_common::free_port(), conformance_common::free_port());
        Deployment {
            dir,
            external,
            internal,
            issuer: format!("https://127.0.0.1:{external}"),
            ca_pem,
        }
    }

    fn credentials_path(&self) -> PathBuf {
        self.dir.path().join("state/credentials.json")
    }

    fn spawn(&self) -> Proc {
        let p = |s: &str| self.dir.path().join(s);
        let child = Command::new(env!("CARGO_BIN_EXE_ichor-issuer"))
            .args(["--external-url", &self.issuer])
            .args(["--listen", &format!("127.0.0.1:{}", self.external)])
            .args(["--internal-listen", &format!("127.0.0.1:{}", self.internal)])
            .arg("--ichor-tls-dir")
            .arg(p("tls"))
            .arg("--keys-file")
            .arg(p("keys.json"))
            .args(["--store", "local"])
            .arg("--local-users-dir")
            .arg(p("users"))
            .arg("--local-state-dir")
            .arg(p("state"))
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        Proc(child)
    }

    async fn wait_ready(&self, child: &mut Proc, client: &reqwest::Client) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.0.try_wait().unwrap() {
                panic!("ichor-issuer exited before it was ready: {status}");
            }
            if let Ok(r) = client.get(format!("{}/readyz", self.issuer)).send().await
                && r.status().is_success()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "ichor-issuer was not ready within 20 s"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

/// An issuer process, killed (SIGKILL) and reaped on drop, so a failing test leaves none behind.
struct Proc(Child);

impl Proc {
    /// `kill -9` and reap.
    fn kill_9(&mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
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

/// Signs `user` in for `ichor-cli` with `offline_access` through the real endpoints.
async fn http_sign_in(client: &reqwest::Client, issuer: &str, user: &str) -> Value {
    let request = Authorize::cli(VERIFIER);
    sign_in::sign_in(client, issuer, &request, user, common::PASSWORD, SlowDown::Refuse)
        .await
        .unwrap_or_else(|refusal| panic!("{refusal}"))
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

/// One client session: the user, and the last successor the client received.
struct Session {
    user: String,
    token: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_during_credentials_writes_corrupts_no_entry_and_loses_no_family() {
    const USERS: [&str; 2] = ["alice", "bob"];
    const FAMILIES_PER_USER: usize = 3;
    const KILLS: usize = 5;
    let deployment = Deployment::new(&USERS);
    let client = client_from(&deployment.ca_pem, [127, 0, 0, 1]);
    let mut child = deployment.spawn();
    deployment.wait_ready(&mut child, &client).await;

    let mut sessions = Vec::new();
    for user in USERS {
        for _ in 0..FAMILIES_PER_USER {
            let response = http_sign_in(&client, &deployment.issuer, user).await;
            sessions.push(Session {
                user: user.to_owned(),
                token: refresh_of(&response),
            });
        }
    }
    let sessions: Vec<Arc<Mutex<Session>>> = sessions.into_iter().map(|s| Arc::new(Mutex::new(s))).collect();
    let mut total_acked = 0;
    let mut total_lost = 0;
    let unavailable = Arc::new(AtomicUsize::new(0));

    for life in 0..KILLS {
        if life > 0 {
            child = deployment.spawn();
            deployment.wait_ready(&mut child, &client).await;
        }
        // Every session refreshes in a loop; the process is killed after `kill_after`
        // acknowledged rotations, with the other sessions' requests in flight.
        let acked = Arc::new(AtomicUsize::new(0));
        let refused = Arc::new(Mutex::new(Vec::<String>::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let kill_after = 6 + 5 * life;
        let workers: Vec<_> = sessions
            .iter()
            .enumerate()
            .map(|(i, session)| {
                let session = Arc::clone(session);
                let acked = Arc::clone(&acked);
                let refused = Arc::clone(&refused);
                let stop = Arc::clone(&stop);
                let unavailable = Arc::clone(&unavailable);
                // Each worker leaves from its own loopback address: its own token bucket.
                let client = client_from(&deployment.ca_pem, [127, 0, 1, u8::try_from(i + 1).unwrap()]);
                let issuer = deployment.issuer.clone();
                tokio::spawn(async move {
                    let mut lost = 0;
                    while !stop.load(Ordering::SeqCst) {
                        let token = session.lock().unwrap().token.clone();
                        match http_refresh(&client, &issuer, &token).await {
                            Refresh::Ok(body) => {
                                session.lock().unwrap().token = refresh_of(&body);
                                acked.fetch_add(1, Ordering::SeqCst);
                            }
                            // "Try again" (the store's conflict retries ran out under this
                            // load): nothing was written; retry with the same token.
                            Refresh::Refused(503, body) if body.contains("temporarily_unavailable") => {
                                unavailable.fetch_add(1, Ordering::SeqCst);
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            }
                            Refresh::Refused(status, body) => {
                                refused.lock().unwrap().push(format!("{status}: {body}"));
                                return lost;
                            }
                            Refresh::Lost => {
                                lost += 1;
                                return lost;
                            }
                        }
                    }
                    lost
                })
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(10);
        while acked.load(Ordering::SeqCst) < kill_after {
            assert!(
                Instant::now() < deadline,
                "life {life}: too few rotations within 10 s"
            );
            assert!(
                refused.lock().unwrap().is_empty(),
                "{:?}",
                refused.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // SIGKILL: no destructor, no flush, in the middle of the write load.
        child.kill_9();
        stop.store(true, Ordering::SeqCst);
        for w in workers {
            total_lost += w.await.unwrap();
        }
        total_acked += acked.load(Ordering::SeqCst);
        let refused = refused.lock().unwrap().clone();
        assert!(
            refused.is_empty(),
            "life {life}: a refresh was refused around a crash: {refused:?}"
        );

        // After every crash the file parses, every entry parses, and every family is at least
        // at the generation its client last received.
        let entries = parse_credentials_file(&deployment.credentials_path());
        for session in &sessions {
            let s = session.lock().unwrap();
            let family = entries
                .get(&s.user)
                .and_then(|e| e.family(&family_of(&s.token)))
                .unwrap_or_else(|| panic!("life {life}: a family of {} was lost", s.user));
            assert!(
                family.generation >= generation_of(&s.token),
                "life {life}: a family of {} went back from generation {} to {}",
                s.user,
                generation_of(&s.token),
                family.generation
            );
        }
    }
    assert!(total_acked >= 6 * KILLS, "{total_acked} rotations");
    assert!(total_lost > 0, "no request was in flight at any kill");
    eprintln!(
        "{total_acked} rotations acknowledged, {total_lost} requests cut by kill -9, {} answered 503",
        unavailable.load(Ordering::SeqCst)
    );

    // The last successor each client received still refreshes on a fresh process (directly, or
    // as the 10-second grace retry when the crash ate the answer of a committed rotation).
    let mut child = deployment.spawn();
    deployment.wait_ready(&mut child, &client).await;
    for session in &sessions {
        let (user, token) = {
            let s = session.lock().unwrap();
            (s.user.clone(), s.token.clone())
        };
        match http_refresh(&client, &deployment.issuer, &token).await {
            Refresh::Ok(body) => {
                let next = refresh_of(&body);
                assert_eq!(family_of(&next), family_of(&token));
                assert!(generation_of(&next) > generation_of(&token));
            }
            Refresh::Refused(status, body) => panic!("{user}: {status} {body}"),
            Refresh::Lost => panic!("no answer"),
        }
    }
    child.kill_9();
    // No temporary file of an interrupted write is read as the store.
    let entries = parse_credentials_file(&deployment.credentials_path());
    assert_eq!(entries.len(), USERS.len());
    assert_eq!(
        entries.values().map(|e| e.families.len()).sum::<usize>(),
        USERS.len() * FAMILIES_PER_USER
    );
}

// === 2. a key rotation under load ===

/// A relying party: verifies ID tokens with the issuer's JWKS, fetched once and again only when
/// a token names a kid it does not know.
struct RelyingParty {
    client: reqwest::Client,
    issuer: String,
    jwks: Mutex<(Vec<String>, openidconnect::core::CoreJsonWebKeySet)>,
    fetches: AtomicUsize,
}

impl RelyingParty {
    async fn fetch(
        client: &reqwest::Client,
        issuer: &str,
    ) -> (Vec<String>, openidconnect::core::CoreJsonWebKeySet) {
        let body = client
            .get(format!("{issuer}/oidc/jwks"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let value: Value = serde_json::from_str(&body).unwrap();
        let kids = value["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["kid"].as_str().unwrap().to_owned())
            .collect();
        (kids, serde_json::from_str(&body).unwrap())
    }

    async fn new(client: reqwest::Client, issuer: String) -> RelyingParty {
        let jwks = Self::fetch(&client, &issuer).await;
        RelyingParty {
            client,
            issuer,
            jwks: Mutex::new(jwks),
            fetches: AtomicUsize::new(1),
        }
    }

    async fn verify(&self, id_token: &str) -> Result<String, String> {
        use openidconnect::{
            ClientId, IssuerUrl, Nonce,
            core::{CoreIdToken, CoreIdTokenVerifier},
        };
        let kid = jose_header(id_token)["kid"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if !self.jwks.lock().unwrap().0.contains(&kid) {
            let fresh = Self::fetch(&self.client, &self.issuer).await;
            self.fetches.fetch_add(1, Ordering::SeqCst);
            *self.jwks.lock().unwrap() = fresh;
        }
        let jwks = self.jwks.lock().unwrap().1.clone();
        let verifier = CoreIdTokenVerifier::new_public_client(
            ClientId::new("ichor-kube".to_owned()),
            IssuerUrl::new(self.issuer.clone()).unwrap(),
            jwks,
        );
        let token: CoreIdToken = id_token.parse().map_err(|e| format!("{e:?}"))?;
        let claims = token
            .claims(&verifier, |_: Option<&Nonce>| Ok::<(), String>(()))
            .map_err(|e| format!("kid {kid}: {e}"))?;
        Ok(claims.subject().to_string())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_key_rotation_under_load_fails_no_verification() {
    const WORKERS: usize = 3;
    let mut issuer = conformance_common::RunningIssuer::start(conformance_common::Options::default()).await;
    let old_kids = issuer.jwks_kids().await;
    assert_eq!(old_kids.len(), 1, "{old_kids:?}");
    let mut tokens = Vec::new();
    for _ in 0..WORKERS {
        tokens.push(refresh_of(&issuer.cli_sign_in(None).await));
    }
    let rp =
        Arc::new(RelyingParty::new(client_from(&issuer.ca_pem, [127, 0, 2, 1]), issuer.issuer.clone()).await);
    let stop = Arc::new(AtomicBool::new(false));
    let verified = Arc::new(AtomicUsize::new(0));
    // Set once the second document is written; counts the verifications after it.
    let second_doc = Arc::new(AtomicBool::new(false));
    let after_second = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = tokens
        .into_iter()
        .enumerate()
        .map(|(i, mut token)| {
            let rp = Arc::clone(&rp);
            let stop = Arc::clone(&stop);
            let verified = Arc::clone(&verified);
            let second_doc = Arc::clone(&second_doc);
            let after_second = Arc::clone(&after_second);
            let client = client_from(&issuer.ca_pem, [127, 0, 2, u8::try_from(i + 10).unwrap()]);
            let url = issuer.issuer.clone();
            tokio::spawn(async move {
                let mut failures = Vec::new();
                let mut kids = Vec::new();
                // At most 55 refreshes per worker: within one source's burst of 60.
                for _ in 0..55 {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    match http_refresh(&client, &url, &token).await {
                        Refresh::Ok(body) => {
                            token = refresh_of(&body);
                            let id = body["id_token"].as_str().unwrap();
                            let kid = jose_header(id)["kid"].as_str().unwrap().to_owned();
                            match rp.verify(id).await {
                                Ok(sub) if sub == "alice" => {
                                    verified.fetch_add(1, Ordering::SeqCst);
                                    if second_doc.load(Ordering::SeqCst) {
                                        after_second.fetch_add(1, Ordering::SeqCst);
                                    }
                                }
                                Ok(sub) => failures.push(format!("sub {sub}")),
                                Err(e) => failures.push(e),
                            }
                            if kids.last() != Some(&kid) {
                                kids.push(kid);
                            }
                        }
                        Refresh::Refused(status, body) => failures.push(format!("refresh {status}: {body}")),
                        Refresh::Lost => failures.push("refresh: no answer".to_owned()),
                    }
                    tokio::time::sleep(Duration::from_millis(30)).await;
                }
                (failures, kids)
            })
        })
        .collect();

    // Let the load run, then publish the controller's next document: a rotation planned an hour
    // ago, so the new keys are already active and sign at once, next to the old ones.
    let deadline = Instant::now() + Duration::from_secs(10);
    while verified.load(Ordering::SeqCst) < 10 {
        assert!(Instant::now() < deadline, "no load");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let doc1 = issuer.rotate_keys_at(Timestamp::now() - SignedDuration::from_hours(1));
    assert_eq!(doc1.keys().len(), 2, "a new RSA key next to the old one");
    // Then the controller's following document marks the old keys superseded (retireAfter).
    let rotated_at = verified.load(Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(10);
    while verified.load(Ordering::SeqCst) < rotated_at + 10 {
        assert!(Instant::now() < deadline, "no load after the rotation");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    issuer.rotate_keys_at(Timestamp::now());
    second_doc.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(10);
    let new_kid = loop {
        let kids = issuer.jwks_kids().await;
        if let Some(k) = kids.iter().find(|k| !old_kids.contains(k)) {
            break k.clone();
        }
        assert!(Instant::now() < deadline, "the new key was never published");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // The load goes on over the second document, then stops.
    let deadline = Instant::now() + Duration::from_secs(10);
    while after_second.load(Ordering::SeqCst) < 4 * WORKERS {
        assert!(Instant::now() < deadline, "no load after the second document");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stop.store(true, Ordering::SeqCst);
    let mut all_failures = Vec::new();
    let mut saw_both = 0;
    for w in workers {
        let (failures, kids) = w.await.unwrap();
        all_failures.extend(failures);
        if kids.contains(&old_kids[0]) && kids.contains(&new_kid) {
            saw_both += 1;
        }
    }
    assert!(all_failures.is_empty(), "failed verifications: {all_failures:?}");
    assert_eq!(
        saw_both, WORKERS,
        "every session got ID tokens of the old and then of the new key"
    );
    assert!(verified.load(Ordering::SeqCst) >= 30);
    assert!(
        rp.fetches.load(Ordering::SeqCst) >= 2,
        "the relying party re-fetched the JWKS on the new kid"
    );
    drop(issuer);
}

// === 3. two replicas racing rotations of one family (local store) ===

struct LocalPair {
    _dir: tempfile::TempDir,
    a: Arc<Harness>,
    b: Arc<Harness>,
    state: PathBuf,
}

/// Two issuer replicas, each with its own `LocalStore` over one users and one state directory,
/// sharing keys, settings and one clock.
async fn local_pair() -> LocalPair {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    let state = dir.path().join("state");
    std::fs::create_dir_all(&users).unwrap();
    std::fs::write(users.join("alice.yaml"), user_yaml("alice", "[admin]")).unwrap();
    let seed = LocalStore::new(&users, &state);
    seed.write_credentials(
        "alice",
        &Version("absent".to_owned()),
        Some(&common::entry(false)),
    )
    .await
    .unwrap();
    let clock = Arc::new(ManualClock::new(common::start()));
    let ring = Arc::new(KeyRing::with_keys(
        ichor_issuer::keys::LoadedKeys::from_document(&common::first_document(common::start())).unwrap(),
    ));
    let settings = Arc::new(Settings::new(common::settings()));
    let make = || {
        Arc::new(replica(
            Arc::new(LocalStore::new(&users, &state)) as Arc<dyn UserStore>,
            Arc::new(MemoryStore::default()),
            Arc::clone(&ring),
            Arc::clone(&settings),
            Arc::clone(&clock),
        ))
    };
    LocalPair {
        a: make(),
        b: make(),
        _dir: dir,
        state,
    }
}

fn local_family(state: &Path, fam: &str) -> Option<u64> {
    let entries = parse_credentials_file(&state.join("credentials.json"));
    entries["alice"].family(fam).map(|f| f.generation)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_racing_rotations_of_one_family_make_one_rotation_per_generation() {
    let pair = local_pair().await;
    let mut token = refresh_of(&pair.a.cli_session("alice").await);
    let fam = family_of(&token);
    for round in 0..20u64 {
        let (a, b) = {
            let (ha, hb) = (Arc::clone(&pair.a), Arc::clone(&pair.b));
            let (ta, tb) = (token.clone(), token.clone());
            let a = tokio::spawn(async move { ha.refresh(&ta, "ichor-cli", None).await });
            let b = tokio::spawn(async move { hb.refresh(&tb, "ichor-cli", None).await });
            (a.await.unwrap(), b.await.unwrap())
        };
        assert_eq!(a.status, StatusCode::OK, "round {round} A: {}", a.text());
        assert_eq!(b.status, StatusCode::OK, "round {round} B: {}", b.text());
        let (sa, sb) = (refresh_of(&a.json()), refresh_of(&b.json()));
        assert_eq!(sa, sb, "round {round}: both replicas answer the one successor");
        assert_eq!(generation_of(&sa), round + 2);
        assert_eq!(
            local_family(&pair.state, &fam),
            Some(round + 2),
            "round {round}: exactly one rotation"
        );
        token = sa;
        pair.a.clock.advance(SignedDuration::from_secs(1));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_losing_token_of_a_replica_race_is_a_grace_retry_for_ten_seconds_then_a_detected_reuse() {
    let pair = local_pair().await;
    let first = refresh_of(&pair.a.cli_session("alice").await);
    let fam = family_of(&first);
    let (a, b) = {
        let (ha, hb) = (Arc::clone(&pair.a), Arc::clone(&pair.b));
        let (ta, tb) = (first.clone(), first.clone());
        let a = tokio::spawn(async move { ha.refresh(&ta, "ichor-cli", None).await });
        let b = tokio::spawn(async move { hb.refresh(&tb, "ichor-cli", None).await });
        (a.await.unwrap(), b.await.unwrap())
    };
    let successor = refresh_of(&a.json());
    assert_eq!(refresh_of(&b.json()), successor);
    // Within the grace window the losing (previous) token still gets the same successor on
    // either replica, and nothing is written.
    pair.a.clock.advance(SignedDuration::from_secs(9));
    for h in [&pair.a, &pair.b] {
        let again = h.refresh(&first, "ichor-cli", None).await;
        assert_eq!(again.status, StatusCode::OK, "{}", again.text());
        assert_eq!(refresh_of(&again.json()), successor);
    }
    assert_eq!(local_family(&pair.state, &fam), Some(2));
    // After it, the previous token on replica B is a reuse: the family is revoked for both.
    pair.a.clock.advance(SignedDuration::from_secs(1));
    let reuse = pair.b.refresh(&first, "ichor-cli", None).await;
    assert_eq!(reuse.status, StatusCode::BAD_REQUEST);
    assert_eq!(reuse.error(), "invalid_grant");
    assert!(reuse.text().contains("already used"), "{}", reuse.text());
    assert_eq!(
        local_family(&pair.state, &fam),
        None,
        "the family is revoked on disk"
    );
    let dead = pair.a.refresh(&successor, "ichor-cli", None).await;
    assert_eq!(
        dead.error(),
        "invalid_grant",
        "the successor is dead on replica A too"
    );
    assert!(
        pair.b
            .metrics()
            .contains("ichor_issuer_refresh_reuse_detections_total 1")
    );
}

// === 4. the Kubernetes store unreachable, then back ===

const SECRET_PATH: &str = "/api/v1/namespaces/ichor-system/secrets/ichor-user-credentials";
const USERS_PATH: &str = "/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/ichorusers";

/// How the scripted API answers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Api {
    Up,
    /// The connection is refused.
    Refused,
    /// A proxy in front of the API answers 503.
    ProxyError,
}

/// A scripted Kubernetes API holding the credentials Secret and one user; every write is a
/// JSON Patch `test`+`replace` or a merge patch guarded by `resourceVersion`, as `KubeStore`
/// sends them.
struct FakeApi {
    mode: Api,
    resource_version: u64,
    data: serde_json::Map<String, Value>,
    patches: usize,
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl FakeApi {
    fn secret(&self) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "ichor-user-credentials", "namespace": "ichor-system",
                            "resourceVersion": self.resource_version.to_string()},
               "type": "Opaque", "data": self.data})
    }

    fn answer(&mut self, method: &http::Method, path: &str, body: &[u8]) -> (u16, Value) {
        let conflict = (
            409,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409,
                   "message": "the object has been modified"}),
        );
        if path == SECRET_PATH && method == http::Method::GET {
            return (200, self.secret());
        }
        if path == SECRET_PATH && method == http::Method::PATCH {
            let patch: Value = serde_json::from_slice(body).unwrap();
            if let Some(ops) = patch.as_array() {
                let key = ops[0]["path"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("/data/")
                    .to_owned();
                if self.data.get(&key) != Some(&ops[0]["value"]) {
                    return (
                        422,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                               "reason": "Invalid", "code": 422, "message": "test failed"}),
                    );
                }
                match ops[1]["op"].as_str() {
                    Some("replace") => {
                        self.data.insert(key, ops[1]["value"].clone());
                    }
                    _ => {
                        self.data.remove(&key);
                    }
                }
            } else {
                if patch["metadata"]["resourceVersion"].as_str() != Some(&self.resource_version.to_string()) {
                    return conflict;
                }
                for (k, v) in patch["data"].as_object().unwrap() {
                    if v.is_null() {
                        self.data.remove(k);
                    } else {
                        self.data.insert(k.clone(), v.clone());
                    }
                }
            }
            self.resource_version += 1;
            self.patches += 1;
            return (200, self.secret());
        }
        if path == format!("{USERS_PATH}/alice") {
            return (
                200,
                json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
                       "metadata": {"name": "alice", "namespace": "ichor-system", "resourceVersion": "7",
                                    "uid": "uid-alice"},
                       "spec": {"roles": ["admin"]}}),
            );
        }
        panic!("unexpected request {method} {path}");
    }
}

fn kube_store(api: &Arc<Mutex<FakeApi>>) -> KubeStore {
    type BoxError = Box<dyn std::error::Error + Send + Sync>;
    let api = Arc::clone(api);
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let api = Arc::clone(&api);
        async move {
            let (parts, body) = request.into_parts();
            let bytes = body.collect().await?.to_bytes();
            let (code, value) = {
                let mut api = api.lock().unwrap();
                match api.mode {
                    Api::Refused => {
                        return Err::<http::Response<kube::client::Body>, BoxError>(Box::new(
                            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused"),
                        ));
                    }
                    Api::ProxyError => {
                        return Ok(http::Response::builder()
                            .status(503)
                            .header("content-type", "text/plain")
                            .body(kube::client::Body::from(b"upstream connect error".to_vec()))?);
                    }
                    Api::Up => api.answer(&parts.method, parts.uri.path(), &bytes),
                }
            };
            Ok(http::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(serde_json::to_vec(&value)?))?)
        }
    });
    // No user cache: every request reaches the API, so an outage shows at once.
    KubeStore::new(kube::Client::new(service, "ichor-system")).with_user_ttl(Duration::ZERO)
}

#[tokio::test]
async fn an_unreachable_kube_store_is_a_clear_503_and_the_same_router_recovers_without_restart() {
    let entry = common::entry(false);
    let api = Arc::new(Mutex::new(FakeApi {
        mode: Api::Up,
        resource_version: 100,
        data: [(
            "alice".to_owned(),
            Value::String(b64(entry.to_json("alice").unwrap().as_bytes())),
        )]
        .into_iter()
        .collect(),
        patches: 0,
    }));
    let template = Harness::new();
    let h = replica(
        Arc::new(kube_store(&api)) as Arc<dyn UserStore>,
        Arc::new(MemoryStore::default()),
        Arc::clone(&template.ring),
        Arc::clone(&template.settings),
        Arc::new(ManualClock::new(common::start())),
    );
    let token = refresh_of(&h.cli_session("alice").await);
    let code = h
        .code("alice", "ichor-cli", CLI_REDIRECT, "openid offline_access", "")
        .await;
    let patches_before = api.lock().unwrap().patches;

    for outage in [Api::Refused, Api::ProxyError] {
        api.lock().unwrap().mode = outage;
        for _ in 0..3 {
            let reply = h.refresh(&token, "ichor-cli", None).await;
            assert_eq!(
                reply.status,
                StatusCode::SERVICE_UNAVAILABLE,
                "{outage:?}: {}",
                reply.text()
            );
            assert_eq!(reply.error(), "temporarily_unavailable");
            assert!(!reply.text().contains("alice"), "{}", reply.text());
            let reply = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
            assert_eq!(
                reply.status,
                StatusCode::SERVICE_UNAVAILABLE,
                "{outage:?}: {}",
                reply.text()
            );
            let reply = h
                .login(
                    &h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await,
                    "alice",
                    "x",
                )
                .await;
            assert_eq!(
                reply.status,
                StatusCode::SERVICE_UNAVAILABLE,
                "{outage:?}: {}",
                reply.text()
            );
            assert!(!reply.text().contains("alice"), "{}", reply.text());
        }
        h.clock.advance(SignedDuration::from_secs(1));
    }
    assert_eq!(
        api.lock().unwrap().patches,
        patches_before,
        "nothing was written while down"
    );

    // The API is back: the same router, no restart, the same tokens.
    api.lock().unwrap().mode = Api::Up;
    let reply = h.refresh(&token, "ichor-cli", None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(
        generation_of(&refresh_of(&reply.json())),
        2,
        "one rotation, none lost"
    );
    let reply = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "the code was released: {}",
        reply.text()
    );
}

// === 5. clock skew of ±2 minutes between replicas ===

const SKEW: SignedDuration = SignedDuration::from_mins(2);

/// Replica `a` at the harness clock and replica `b` `skew` ahead of it (behind when negative),
/// sharing keys, settings and store.
fn skewed(skew: SignedDuration) -> (Harness, Harness) {
    let a = Harness::new();
    // Keys made an hour earlier, so that both replicas have an active signing key (see
    // `a_replica_behind_the_first_keys_creation_has_no_signing_key_and_answers_503`).
    a.ring.store(
        ichor_issuer::keys::LoadedKeys::from_document(&common::first_document(
            common::start() - SignedDuration::from_hours(1),
        ))
        .unwrap(),
    );
    let b = replica(
        Arc::clone(&a.store) as Arc<dyn UserStore>,
        Arc::clone(&a.store),
        Arc::clone(&a.ring),
        Arc::clone(&a.settings),
        Arc::new(ManualClock::new(common::start() + skew)),
    );
    (a, b)
}

fn advance_both(a: &Harness, b: &Harness, d: SignedDuration) {
    a.clock.advance(d);
    b.clock.advance(d);
}

#[tokio::test]
async fn an_id_token_of_a_replica_two_minutes_off_verifies_until_its_exp_on_the_verifiers_clock() {
    for skew in [SKEW, -SKEW] {
        let (a, b) = skewed(skew);
        let session = a.cli_session("alice").await;
        let id = session["id_token"].as_str().unwrap();
        assert_eq!(
            claims(id)["exp"].as_i64(),
            Some(a.clock.now_secs() + 300),
            "exp is on the issuing replica's clock"
        );
        assert!(b.issuer.verify_id_token(id, "ichor-kube").is_ok(), "skew {skew}");
        // Expiry is still enforced, on the verifying replica's own clock: B reaches exp
        // `skew` earlier (or later) than A.
        let left = 300 - skew.as_secs();
        advance_both(&a, &b, SignedDuration::from_secs(left - 1));
        assert!(b.issuer.verify_id_token(id, "ichor-kube").is_ok(), "skew {skew}");
        advance_both(&a, &b, SignedDuration::from_secs(1));
        assert_eq!(
            b.issuer.verify_id_token(id, "ichor-kube"),
            Err(ichor_issuer::tokens::TokenError::Expired),
            "skew {skew}"
        );
    }
}

#[tokio::test]
async fn a_sign_in_ticket_of_one_replica_is_accepted_by_a_replica_two_minutes_off() {
    for skew in [SKEW, -SKEW] {
        let (a, b) = skewed(skew);
        let ticket = a
            .ticket("ichor-cli", CLI_REDIRECT, "openid offline_access", "")
            .await;
        let reply = b.login(&ticket, "alice", common::PASSWORD).await;
        assert_eq!(reply.status, StatusCode::OK, "skew {skew}: {}", reply.text());
    }
}

/// A documented limit: the first keys are active from their creation on the controller's clock,
/// so a replica whose clock is behind that instant has no signing key yet. It fails closed with
/// a 503 (`temporarily_unavailable`) until its clock reaches the keys' `activeFrom`.
#[tokio::test]
async fn a_replica_behind_the_first_keys_creation_has_no_signing_key_and_answers_503() {
    let a = Harness::new();
    let behind = replica(
        Arc::clone(&a.store) as Arc<dyn UserStore>,
        Arc::clone(&a.store),
        Arc::clone(&a.ring),
        Arc::clone(&a.settings),
        Arc::new(ManualClock::new(common::start() - SKEW)),
    );
    let token = refresh_of(&a.cli_session("alice").await);
    let reply = behind.refresh(&token, "ichor-cli", None).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{}", reply.text());
    assert_eq!(reply.error(), "temporarily_unavailable");
    assert!(!reply.text().contains("alice"), "{}", reply.text());
    // Once its clock reaches the keys' activation it signs like the others.
    behind.clock.advance(SKEW);
    let session = behind.cli_session("alice").await;
    assert!(
        behind
            .issuer
            .verify_id_token(session["id_token"].as_str().unwrap(), "ichor-kube")
            .is_ok()
    );
}

#[tokio::test]
async fn a_code_of_a_replica_two_minutes_ahead_redeems_on_one_behind_and_still_expires() {
    let (ahead, behind) = skewed(-SKEW);
    // `ahead` is the harness replica; `behind` runs two minutes late.
    let code = ahead
        .code("alice", "ichor-cli", CLI_REDIRECT, "openid offline_access", "")
        .await;
    let reply = behind.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    // A code the behind replica sees 60 s + 2 min later is expired there too.
    let code = ahead
        .code("alice", "ichor-cli", CLI_REDIRECT, "openid offline_access", "")
        .await;
    advance_both(&ahead, &behind, SignedDuration::from_secs(180));
    let reply = behind.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.error(), "invalid_grant", "{}", reply.text());
    assert!(reply.text().contains("expired"), "{}", reply.text());
}

/// A documented limit: codes live 60 s and no leeway is added, so a code minted by a replica
/// two minutes BEHIND is already expired on one two minutes ahead. It fails closed
/// (`invalid_grant`; the user signs in again), it never extends a code's life.
#[tokio::test]
async fn a_code_of_a_replica_two_minutes_behind_is_expired_on_one_ahead_and_fails_closed() {
    let (behind, ahead) = skewed(SKEW);
    let code = behind
        .code("alice", "ichor-cli", CLI_REDIRECT, "openid offline_access", "")
        .await;
    let reply = ahead.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text());
    assert_eq!(reply.error(), "invalid_grant");
    assert!(reply.text().contains("expired"), "{}", reply.text());
    assert!(
        behind.store.entry("alice").unwrap().families.is_empty(),
        "no family was started"
    );
}

#[tokio::test]
async fn refreshes_alternate_between_replicas_two_minutes_apart_and_the_absolute_lifetime_holds() {
    for skew in [SKEW, -SKEW] {
        let (a, b) = skewed(skew);
        let mut token = refresh_of(&a.cli_session("alice").await);
        for step in 0..6u64 {
            let h = if step % 2 == 0 { &b } else { &a };
            let reply = h.refresh(&token, "ichor-cli", None).await;
            assert_eq!(
                reply.status,
                StatusCode::OK,
                "skew {skew} step {step}: {}",
                reply.text()
            );
            token = refresh_of(&reply.json());
            assert_eq!(generation_of(&token), step + 2);
            let id = reply.json()["id_token"].as_str().unwrap().to_owned();
            assert!(a.issuer.verify_id_token(&id, "ichor-kube").is_ok());
            assert!(b.issuer.verify_id_token(&id, "ichor-kube").is_ok());
            advance_both(&a, &b, SignedDuration::from_secs(30));
        }
        // The family ends 12 hours after it started on A's clock; B (ahead) refuses it at its
        // own clock's end, never later than the stored `exp`.
        let exp = claims(&token)["exp"].as_i64().unwrap();
        let end = Timestamp::from_second(exp).unwrap();
        a.clock.set(end - skew - SignedDuration::from_secs(1));
        b.clock.set(end - SignedDuration::from_secs(1));
        let reply = b.refresh(&token, "ichor-cli", None).await;
        assert_eq!(reply.status, StatusCode::OK, "skew {skew}: {}", reply.text());
        token = refresh_of(&reply.json());
        advance_both(&a, &b, SignedDuration::from_secs(1));
        let reply = b.refresh(&token, "ichor-cli", None).await;
        assert_eq!(reply.error(), "invalid_grant", "skew {skew}: {}", reply.text());
    }
}

/// A documented limit: the 10-second grace window is measured with the clock of the replica
/// that receives the retry against `rotatedAt` written by the one that rotated. A retry of the
/// previous token at a replica two minutes ahead is therefore a reuse: the family is revoked
/// (fails closed; the user signs in again). At a replica behind, the window is longer by the
/// skew, and the answer is still only the one successor.
#[tokio::test]
async fn a_grace_retry_at_a_replica_two_minutes_off_is_the_same_successor_behind_and_a_reuse_ahead() {
    // The retry lands on a replica behind: the same successor, nothing written.
    let (a, behind) = skewed(-SKEW);
    let first = refresh_of(&a.cli_session("alice").await);
    let successor = refresh_of(&a.refresh(&first, "ichor-cli", None).await.json());
    let writes = a.store.writes.load(Ordering::SeqCst);
    let again = behind.refresh(&first, "ichor-cli", None).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text());
    assert_eq!(refresh_of(&again.json()), successor);
    assert_eq!(a.store.writes.load(Ordering::SeqCst), writes);
    // ... and a reuse once the behind replica's clock is 10 s past the rotation.
    advance_both(&a, &behind, SKEW + SignedDuration::from_secs(10));
    let reuse = behind.refresh(&first, "ichor-cli", None).await;
    assert_eq!(reuse.error(), "invalid_grant");

    // The retry lands on a replica ahead: a reuse at once, the family revoked.
    let (a, ahead) = skewed(SKEW);
    let first = refresh_of(&a.cli_session("alice").await);
    let successor = refresh_of(&a.refresh(&first, "ichor-cli", None).await.json());
    let reuse = ahead.refresh(&first, "ichor-cli", None).await;
    assert_eq!(reuse.status, StatusCode::BAD_REQUEST, "{}", reuse.text());
    assert!(reuse.text().contains("already used"), "{}", reuse.text());
    let dead = a.refresh(&successor, "ichor-cli", None).await;
    assert_eq!(
        dead.error(),
        "invalid_grant",
        "fails closed: the family is revoked"
    );
}

/// Found by this suite: the refresh grant used to write the rotation before it signed the new
/// tokens, so a replica that cannot sign (no active key: its clock is behind the keys'
/// `activeFrom`) answered 503 AFTER committing, and the client's retry later was a reuse that
/// revoked the family. The grants now refuse before writing anything.
#[tokio::test]
async fn a_refresh_that_cannot_be_signed_writes_nothing_and_logs_no_one_out() {
    let a = Harness::new();
    let behind = replica(
        Arc::clone(&a.store) as Arc<dyn UserStore>,
        Arc::clone(&a.store),
        Arc::clone(&a.ring),
        Arc::clone(&a.settings),
        Arc::new(ManualClock::new(common::start() - SKEW)),
    );
    let token = refresh_of(&a.cli_session("alice").await);
    let writes = a.store.writes.load(Ordering::SeqCst);
    let reply = behind.refresh(&token, "ichor-cli", None).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{}", reply.text());
    assert_eq!(
        a.store.writes.load(Ordering::SeqCst),
        writes,
        "a 503 wrote nothing"
    );
    a.clock.advance(SignedDuration::from_secs(60));
    let reply = a.refresh(&token, "ichor-cli", None).await;
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "the retry a minute later: {}",
        reply.text()
    );
}
