//! `sign-ins`: full sign-ins of distinct users started at a steady pace, each timed from the
//! authorize request to the token response; with `--factor` each answers the second step with
//! its authenticator code. Prints one `sign-ins …` line (and one line per kind of error) for
//! `hack/bench/second-factor.sh`.
//!
//! Every sign-in takes the next user, so no authenticator code is ever used twice (a code is
//! accepted once per user and step) and no user's back-off or queue is shared between two of
//! them: what is measured is the sign-in itself at a load the argon2id permits serve.

use crate::client::{client, sign_in_with_factor, source};
use crate::setup::TOTP_SECRET;
use crate::stats::{ms, percentile};
use anyhow::{Result, ensure};
use std::path::Path;
use std::time::{Duration, Instant};

/// The first forwarded address of this load (apart from the other loads').
const FIRST_SOURCE: usize = 3_000_000;

/// How the sign-ins are paced.
pub(crate) struct Pace {
    /// The first `bench-<n>` user signed in.
    pub(crate) first_user: usize,
    /// Sign-ins started per second.
    pub(crate) rate: u32,
    /// How long sign-ins are started for.
    pub(crate) duration: Duration,
}

pub(crate) async fn run(issuer: &str, ca: &Path, pace: Pace, factor: bool) -> Result<()> {
    ensure!(pace.rate > 0, "--rate must be at least 1");
    let ca = std::fs::read(ca)?;
    let http = client(&ca)?;
    let count = (pace.duration.as_secs_f64() * f64::from(pace.rate)).round() as usize;
    let interval = Duration::from_secs_f64(1.0 / f64::from(pace.rate));
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(count);
    for k in 0..count {
        tokio::time::sleep_until((start + interval * k as u32).into()).await;
        let (http, issuer) = (http.clone(), issuer.to_owned());
        let user = format!("bench-{}", pace.first_user + k);
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            let secret = factor.then_some(TOTP_SECRET);
            let r = sign_in_with_factor(&http, &issuer, &user, secret, &source(FIRST_SOURCE + k)).await;
            (t.elapsed(), r.err().map(|e| e.to_string()))
        }));
    }
    let mut times = Vec::with_capacity(count);
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
        "sign-ins factor={factor} rate={} count={count} ok={} p50_ms={:.0} p99_ms={:.0} max_ms={:.0}",
        pace.rate,
        times.len(),
        ms(percentile(&times, 50.0)),
        ms(percentile(&times, 99.0)),
        ms(times.last().copied().unwrap_or_default()),
    );
    for (k, v) in &errors {
        println!("sign-ins error x{v}: {k}");
    }
    Ok(())
}
