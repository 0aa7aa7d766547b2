//! `refresh`: refresh-grant throughput and latency. Signs in one refresh family per client (or
//! deals every seeded family to the clients), then every client rotates its own families in turn
//! as fast as it is answered; prints one `refresh …` line
//! (and one line per kind of error) for `hack/bench/*.sh` to parse.

use crate::client::{client, sign_in, source};
use crate::stats::{ms, percentile};
use anyhow::Context as _;
use anyhow::Result;
use ichor_issuer::{keys::LoadedKeys, tokens::sign_refresh};
use ichor_renderers::{auth::credentials::CredentialsEntry, trust::KeysDocument};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Default)]
struct Tally {
    ok: Vec<Duration>,
    errors: std::collections::BTreeMap<String, usize>,
}

pub(crate) async fn refresh(
    issuers: &[String],
    ca: &Path,
    clients: usize,
    duration: Duration,
    seeded: Option<&Path>,
) -> Result<()> {
    let ca = std::fs::read(ca)?;
    let families = match seeded {
        Some(dir) => seeded_families(dir, &issuers[0], clients)?
            .into_iter()
            .map(|tokens| Ok((client(&ca)?, tokens)))
            .collect::<Result<Vec<_>>>()?,
        None => sign_in_families(issuers, &ca, clients)
            .await?
            .into_iter()
            .map(|(http, token)| (http, vec![token]))
            .collect(),
    };
    rotate(issuers, clients, duration, families).await
}

/// The refresh tokens of every family `setup --families` seeded in `dir`, dealt to the clients in
/// turn (family j of all to client j mod clients), minted as the token endpoint would with
/// `dir`'s keys. A client rotates its families one after another, as a gateway for many people
/// would, so no family is refreshed faster than a real session could need.
fn seeded_families(dir: &Path, iss: &str, clients: usize) -> Result<Vec<Vec<String>>> {
    let doc = KeysDocument::parse(&std::fs::read(dir.join("keys.json"))?)?;
    let keys = LoadedKeys::from_document(&doc)?;
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("state/credentials.json"))?)?;
    let entries = state["entries"]
        .as_object()
        .context("credentials.json has no entries")?;
    let now = jiff::Timestamp::now();
    let mut dealt = vec![Vec::new(); clients];
    let mut j = 0;
    for (sub, raw) in entries {
        let entry = CredentialsEntry::parse(sub, raw.to_string().as_bytes())?;
        for (fam, family) in &entry.families {
            dealt[j % clients].push(sign_refresh(&keys, iss, sub, fam, family, now)?);
            j += 1;
        }
    }
    anyhow::ensure!(
        j >= clients,
        "{clients} clients need as many seeded families; setup wrote {j}"
    );
    Ok(dealt)
}

async fn sign_in_families(
    issuers: &[String],
    ca: &[u8],
    clients: usize,
) -> Result<Vec<(reqwest::Client, String)>> {
    // Families up front: the sign-ins are argon2-bound (two at a time), so four at once suffice.
    let started = Instant::now();
    let limit = Arc::new(tokio::sync::Semaphore::new(4));
    let mut setups = Vec::new();
    for i in 0..clients {
        let http = client(ca)?;
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
    Ok(families)
}

async fn rotate(
    issuers: &[String],
    clients: usize,
    duration: Duration,
    families: Vec<(reqwest::Client, Vec<String>)>,
) -> Result<()> {
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::new();
    for (i, (http, mut tokens)) in families.into_iter().enumerate() {
        let issuers = issuers.to_vec();
        tasks.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            let mut n = 0usize;
            while Instant::now() < deadline {
                // A new source address on every request: many people, not one client.
                let from = source(i * 100_000 + n);
                let issuer = &issuers[(i + n) % issuers.len()];
                let turn = n % tokens.len();
                n += 1;
                let t = Instant::now();
                let reply = http
                    .post(format!("{issuer}/oidc/token"))
                    .header("x-forwarded-for", from)
                    .form(&[
                        ("grant_type", "refresh_token"),
                        ("refresh_token", tokens[turn].as_str()),
                        ("client_id", ichor_renderers::contract::CLI_CLIENT_ID),
                    ])
                    .send()
                    .await;
                match reply {
                    Ok(r) if r.status().is_success() => match r.json::<serde_json::Value>().await {
                        Ok(v) => match v["refresh_token"].as_str() {
                            Some(next) => {
                                tally.ok.push(t.elapsed());
                                next.clone_into(&mut tokens[turn]);
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
                            // The family is gone (invalid_grant): the client rotates the others.
                            tokens.swap_remove(turn);
                            if tokens.is_empty() {
                                break;
                            }
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
