//! Load generator for `hack/bench/issuer.sh` (loopback only).
//!
//! - `setup --dir D --users N`: writes a test CA and leaf (`D/ca.crt`, `D/tls/`), `D/keys.json`
//!   (the controller's key timeline with a committed RSA-3072 test key), N `IchorUser` files
//!   (`bench-0` … ) and `D/state/credentials.json` with one argon2id hash for all of them.
//! - `refresh`: signs in `--clients` users (one refresh family each), then every client rotates
//!   its own family as fast as it can for `--seconds`; prints throughput and latency.
//! - `logins`: `--count` full sign-ins (authorize + password) started at once; prints timings.
//! - `mixed --issuer A --issuer B --pid PA --pid PB`: a paced mixed workload (discovery, JWKS,
//!   refresh grants, sign-ins and `UserService/WhoAmI` over gRPC-web), each request alternating
//!   between the issuers, for `--seconds`; then the same again with a login flood added
//!   (`--flood` tasks signing in as fast as they can, a third with wrong passwords). Prints a
//!   markdown report: throughput and p50/p99/p999 per endpoint and phase, and each issuer's
//!   VmHWM after each phase.
//! - `control-plane --dir D`: a real kube-apiserver and etcd on loopback with Ichor's chart
//!   installed and the users of `setup` in it, for issuers run with `--store kube`
//!   (`hack/bench/kube-store.sh`; see [`cluster`]).
//! - `serve-memory --dir D --port P`: the same OIDC router as the binary, over the same TLS
//!   serving code, but on an in-memory store with one version per user (no file, no fsync, no
//!   cross-user conflicts): the issuer's own ceiling, with the store taken out.
//!
//! Every request carries an `X-Forwarded-For` address (the issuer is started with
//! `--trusted-proxy 127.0.0.0/8`), changed before a source's token bucket would run dry, so the
//! per-source rate limits — a defence, not a capacity — do not cap the measurement.

use anyhow::{Context as _, Result, bail};
use clap::{Parser, Subcommand};
use ichor_renderers::{
    auth::{Password, credentials::CredentialsEntry, hash::hash_password},
    trust::{
        HmacKey, KeyEffect, RsaKey, TimelineSettings,
        keys::{HmacSecret, PrivateKeyPem},
    },
};
use jiff::{SignedDuration, Timestamp};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PASSWORD: &str = "bench password 0123456789";
const REDIRECT: &str = "http://127.0.0.1:38123/callback";
const VERIFIER: &str = "bench-verifier-0123456789-abcdefghijklmnopqrstuvwxyz";
const RSA_PEM: &str = include_str!("../tests/fixtures/rsa3072-1.pkcs8.pem");
/// Token requests per forwarded address before the next one (the bucket's burst is 60).
const PER_ADDRESS: usize = 50;

#[derive(Parser)]
#[command(about = "Load generator for hack/bench/issuer.sh")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Writes the files an issuer needs for the benchmark.
    Setup {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long, default_value_t = 100)]
        users: usize,
    },
    /// Refresh-grant throughput and latency.
    Refresh {
        /// An issuer URL (once per issuer; each client's requests alternate between them).
        #[arg(long, required = true)]
        issuer: Vec<String>,
        #[arg(long)]
        ca: PathBuf,
        #[arg(long, default_value_t = 64)]
        clients: usize,
        #[arg(long, default_value_t = 10)]
        seconds: u64,
    },
    /// Starts a real control plane holding the users of `setup` (until SIGTERM).
    ControlPlane {
        #[arg(long)]
        dir: PathBuf,
    },
    /// Serves the issuer in this process on an in-memory store (until killed).
    ServeMemory {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        port: u16,
    },
    /// Mixed paced workload against several issuers, then the same with a login flood.
    Mixed {
        /// An issuer URL (give it once per issuer; requests alternate between them).
        #[arg(long, required = true)]
        issuer: Vec<String>,
        #[arg(long)]
        ca: PathBuf,
        /// An issuer process id whose VmHWM the report shows (once per issuer).
        #[arg(long)]
        pid: Vec<u32>,
        /// Seconds per phase (sustained, then flood).
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Concurrent sign-in loops during the flood.
        #[arg(long, default_value_t = 200)]
        flood: usize,
    },
    /// A flood of concurrent sign-ins.
    Logins {
        #[arg(long)]
        issuer: String,
        #[arg(long)]
        ca: PathBuf,
        #[arg(long, default_value_t = 100)]
        count: usize,
    },
}

#[path = "issuer_load/cluster.rs"]
mod cluster;

#[tokio::main]
async fn main() -> Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    match Cli::parse().command {
        Command::Setup { dir, users } => setup(&dir, users),
        Command::Refresh {
            issuer,
            ca,
            clients,
            seconds,
        } => refresh(&issuer, &ca, clients, Duration::from_secs(seconds)).await,
        Command::Logins { issuer, ca, count } => logins(&issuer, &ca, count).await,
        Command::Mixed {
            issuer,
            ca,
            pid,
            seconds,
            flood,
        } => mixed::run(&issuer, &ca, &pid, Duration::from_secs(seconds), flood).await,
        Command::ServeMemory { dir, port } => memory::run(&dir, port).await,
        Command::ControlPlane { dir } => cluster::run(&dir).await,
    }
}

// === setup ===

fn setup(dir: &Path, users: usize) -> Result<()> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let (tls, users_dir, state) = (dir.join("tls"), dir.join("users"), dir.join("state"));
    for d in [&tls, &users_dir, &state] {
        std::fs::create_dir_all(d).with_context(|| format!("create {}", d.display()))?;
    }
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "ichor bench CA");
    std::fs::write(dir.join("ca.crt"), ca.self_signed(&ca_key)?.pem())?;
    let issuer = Issuer::new(ca, ca_key);
    let leaf_key = KeyPair::generate()?;
    let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])?;
    leaf.use_authority_key_identifier_extension = true;
    std::fs::write(tls.join("tls.crt"), leaf.signed_by(&leaf_key, &issuer)?.pem())?;
    std::fs::write(tls.join("tls.key"), leaf_key.serialize_pem())?;

    // keys.json as the controller's timeline makes it, one hour old.
    let at = Timestamp::now() - SignedDuration::from_hours(1);
    let settings = TimelineSettings::new(SignedDuration::from_mins(15), SignedDuration::from_hours(48))?;
    let plan = ichor_renderers::trust::plan(at, None, &settings);
    let mut doc = plan.apply_changes(None);
    for effect in &plan.effects {
        let k = effect.key();
        match effect {
            KeyEffect::GenerateRsa(_) => doc.insert_rsa(RsaKey::new(
                k.kid.clone(),
                PrivateKeyPem::new(RSA_PEM.to_owned())?,
                k.created_at,
                k.active_from,
                k.retire_after,
            )?)?,
            KeyEffect::GenerateHmac(_) => doc.insert_hmac(HmacKey::new(
                k.kid.clone(),
                HmacSecret::new(*b"bench hmac secret, 32 bytes long"),
                k.created_at,
                k.active_from,
                k.retire_after,
            )?)?,
        }
    }
    std::fs::write(dir.join("keys.json"), doc.to_json())?;

    let hash = hash_password(&Password::new(PASSWORD), &[9; 16])?;
    let mut entries = serde_json::Map::new();
    for i in 0..users {
        let name = format!("bench-{i}");
        std::fs::write(
            users_dir.join(format!("{name}.yaml")),
            format!(
                "apiVersion: ichor.maesh.dev/v1alpha1\nkind: IchorUser\nmetadata:\n  name: {name}\n  \
                 namespace: ichor-system\nspec:\n  roles: [viewer]\n"
            ),
        )?;
        let entry = CredentialsEntry::new(hash.clone(), at, false);
        entries.insert(name.clone(), serde_json::from_str(&entry.to_json(&name)?)?);
    }
    let credentials = serde_json::json!({"generation": 1, "entries": entries});
    std::fs::write(state.join("credentials.json"), credentials.to_string())?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700))?;
    }
    println!("setup: {users} users in {}", dir.display());
    Ok(())
}

// === clients ===

fn client(ca: &[u8]) -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca)?)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(60))
        .build()?)
}

/// A distinct documentation-range-free private address for the `n`-th source.
fn source(n: usize) -> String {
    format!("10.{}.{}.{}", (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff)
}

async fn json_ok(r: reqwest::RequestBuilder) -> Result<serde_json::Value> {
    let response = r.send().await?;
    let status = response.status();
    let body = response.text().await?;
    if !status.is_success() {
        bail!("HTTP {status}: {body}");
    }
    Ok(serde_json::from_str(&body)?)
}

/// Signs `user` in for `ichor-cli` with `offline_access`: the refresh token.
async fn sign_in(http: &reqwest::Client, issuer: &str, user: &str, from: &str) -> Result<String> {
    let tokens = sign_in_tokens(http, issuer, user, PASSWORD, "ichor-kube", from).await?;
    Ok(tokens["refresh_token"]
        .as_str()
        .context("no refresh_token")?
        .to_owned())
}

/// Signs `user` in for `ichor-cli` with `offline_access` and ID tokens for `audience`: the
/// token response.
async fn sign_in_tokens(
    http: &reqwest::Client,
    issuer: &str,
    user: &str,
    password: &str,
    audience: &str,
    from: &str,
) -> Result<serde_json::Value> {
    let challenge = ichor_issuer::oidc::request::s256_challenge(VERIFIER);
    let ticket = json_ok(
        http.get(format!("{issuer}/oidc/authorize"))
            .query(&[
                ("response_type", "code"),
                ("client_id", "ichor-cli"),
                ("redirect_uri", REDIRECT),
                ("state", "bench-state"),
                ("nonce", "bench-nonce"),
                ("scope", "openid offline_access"),
                ("code_challenge", challenge.as_str()),
                ("code_challenge_method", "S256"),
                ("audience", audience),
            ])
            .header("accept", "application/json")
            .header("x-forwarded-for", from),
    )
    .await?;
    let login = json_ok(
        http.post(format!("{issuer}/oidc/login"))
            .header("x-forwarded-for", from)
            .json(&serde_json::json!({"ticket": ticket["ticket"], "username": user, "password": password})),
    )
    .await?;
    let redirect = url::Url::parse(login["redirect_uri"].as_str().context("no redirect_uri")?)?;
    let code = redirect
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .context("no code")?;
    json_ok(
        http.post(format!("{issuer}/oidc/token"))
            .header("x-forwarded-for", from)
            .form(&[
                ("grant_type", "authorization_code"),
                ("code", code.as_str()),
                ("client_id", "ichor-cli"),
                ("redirect_uri", REDIRECT),
                ("code_verifier", VERIFIER),
            ]),
    )
    .await
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64)).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

// === refresh ===

#[derive(Default)]
struct Tally {
    ok: Vec<Duration>,
    errors: std::collections::BTreeMap<String, usize>,
}

async fn refresh(issuers: &[String], ca: &Path, clients: usize, duration: Duration) -> Result<()> {
    let ca = std::fs::read(ca)?;
    // Families up front: the sign-ins are argon2-bound (two at a time), so four at once suffice.
    let started = Instant::now();
    let limit = Arc::new(tokio::sync::Semaphore::new(4));
    let mut setups = Vec::new();
    for i in 0..clients {
        let http = client(&ca)?;
        let (issuer, limit) = (issuers[i % issuers.len()].clone(), Arc::clone(&limit));
        setups.push(tokio::spawn(async move {
            let _permit = limit.acquire().await?;
            let token = sign_in(&http, &issuer, &format!("bench-{i}"), &source(1_000_000 + i)).await?;
            anyhow::Ok((http, token))
        }));
    }
    let mut families = Vec::new();
    for s in setups {
        families.push(s.await??);
    }
    eprintln!(
        "refresh: {clients} families signed in in {:.1}s",
        started.elapsed().as_secs_f64()
    );

    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::new();
    for (i, (http, mut token)) in families.into_iter().enumerate() {
        let issuers = issuers.to_vec();
        tasks.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            let mut n = 0usize;
            while Instant::now() < deadline {
                let from = source(i * 100_000 + n / PER_ADDRESS);
                let issuer = &issuers[(i + n) % issuers.len()];
                n += 1;
                let t = Instant::now();
                let reply = http
                    .post(format!("{issuer}/oidc/token"))
                    .header("x-forwarded-for", from)
                    .form(&[
                        ("grant_type", "refresh_token"),
                        ("refresh_token", token.as_str()),
                        ("client_id", "ichor-cli"),
                    ])
                    .send()
                    .await;
                match reply {
                    Ok(r) if r.status().is_success() => match r.json::<serde_json::Value>().await {
                        Ok(v) => match v["refresh_token"].as_str() {
                            Some(next) => {
                                tally.ok.push(t.elapsed());
                                token = next.to_owned();
                            }
                            None => *tally.errors.entry("no refresh_token".into()).or_default() += 1,
                        },
                        Err(e) => *tally.errors.entry(format!("body: {e}")).or_default() += 1,
                    },
                    Ok(r) => {
                        let status = r.status().as_u16();
                        let body = r.text().await.unwrap_or_default();
                        let key = format!("HTTP {status}: {}", body.chars().take(120).collect::<String>());
                        *tally.errors.entry(key).or_default() += 1;
                        if status == 400 {
                            // The family is gone (invalid_grant): this client stops.
                            break;
                        }
                    }
                    Err(e) => *tally.errors.entry(format!("transport: {e}")).or_default() += 1,
                }
            }
            tally
        }));
    }
    let mut all = Tally::default();
    for t in tasks {
        let t = t.await?;
        all.ok.extend(t.ok);
        for (k, v) in t.errors {
            *all.errors.entry(k).or_default() += v;
        }
    }
    let elapsed = start.elapsed();
    all.ok.sort();
    let errors: usize = all.errors.values().sum();
    println!(
        "refresh issuers={} clients={clients} seconds={:.1} ok={} errors={errors} rps={:.1} p50_ms={:.1} p99_ms={:.1} max_ms={:.1}",
        issuers.len(),
        elapsed.as_secs_f64(),
        all.ok.len(),
        all.ok.len() as f64 / elapsed.as_secs_f64(),
        ms(percentile(&all.ok, 50.0)),
        ms(percentile(&all.ok, 99.0)),
        ms(all.ok.last().copied().unwrap_or_default()),
    );
    for (k, v) in &all.errors {
        println!("refresh error x{v}: {k}");
    }
    Ok(())
}

// === logins ===

/// The seconds a 503 "busy" answer asks to wait ("… try again in N seconds"), 1 if it names none.
fn retry_after(error: &str) -> u64 {
    error
        .split("try again in ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

async fn logins(issuer: &str, ca: &Path, count: usize) -> Result<()> {
    let ca = std::fs::read(ca)?;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..count {
        let http = client(&ca)?;
        let issuer = issuer.to_owned();
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            let mut shed = 0usize;
            // As a person at the sign-in page does: a "busy, wait N seconds" answer is waited
            // out and the sign-in tried again.
            let r = loop {
                match sign_in(&http, &issuer, &format!("bench-{i}"), &source(2_000_000 + i)).await {
                    Err(e) if e.to_string().starts_with("HTTP 503") && shed < 30 => {
                        shed += 1;
                        tokio::time::sleep(Duration::from_secs(retry_after(&e.to_string()))).await;
                    }
                    r => break r,
                }
            };
            (t.elapsed(), shed, r.err().map(|e| e.to_string()))
        }));
    }
    let mut times = Vec::new();
    let mut shed_answers = 0;
    let mut errors = std::collections::BTreeMap::<String, usize>::new();
    for t in tasks {
        let (d, shed, e) = t.await?;
        shed_answers += shed;
        match e {
            None => times.push(d),
            Some(e) => *errors.entry(e.chars().take(160).collect()).or_default() += 1,
        }
    }
    times.sort();
    println!(
        "logins count={count} ok={} busy_answers_waited_out={shed_answers} wall_s={:.2} p50_ms={:.0} max_ms={:.0}",
        times.len(),
        start.elapsed().as_secs_f64(),
        ms(percentile(&times, 50.0)),
        ms(times.last().copied().unwrap_or_default()),
    );
    for (k, v) in &errors {
        println!("logins error x{v}: {k}");
    }
    Ok(())
}

// === mixed ===

mod mixed {
    use super::{PASSWORD, PER_ADDRESS, client, ms, percentile, sign_in_tokens, source};
    use anyhow::{Context as _, Result};
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// One endpoint class of the paced workload: its name, requests per second in all, and
    /// how many tasks share that rate.
    const CLASSES: &[(&str, f64, usize)] = &[
        ("discovery", 100.0, 4),
        ("jwks", 100.0, 4),
        ("refresh", 40.0, 8),
        ("whoami (gRPC-web)", 40.0, 4),
        ("sign-in (authorize+password+code)", 2.0, 2),
    ];

    /// Latencies of successful requests, counts of failures and of sign-ins shed by a full
    /// password queue (503 with Retry-After: the answer the issuer gives by design under a
    /// flood, not an error), by class.
    #[derive(Default)]
    struct Record {
        ok: BTreeMap<&'static str, Vec<Duration>>,
        errors: BTreeMap<&'static str, BTreeMap<String, usize>>,
        shed: BTreeMap<&'static str, usize>,
    }

    impl Record {
        fn merge(&mut self, other: Record) {
            for (k, n) in other.shed {
                *self.shed.entry(k).or_default() += n;
            }
            for (k, v) in other.ok {
                self.ok.entry(k).or_default().extend(v);
            }
            for (k, v) in other.errors {
                let e = self.errors.entry(k).or_default();
                for (m, n) in v {
                    *e.entry(m).or_default() += n;
                }
            }
        }
        fn error(&mut self, class: &'static str, message: String) {
            let m: String = message.chars().take(100).collect();
            *self.errors.entry(class).or_default().entry(m).or_default() += 1;
        }
    }

    /// Whether an error is the issuer shedding a sign-in: 503 `temporarily_unavailable`
    /// because the password queue is full.
    fn is_shed(error: &str) -> bool {
        error.starts_with("HTTP 503") && error.contains("is busy")
    }

    /// A gRPC-web frame: flag, big-endian length, payload.
    fn frame(flag: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![flag];
        out.extend_from_slice(&u32::try_from(payload.len()).unwrap_or(0).to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    /// The `grpc-status` of a gRPC-web answer (header, or the trailer frame of the body).
    fn grpc_status(headers: &reqwest::header::HeaderMap, body: &[u8]) -> Option<String> {
        if let Some(v) = headers.get("grpc-status") {
            return v.to_str().ok().map(str::to_owned);
        }
        let mut rest = body;
        while rest.len() >= 5 {
            let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
            let payload = rest.get(5..5 + len)?;
            if rest[0] & 0x80 != 0 {
                let text = String::from_utf8_lossy(payload);
                return text
                    .lines()
                    .find_map(|l| l.strip_prefix("grpc-status:").map(|v| v.trim().to_owned()));
            }
            rest = &rest[5 + len..];
        }
        None
    }

    async fn get_ok(http: &reqwest::Client, url: String) -> Result<()> {
        let r = http.get(url).send().await?;
        let status = r.status();
        r.bytes().await?;
        anyhow::ensure!(status.is_success(), "HTTP {status}");
        Ok(())
    }

    /// What one request of a task needs that outlives the request.
    struct Task {
        class: &'static str,
        http: reqwest::Client,
        issuers: Arc<Vec<String>>,
        refresh_token: String,
        id_token: String,
        n: usize,
        source_base: usize,
    }

    impl Task {
        async fn once(&mut self, record: &mut Record) {
            let issuer = self.issuers[self.n % self.issuers.len()].clone();
            let from = source(self.source_base + self.n / PER_ADDRESS);
            self.n += 1;
            let t = Instant::now();
            let result = match self.class {
                "discovery" => get_ok(&self.http, format!("{issuer}/.well-known/openid-configuration")).await,
                "jwks" => get_ok(&self.http, format!("{issuer}/oidc/jwks")).await,
                "refresh" => self.refresh(&issuer, &from).await,
                "whoami (gRPC-web)" => self.whoami(&issuer).await,
                _ => {
                    let user = format!("bench-{}", self.n % 40);
                    sign_in_tokens(&self.http, &issuer, &user, PASSWORD, "ichor-kube", &from)
                        .await
                        .map(|_| ())
                }
            };
            match result {
                Ok(()) => record.ok.entry(self.class).or_default().push(t.elapsed()),
                Err(e) if is_shed(&e.to_string()) => *record.shed.entry(self.class).or_default() += 1,
                Err(e) => record.error(self.class, e.to_string()),
            }
        }

        async fn refresh(&mut self, issuer: &str, from: &str) -> Result<()> {
            let r = self
                .http
                .post(format!("{issuer}/oidc/token"))
                .header("x-forwarded-for", from)
                .form(&[
                    ("grant_type", "refresh_token"),
                    ("refresh_token", self.refresh_token.as_str()),
                    ("client_id", "ichor-cli"),
                ])
                .send()
                .await?;
            let status = r.status();
            let body = r.text().await?;
            anyhow::ensure!(status.is_success(), "HTTP {status}: {body}");
            let v: serde_json::Value = serde_json::from_str(&body)?;
            v["refresh_token"]
                .as_str()
                .context("no refresh_token")?
                .clone_into(&mut self.refresh_token);
            Ok(())
        }

        async fn whoami(&self, issuer: &str) -> Result<()> {
            let r = self
                .http
                .post(format!("{issuer}/ichor.v1alpha1.UserService/WhoAmI"))
                .header("content-type", "application/grpc-web+proto")
                .header("x-grpc-web", "1")
                .header("authorization", format!("Bearer {}", self.id_token))
                .body(frame(0, &[]))
                .send()
                .await?;
            let status = r.status();
            let headers = r.headers().clone();
            let body = r.bytes().await?;
            anyhow::ensure!(status.is_success(), "HTTP {status}");
            let grpc = grpc_status(&headers, &body);
            anyhow::ensure!(grpc.as_deref() == Some("0"), "grpc-status {grpc:?}");
            Ok(())
        }
    }

    /// Runs one paced task until `deadline`.
    async fn paced(mut task: Task, every: Duration, deadline: Instant) -> (Task, Record) {
        let mut record = Record::default();
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if Instant::now() >= deadline {
                break;
            }
            task.once(&mut record).await;
        }
        (task, record)
    }

    /// Sign-in attempts a second offered by one flood loop at most.
    const FLOOD_PER_LOOP: f64 = 5.0;

    /// Flood outcome counts: what the issuers answered to sign-ins attempted as fast as possible.
    async fn flood_loop(
        http: reqwest::Client,
        issuers: Arc<Vec<String>>,
        i: usize,
        deadline: Instant,
    ) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        let mut n = 0usize;
        // Each loop offers at most FLOOD_PER_LOOP attempts a second and never waits out a
        // Retry-After: 200 loops offer ~1,000 sign-ins/s, ~75 times what two argon2id permits
        // serve. Unpaced, loops answered at once (429, 503) would spin as fast as this process
        // can send, and the generator, not the issuers, would take the machine's two cores.
        let mut pace = tokio::time::interval(Duration::from_secs_f64(1.0 / FLOOD_PER_LOOP));
        pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while Instant::now() < deadline {
            pace.tick().await;
            let issuer = &issuers[(i + n) % issuers.len()];
            // A third of the loops guess passwords for ten users (the back-off's case); the rest
            // sign in correctly as users the paced workload does not use.
            let (user, password) = if i.is_multiple_of(3) {
                (format!("bench-{}", 90 + i % 10), "wrong password 0123456789")
            } else {
                (format!("bench-{}", 50 + i % 40), PASSWORD)
            };
            let from = source(3_000_000 + i * 10_000 + n / PER_ADDRESS);
            n += 1;
            let attempt = sign_in_tokens(&http, issuer, &user, password, "ichor-kube", &from);
            let Ok(result) = tokio::time::timeout_at(deadline.into(), attempt).await else {
                let kind = if i.is_multiple_of(3) {
                    "wrong password"
                } else {
                    "right password"
                };
                *out.entry(format!("{kind}: still waiting at the end of the phase"))
                    .or_default() += 1;
                break;
            };
            let key = match result {
                Ok(_) => "signed in".to_owned(),
                Err(e) => {
                    let e = e.to_string();
                    let code = e
                        .strip_prefix("HTTP ")
                        .and_then(|r| r.get(..3))
                        .unwrap_or("transport");
                    let kind = if i.is_multiple_of(3) {
                        "wrong password"
                    } else {
                        "right password"
                    };
                    format!("{kind}: HTTP {code}")
                }
            };
            *out.entry(key).or_default() += 1;
        }
        out
    }

    fn vm_hwm_mib(pid: u32) -> Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .map(|kib| kib / 1024)
            .context("no VmHWM")
    }

    fn cpu_seconds(pid: u32) -> Result<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        let after = stat.rsplit_once(')').context("stat")?.1;
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks: u64 = fields.get(11).context("utime")?.parse::<u64>()?
            + fields.get(12).context("stime")?.parse::<u64>()?;
        Ok(ticks as f64 / 100.0)
    }

    struct Phase {
        name: &'static str,
        seconds: f64,
        record: Record,
        hwm: Vec<u64>,
        cpu: Vec<f64>,
        flood: BTreeMap<String, usize>,
    }

    async fn phase(
        name: &'static str,
        tasks: Vec<Task>,
        duration: Duration,
        flood: usize,
        ca: &[u8],
        pids: &[u32],
    ) -> Result<(Vec<Task>, Phase)> {
        let issuers = Arc::clone(&tasks.first().context("no tasks")?.issuers);
        let cpu_before: Vec<f64> = pids.iter().map(|p| cpu_seconds(*p).unwrap_or(0.0)).collect();
        let deadline = Instant::now() + duration;
        let mut handles = Vec::new();
        for task in tasks {
            let &(_, rate, count) = CLASSES.iter().find(|c| c.0 == task.class).context("class")?;
            let every = Duration::from_secs_f64(count as f64 / rate);
            handles.push(tokio::spawn(paced(task, every, deadline)));
        }
        let mut floods = Vec::new();
        for i in 0..flood {
            let http = client(ca)?;
            floods.push(tokio::spawn(flood_loop(http, Arc::clone(&issuers), i, deadline)));
        }
        let mut tasks = Vec::new();
        let mut record = Record::default();
        for h in handles {
            let (task, r) = h.await?;
            tasks.push(task);
            record.merge(r);
        }
        let mut flood_counts = BTreeMap::new();
        for f in floods {
            for (k, v) in f.await? {
                *flood_counts.entry(k).or_default() += v;
            }
        }
        // Rates over the phase itself (a paced request in flight at the deadline still counts).
        let seconds = duration.as_secs_f64();
        for v in record.ok.values_mut() {
            v.sort();
        }
        let hwm = pids.iter().map(|p| vm_hwm_mib(*p).unwrap_or(0)).collect();
        let cpu = pids
            .iter()
            .zip(cpu_before)
            .map(|(p, before)| (cpu_seconds(*p).unwrap_or(0.0) - before) / seconds)
            .collect();
        Ok((
            tasks,
            Phase {
                name,
                seconds,
                record,
                hwm,
                cpu,
                flood: flood_counts,
            },
        ))
    }

    /// Signs in the paced tasks' users (refresh families and `ichor-ui` ID tokens) and runs
    /// the sustained phase, then the flood phase; prints the markdown report.
    pub async fn run(
        issuers: &[String],
        ca: &Path,
        pids: &[u32],
        duration: Duration,
        flood: usize,
    ) -> Result<()> {
        let ca = std::fs::read(ca)?;
        let issuers = Arc::new(issuers.to_vec());
        let mut tasks = Vec::new();
        let mut user = 0usize;
        for &(class, _, count) in CLASSES {
            for _ in 0..count {
                let http = client(&ca)?;
                let (mut refresh_token, mut id_token) = (String::new(), String::new());
                if class == "refresh" || class.starts_with("whoami") {
                    let name = format!("bench-{user}");
                    let issuer = &issuers[user % issuers.len()];
                    let tokens = sign_in_tokens(
                        &http,
                        issuer,
                        &name,
                        PASSWORD,
                        "ichor-ui",
                        &source(5_000_000 + user),
                    )
                    .await
                    .with_context(|| format!("sign in {name}"))?;
                    refresh_token = tokens["refresh_token"]
                        .as_str()
                        .context("no refresh_token")?
                        .to_owned();
                    id_token = tokens["id_token"].as_str().context("no id_token")?.to_owned();
                    user += 1;
                }
                tasks.push(Task {
                    class,
                    http,
                    issuers: Arc::clone(&issuers),
                    refresh_token,
                    id_token,
                    n: tasks.len(),
                    source_base: 6_000_000 + tasks.len() * 100_000,
                });
            }
        }
        eprintln!("mixed: sustained phase, {}s", duration.as_secs());
        let (tasks, sustained) = phase("sustained", tasks, duration, 0, &ca, pids).await?;
        eprintln!(
            "mixed: flood phase ({flood} sign-in loops), {}s",
            duration.as_secs()
        );
        let (_, flooded) = phase("flood", tasks, duration, flood, &ca, pids).await?;
        print!("{}", report(issuers.len(), &sustained, &flooded, flood));
        Ok(())
    }

    fn report(issuers: usize, sustained: &Phase, flooded: &Phase, flood: usize) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "## Per endpoint ({issuers} issuers, requests alternating; paced rates in all)\n"
        );
        let _ = writeln!(
            out,
            "| endpoint | target/s | phase | ok | errors | shed (503 busy) | req/s | p50 ms | p99 ms | p999 ms | max ms |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|");
        for &(class, rate, _) in CLASSES {
            for p in [sustained, flooded] {
                let empty = Vec::new();
                let ok = p.record.ok.get(class).unwrap_or(&empty);
                let errors: usize = p.record.errors.get(class).map_or(0, |e| e.values().sum());
                let shed = p.record.shed.get(class).copied().unwrap_or(0);
                let _ = writeln!(
                    out,
                    "| {class} | {rate} | {} | {} | {errors} | {shed} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
                    p.name,
                    ok.len(),
                    ok.len() as f64 / p.seconds,
                    ms(percentile(ok, 50.0)),
                    ms(percentile(ok, 99.0)),
                    ms(percentile(ok, 99.9)),
                    ms(ok.last().copied().unwrap_or_default()),
                );
            }
        }
        let _ = writeln!(
            out,
            "\n## p99 of the other endpoints, before vs during the login flood\n"
        );
        let _ = writeln!(out, "| endpoint | p99 sustained | p99 flood | ratio |");
        let _ = writeln!(out, "|---|---|---|---|");
        for &(class, _, _) in CLASSES.iter().filter(|c| !c.0.starts_with("sign-in")) {
            let empty = Vec::new();
            let p99 = |p: &Phase| ms(percentile(p.record.ok.get(class).unwrap_or(&empty), 99.0));
            let (before, during) = (p99(sustained), p99(flooded));
            let _ = writeln!(
                out,
                "| {class} | {before:.1} ms | {during:.1} ms | {:.1}x |",
                during / before.max(0.001)
            );
        }
        let _ = writeln!(out, "\n## Issuer processes\n");
        let _ = writeln!(
            out,
            "| issuer | VmHWM after sustained | VmHWM after flood | CPU sustained | CPU flood |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|");
        for i in 0..sustained.hwm.len() {
            let _ = writeln!(
                out,
                "| {} | {} MiB | {} MiB | {:.0} % | {:.0} % |",
                i + 1,
                sustained.hwm[i],
                flooded.hwm.get(i).copied().unwrap_or(0),
                100.0 * sustained.cpu[i],
                100.0 * flooded.cpu.get(i).copied().unwrap_or(0.0),
            );
        }
        let _ = writeln!(
            out,
            "\n## Flood outcomes ({flood} loops signing in as fast as answered, at most {FLOOD_PER_LOOP} attempts/s each, {:.1} s; a third with wrong passwords for ten users)\n",
            flooded.seconds
        );
        let _ = writeln!(out, "| outcome | count |");
        let _ = writeln!(out, "|---|---|");
        for (k, v) in &flooded.flood {
            let _ = writeln!(out, "| {k} | {v} |");
        }
        let mut errors = String::new();
        for p in [sustained, flooded] {
            for (class, e) in &p.record.errors {
                for (m, n) in e {
                    let _ = writeln!(errors, "{} {class} x{n}: {m}", p.name);
                }
            }
        }
        if !errors.is_empty() {
            let _ = writeln!(out, "\n## Errors of the paced workload\n\n```\n{errors}```");
        }
        out
    }
}

// === serve-memory ===

mod memory {
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
        async fn read_credentials(
            &self,
            name: &str,
        ) -> Result<(Option<CredentialsEntry>, Version), StoreError> {
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

    pub async fn run(dir: &Path, port: u16) -> Result<()> {
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
        )?;
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
}
