//! The sign-in time of an unknown user is the time of a wrong password for a known one: both
//! cost one argon2id verification. Its own test binary, so no other test of this crate competes
//! for the CPU.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use crate::common::*;
use axum::http::StatusCode;
use jiff::SignedDuration;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

async fn timed(h: &Harness, user: &str) -> Duration {
    // Fresh time and ticket so neither the back-off nor the source bucket interferes.
    h.clock.advance(SignedDuration::from_hours(2));
    let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let t = Instant::now();
    let reply = h.login(&ticket, user, "wrong password here").await;
    let elapsed = t.elapsed();
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    elapsed
}

/// One measurement: the ratio of the medians over 11 interleaved pairs, in alternating order.
async fn ratio(h: &Harness, round: usize) -> f64 {
    let (mut unknown, mut wrong) = (Vec::new(), Vec::new());
    for i in 0..11 {
        let known = if i % 2 == 0 { "alice" } else { "carol" };
        let stranger = format!("nobody-{round}-{i}");
        if i % 2 == 0 {
            unknown.push(timed(h, &stranger).await);
            wrong.push(timed(h, known).await);
        } else {
            wrong.push(timed(h, known).await);
            unknown.push(timed(h, &stranger).await);
        }
    }
    let (u, w) = (median(unknown), median(wrong));
    let ratio = u.as_secs_f64() / w.as_secs_f64();
    eprintln!("median sign-in: unknown user {u:?}, wrong password {w:?}, ratio {ratio:.3}");
    ratio
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_user_costs_the_same_as_a_wrong_password_within_ten_percent() {
    let h = Harness::new();
    let _ = timed(&h, "nobody-warmup").await;
    // The build machine is shared: load from other processes only widens the gap, so a real
    // difference fails every round while noise rarely survives three.
    let mut ratios = Vec::new();
    for round in 0..3 {
        let r = ratio(&h, round).await;
        if (0.9..=1.1).contains(&r) {
            return;
        }
        ratios.push(r);
    }
    panic!("unknown-user / wrong-password time ratios {ratios:?} are all outside 0.9..=1.1");
}
