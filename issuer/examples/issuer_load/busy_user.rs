//! `busy-user`: one user with many sessions beside as many users with one session each, in the
//! same run. Signs in `--sessions` users once each, and one more user `--sessions` times; then
//! each load in turn has every session rotate its own family as fast as it is answered for
//! `--seconds`, retrying at once with the same token on a 503. After each load every session's
//! last token is presented once more: a session whose token no longer works is lost. Prints a
//! markdown table for `hack/bench/user-queue.sh`.

use crate::client::{PER_ADDRESS, client, sign_in, source};
use crate::stats::{ms, percentile};
use anyhow::Result;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the sessions of one load saw.
#[derive(Default)]
struct Outcome {
    ok: Vec<Duration>,
    unavailable: usize,
    other: std::collections::BTreeMap<String, usize>,
    lost: usize,
    elapsed: Duration,
}

/// One refresh: the successor token, or the status and body of the refusal.
async fn refresh_once(
    http: &reqwest::Client,
    issuer: &str,
    token: &str,
    from: &str,
) -> Result<String, (u16, String)> {
    let reply = http
        .post(format!("{issuer}/oidc/token"))
        .header("x-forwarded-for", from)
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", token),
            ("client_id", ichor_renderers::contract::CLI_CLIENT_ID),
        ])
        .send()
        .await
        .map_err(|e| (0, format!("transport: {e}")))?;
    let status = reply.status().as_u16();
    let body = reply.text().await.map_err(|e| (0, format!("body: {e}")))?;
    if status != 200 {
        return Err((status, body.chars().take(120).collect()));
    }
    let value: serde_json::Value = serde_json::from_str(&body).map_err(|e| (status, e.to_string()))?;
    value["refresh_token"]
        .as_str()
        .map(str::to_owned)
        .ok_or((status, "no refresh_token".to_owned()))
}

/// Signs in one session per name in `users` (four at a time: argon2 serves two).
async fn sessions(issuers: &[String], ca: &[u8], users: Vec<String>, from: usize) -> Result<Vec<String>> {
    let limit = Arc::new(tokio::sync::Semaphore::new(4));
    let mut setups = Vec::new();
    for (i, user) in users.into_iter().enumerate() {
        let http = client(ca)?;
        let (issuer, limit) = (issuers[i % issuers.len()].clone(), Arc::clone(&limit));
        setups.push(tokio::spawn(async move {
            let _permit = limit.acquire().await?;
            sign_in(&http, &issuer, &user, &source(from + i)).await
        }));
    }
    let mut tokens = Vec::new();
    for s in setups {
        tokens.push(s.await??);
    }
    Ok(tokens)
}

/// Every session rotates flat out until the deadline, then presents its last token once more.
async fn load(
    issuers: &[String],
    ca: &[u8],
    tokens: Vec<String>,
    base: usize,
    duration: Duration,
) -> Result<Outcome> {
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::new();
    for (i, mut token) in tokens.into_iter().enumerate() {
        let (http, issuers) = (client(ca)?, issuers.to_vec());
        tasks.push(tokio::spawn(async move {
            let mut seen = Outcome::default();
            let mut n = 0usize;
            while Instant::now() < deadline {
                let from = source(base + i * 100_000 + n / PER_ADDRESS);
                let issuer = &issuers[(i + n) % issuers.len()];
                n += 1;
                let t = Instant::now();
                match refresh_once(&http, issuer, &token, &from).await {
                    Ok(next) => {
                        seen.ok.push(t.elapsed());
                        token = next;
                    }
                    Err((503, _)) => seen.unavailable += 1,
                    Err((status, body)) => {
                        *seen.other.entry(format!("HTTP {status}: {body}")).or_default() += 1;
                        if status == 400 {
                            break;
                        }
                    }
                }
            }
            seen.elapsed = start.elapsed();
            let from = source(base + i * 100_000 + 99_999);
            let mut last = refresh_once(&http, &issuers[0], &token, &from).await;
            while let Err((503, _)) = last {
                last = refresh_once(&http, &issuers[0], &token, &from).await;
            }
            seen.lost = usize::from(last.is_err());
            seen
        }));
    }
    let mut all = Outcome::default();
    for task in tasks {
        let seen = task.await?;
        all.ok.extend(seen.ok);
        all.unavailable += seen.unavailable;
        all.lost += seen.lost;
        all.elapsed = all.elapsed.max(seen.elapsed);
        for (k, v) in seen.other {
            *all.other.entry(k).or_default() += v;
        }
    }
    all.ok.sort();
    Ok(all)
}

fn rate(o: &Outcome) -> f64 {
    o.ok.len() as f64 / o.elapsed.as_secs_f64()
}

fn row(name: &str, o: &Outcome) -> String {
    let other: usize = o.other.values().sum();
    format!(
        "| {name} | {:.1} | {} | {} | {other} | {:.1} ms | {:.1} ms | {} |",
        rate(o),
        o.ok.len(),
        o.unavailable,
        ms(percentile(&o.ok, 50.0)),
        ms(percentile(&o.ok, 99.0)),
        o.lost,
    )
}

/// Runs both loads on the users `bench-<first>` … (`sessions` users with one session each, then
/// `bench-<first + sessions>` with `sessions` sessions) and prints the table.
pub(crate) async fn run(
    issuers: &[String],
    ca: &Path,
    sessions_n: usize,
    first: usize,
    duration: Duration,
) -> Result<()> {
    let ca = std::fs::read(ca)?;
    let many_users: Vec<String> = (first..first + sessions_n)
        .map(|i| format!("bench-{i}"))
        .collect();
    let busy = format!("bench-{}", first + sessions_n);
    let started = Instant::now();
    let spread = sessions(issuers, &ca, many_users, 2_000_000 + first * 1000).await?;
    let one = sessions(
        issuers,
        &ca,
        vec![busy.clone(); sessions_n],
        3_000_000 + first * 1000,
    )
    .await?;
    eprintln!(
        "busy-user: {} sessions signed in in {:.1}s",
        2 * sessions_n,
        started.elapsed().as_secs_f64()
    );
    let spread = load(issuers, &ca, spread, 4_000_000, duration).await?;
    let one = load(issuers, &ca, one, 8_000_000, duration).await?;
    println!(
        "| load ({} issuer process{}) | grants/s | grants | 503 answers | other errors | p50 | p99 | sessions lost |",
        issuers.len(),
        if issuers.len() == 1 { "" } else { "es" }
    );
    println!("|---|---|---|---|---|---|---|---|");
    println!("{}", row(&format!("{sessions_n} users x 1 session"), &spread));
    println!(
        "{}",
        row(&format!("1 user ({busy}) x {sessions_n} sessions"), &one)
    );
    println!();
    println!(
        "busy-user ratio={:.2} (1 user x {sessions_n} sessions against {sessions_n} users x 1 session, grants/s)",
        rate(&one) / rate(&spread)
    );
    for (name, o) in [("spread", &spread), ("one user", &one)] {
        for (k, v) in &o.other {
            println!("busy-user {name} error x{v}: {k}");
        }
    }
    Ok(())
}
