//! Load generator for `hack/bench/issuer.sh` (loopback only).
//!
//! - `setup --dir D --users N`: writes a test CA and leaf (`D/ca.crt`, `D/tls/`), `D/keys.json`
//!   (the controller's key timeline with a committed RSA-3072 test key), N `IchorUser` files
//!   (`bench-0` … ) and `D/state/credentials.json` with one argon2id hash for all of them.
//! - `refresh`: signs in `--clients` users (one refresh family each), then every client rotates
//!   its own family as fast as it can for `--seconds`; prints throughput and latency.
//! - `logins`: `--count` full sign-ins (authorize + password) started at once; prints timings.
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
        #[arg(long)]
        issuer: String,
        #[arg(long)]
        ca: PathBuf,
        #[arg(long, default_value_t = 64)]
        clients: usize,
        #[arg(long, default_value_t = 10)]
        seconds: u64,
    },
    /// Serves the issuer in this process on an in-memory store (until killed).
    ServeMemory {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        port: u16,
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
        Command::ServeMemory { dir, port } => memory::run(&dir, port).await,
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
            ])
            .header("accept", "application/json")
            .header("x-forwarded-for", from),
    )
    .await?;
    let login = json_ok(
        http.post(format!("{issuer}/oidc/login"))
            .header("x-forwarded-for", from)
            .json(&serde_json::json!({"ticket": ticket["ticket"], "username": user, "password": PASSWORD})),
    )
    .await?;
    let redirect = url::Url::parse(login["redirect_uri"].as_str().context("no redirect_uri")?)?;
    let code = redirect
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .context("no code")?;
    let tokens = json_ok(
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
    .await?;
    Ok(tokens["refresh_token"]
        .as_str()
        .context("no refresh_token")?
        .to_owned())
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

async fn refresh(issuer: &str, ca: &Path, clients: usize, duration: Duration) -> Result<()> {
    let ca = std::fs::read(ca)?;
    // Families up front: the sign-ins are argon2-bound (two at a time), so four at once suffice.
    let started = Instant::now();
    let limit = Arc::new(tokio::sync::Semaphore::new(4));
    let mut setups = Vec::new();
    for i in 0..clients {
        let http = client(&ca)?;
        let (issuer, limit) = (issuer.to_owned(), Arc::clone(&limit));
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
        let issuer = issuer.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            let mut n = 0usize;
            while Instant::now() < deadline {
                let from = source(i * 100_000 + n / PER_ADDRESS);
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
        "refresh clients={clients} seconds={:.1} ok={} errors={errors} rps={:.1} p50_ms={:.1} p99_ms={:.1} max_ms={:.1}",
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

async fn logins(issuer: &str, ca: &Path, count: usize) -> Result<()> {
    let ca = std::fs::read(ca)?;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..count {
        let http = client(&ca)?;
        let issuer = issuer.to_owned();
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            let r = sign_in(&http, &issuer, &format!("bench-{i}"), &source(2_000_000 + i)).await;
            (t.elapsed(), r.err().map(|e| e.to_string()))
        }));
    }
    let mut times = Vec::new();
    let mut errors = std::collections::BTreeMap::<String, usize>::new();
    for t in tasks {
        let (d, e) = t.await?;
        match e {
            None => times.push(d),
            Some(e) => *errors.entry(e.chars().take(160).collect()).or_default() += 1,
        }
    }
    times.sort();
    println!(
        "logins count={count} ok={} wall_s={:.2} p50_ms={:.0} max_ms={:.0}",
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

// === serve-memory ===

mod memory {
    use anyhow::{Context as _, Result};
    use async_trait::async_trait;
    use ichor_issuer::{
        keys::{KeyRing, LoadedKeys},
        oidc::{Issuer, IssuerConfig, Settings, TrustedProxies},
        server::{
            ServeOptions,
            reload::WatchOptions,
            serve,
            tls::{PairFiles, server_config, watch_pair},
        },
        store::{StoreError, StoredUser, UserStore, Version},
    };
    use ichor_renderers::{
        auth::credentials::CredentialsEntry,
        crd::{GoDuration, UsersSettings},
        trust::KeysDocument,
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
