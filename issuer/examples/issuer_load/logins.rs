//! `logins`: a flood of concurrent full sign-ins, each waiting out "busy" answers as a person
//! would; prints one `logins …` line (and one line per kind of error) for `hack/bench/*.sh`.

use crate::client::{client, sign_in, source};
use crate::stats::{ms, percentile};
use anyhow::Result;
use std::path::Path;
use std::time::{Duration, Instant};

/// The seconds a 503 "busy" answer asks to wait ("… try again in N seconds"), 1 if it names none.
fn retry_after(error: &str) -> u64 {
    error
        .split("try again in ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

pub(crate) async fn logins(issuer: &str, ca: &Path, count: usize) -> Result<()> {
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
