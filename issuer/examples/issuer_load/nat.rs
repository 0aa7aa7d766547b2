//! `nat`: many people behind one address. Every request carries the same forwarded address:
//! `--users` users sign in (one refresh family each), then every family refreshes once per
//! `--period` seconds (staggered) for `--seconds`; then the same address sends garbage refresh
//! tokens and wrong passwords. Prints a markdown report: valid refreshes answered and refused
//! (the claim: none refused), their p50/p99, and how many garbage tokens and wrong passwords were
//! answered before the address was slowed down.

use crate::client::{PASSWORD, client, sign_in, ticket};
use crate::stats::{ms, percentile};
use anyhow::{Result, bail};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The one address of the office (a documentation address).
const OFFICE: &str = "203.0.113.50";

/// What the flags ask for.
pub(crate) struct Nat {
    pub(crate) users: usize,
    pub(crate) period: Duration,
    pub(crate) duration: Duration,
    pub(crate) garbage: usize,
    pub(crate) wrong_passwords: usize,
}

#[derive(Default)]
struct Tally {
    ok: Vec<Duration>,
    refused: usize,
    errors: BTreeMap<String, usize>,
}

async fn refresh_once(http: &reqwest::Client, issuer: &str, token: &str) -> Result<(u16, serde_json::Value)> {
    let reply = http
        .post(format!("{issuer}/oidc/token"))
        .header("x-forwarded-for", OFFICE)
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", token),
            ("client_id", ichor_renderers::contract::CLI_CLIENT_ID),
        ])
        .send()
        .await?;
    let status = reply.status().as_u16();
    let body = reply.text().await?;
    Ok((
        status,
        serde_json::from_str(&body).unwrap_or(serde_json::Value::Null),
    ))
}

/// One family refreshing once per `period`, starting after `offset`, until `deadline`.
async fn family(
    http: reqwest::Client,
    issuer: String,
    mut token: String,
    offset: Duration,
    period: Duration,
    deadline: Instant,
) -> Tally {
    let mut tally = Tally::default();
    let mut next = Instant::now() + offset;
    while next < deadline {
        tokio::time::sleep_until(next.into()).await;
        next += period;
        let t = Instant::now();
        match refresh_once(&http, &issuer, &token).await {
            Ok((200, v)) => match v["refresh_token"].as_str() {
                Some(fresh) => {
                    tally.ok.push(t.elapsed());
                    token = fresh.to_owned();
                }
                None => {
                    *tally
                        .errors
                        .entry("200 without refresh_token".into())
                        .or_default() += 1
                }
            },
            Ok((429, _)) => tally.refused += 1,
            Ok((status, v)) => {
                *tally
                    .errors
                    .entry(format!("HTTP {status}: {}", v["error"]))
                    .or_default() += 1;
                if status == 400 {
                    break;
                }
            }
            Err(e) => *tally.errors.entry(format!("transport: {e}")).or_default() += 1,
        }
    }
    tally
}

/// Statuses of `n` requests made one after the other by `send`, counted.
async fn statuses<F, Fut>(n: usize, mut send: F) -> Result<BTreeMap<u16, usize>>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Result<u16>>,
{
    let mut counts = BTreeMap::new();
    for i in 0..n {
        *counts.entry(send(i).await?).or_default() += 1;
    }
    Ok(counts)
}

fn count_line(counts: &BTreeMap<u16, usize>) -> String {
    counts
        .iter()
        .map(|(status, n)| format!("{n} × {status}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) async fn run(issuer: &str, ca: &Path, nat: Nat) -> Result<()> {
    let ca = std::fs::read(ca)?;
    let started = Instant::now();
    // Sign-ins are argon2-bound (two at a time): four in flight keep the permits busy.
    let limit = Arc::new(tokio::sync::Semaphore::new(4));
    let mut setups = Vec::new();
    for i in 0..nat.users {
        let http = client(&ca)?;
        let (issuer, limit) = (issuer.to_owned(), Arc::clone(&limit));
        setups.push(tokio::spawn(async move {
            let _permit = limit.acquire().await?;
            let token = sign_in(&http, &issuer, &format!("bench-{i}"), OFFICE).await?;
            anyhow::Ok((http, token))
        }));
    }
    let mut families = Vec::new();
    for s in setups {
        families.push(s.await??);
    }
    let signed_in = started.elapsed();
    eprintln!(
        "nat: {} users signed in from {OFFICE} in {:.1}s",
        nat.users,
        signed_in.as_secs_f64()
    );

    let start = Instant::now();
    let deadline = start + nat.duration;
    let step = nat.period.as_secs_f64() / nat.users as f64;
    let tasks: Vec<_> = families
        .into_iter()
        .enumerate()
        .map(|(i, (http, token))| {
            let offset = Duration::from_secs_f64(step * i as f64);
            tokio::spawn(family(
                http,
                issuer.to_owned(),
                token,
                offset,
                nat.period,
                deadline,
            ))
        })
        .collect();
    let mut all = Tally::default();
    for t in tasks {
        let t = t.await?;
        all.ok.extend(t.ok);
        all.refused += t.refused;
        for (k, v) in t.errors {
            *all.errors.entry(k).or_default() += v;
        }
    }
    let elapsed = start.elapsed();
    all.ok.sort();

    let http = client(&ca)?;
    let http = &http;
    let garbage = statuses(nat.garbage, move |n| async move {
        Ok(refresh_once(http, issuer, &format!("garbage.{n}.token")).await?.0)
    })
    .await?;
    let ticket = ticket(http, issuer, ichor_renderers::contract::KUBE_AUDIENCE, OFFICE).await?;
    let ticket = ticket.as_str();
    let wrong = statuses(nat.wrong_passwords, move |n| async move {
        let reply = http
            .post(format!("{issuer}/oidc/login"))
            .header("x-forwarded-for", OFFICE)
            .json(&serde_json::json!({
                "ticket": ticket,
                "username": format!("guess-{n}"),
                "password": format!("not {PASSWORD}"),
            }))
            .send()
            .await?;
        Ok(reply.status().as_u16())
    })
    .await?;
    if all.ok.is_empty() {
        bail!("no refresh succeeded: {:?}", all.errors);
    }

    let errors: usize = all.errors.values().sum();
    println!(
        "{} users behind {OFFICE} signed in (one argon2id each, 4 at a time) in {:.1} s, none refused.",
        nat.users,
        signed_in.as_secs_f64()
    );
    println!();
    println!("| phase | requests | answered | refused (429) | other errors | p50 | p99 | rate |");
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| valid refreshes, each family every {} s for {:.0} s | {} | {} | **{}** | {errors} | {:.1} ms | {:.1} ms | {:.1}/s |",
        nat.period.as_secs(),
        elapsed.as_secs_f64(),
        all.ok.len() + all.refused + errors,
        all.ok.len(),
        all.refused,
        ms(percentile(&all.ok, 50.0)),
        ms(percentile(&all.ok, 99.0)),
        all.ok.len() as f64 / elapsed.as_secs_f64(),
    );
    let answered = |c: &BTreeMap<u16, usize>| {
        c.iter()
            .filter(|(s, _)| **s != 429)
            .map(|(_, n)| n)
            .sum::<usize>()
    };
    let refused = |c: &BTreeMap<u16, usize>| c.get(&429).copied().unwrap_or(0);
    println!(
        "| garbage refresh tokens, back to back | {} | {} | {} | – | – | – | – |",
        nat.garbage,
        answered(&garbage),
        refused(&garbage)
    );
    println!(
        "| wrong passwords (distinct names), back to back | {} | {} | {} | – | – | – | – |",
        nat.wrong_passwords,
        answered(&wrong),
        refused(&wrong)
    );
    println!();
    println!(
        "Statuses: garbage {}; wrong passwords {}.",
        count_line(&garbage),
        count_line(&wrong)
    );
    for (k, v) in &all.errors {
        println!("refresh error x{v}: {k}");
    }
    println!(
        "nat refused_valid={} garbage_refused={}",
        all.refused,
        refused(&garbage)
    );
    Ok(())
}
