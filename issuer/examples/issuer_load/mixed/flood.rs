//! The login flood of the mixed workload's second phase: loops signing in as fast as they are
//! answered (a third with wrong passwords), counting what the issuers answered.

use crate::client::{PASSWORD, PER_ADDRESS, sign_in_tokens, source};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Sign-in attempts a second offered by one flood loop at most.
pub(crate) const FLOOD_PER_LOOP: f64 = 5.0;

/// Flood outcome counts: what the issuers answered to sign-ins attempted as fast as possible.
pub(crate) async fn flood_loop(
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
        let attempt = sign_in_tokens(
            &http,
            issuer,
            &user,
            password,
            ichor_renderers::contract::KUBE_AUDIENCE,
            &from,
        );
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
