//! Filling the cluster's etcd through one account: every refresh rotation and every code that
//! starts a session writes the user's credentials, on Kubernetes a put of the user's Secret (up to
//! 16 KiB at the 32-session cap) into etcd, whose history until the next compaction counts
//! against its quota (past it the whole cluster is read-only). Mallory, signed in 32 times,
//! rotates every session as fast as the family ceiling lets her (20 a second each): before, that
//! was 640 writes a second per replica, bounded only by the store's round trip. Now her write
//! budget (40 at once, then one a second per replica), which the codes that start sessions share,
//! holds her, answered `429 slow_down` with `Retry-After` past
//! it, while Carol's refreshes go on; a presentation that writes nothing (the grace window, an
//! old family's token) spends nothing.

use std::sync::atomic::Ordering;

use crate::common::*;
use axum::http::{StatusCode, header};
use ichor_issuer::{oidc::request::s256_challenge, tokens};
use jiff::SignedDuration;

/// The burst and the refill per second of a user's write budget.
const USER_BURST: u64 = 40;
/// The sessions Mallory holds (the cap of refresh families per user).
const SESSIONS: usize = 32;
/// Simulated seconds of the flood.
const SECONDS: u64 = 10;
/// Grants Mallory attempts per session and simulated second (the family ceiling's 20, so her
/// family buckets never refuse her and only the user's budget can).
const PER_SESSION: usize = 20;

/// Mallory's entry holding `SESSIONS` families `m-0` … of `ichor-cli`, and their tokens (family
/// ids are random in a real issuer; these differ from the other users' `fam-<i>`).
fn mallory(h: &Harness) -> Vec<String> {
    let mut entry = cli_family_entry(
        &password_hash(),
        start() - SignedDuration::from_hours(24),
        "m-0",
        start(),
    );
    for i in 1..SESSIONS {
        entry = entry
            .start_family(
                &format!("m-{i}"),
                "ichor-cli",
                "ichor-kube",
                start(),
                SignedDuration::from_hours(12),
            )
            .expect("family");
    }
    h.store.add_user("mallory", &["viewer"], Some(entry.clone()));
    (0..SESSIONS)
        .map(|i| {
            let fam = format!("m-{i}");
            h.mint_refresh("mallory", &fam, entry.family(&fam).expect("family"))
        })
        .collect()
}

/// The refresh token in a 200 answer.
fn rotated(reply: &Reply) -> String {
    reply.json()["refresh_token"]
        .as_str()
        .expect("refresh_token")
        .to_owned()
}

#[tokio::test]
async fn one_account_rotating_every_session_flat_out_is_held_to_its_write_budget() {
    let h = Harness::new();
    let mut sessions = mallory(&h);
    let carol = users_with_one_family(&h, 1, |_| "carol".to_owned());
    let mut carol = carol[0].clone();

    let (mut granted, mut held) = (0u64, 0u64);
    for second in 0..SECONDS {
        for _ in 0..PER_SESSION {
            for token in &mut sessions {
                let reply = h.refresh(token, "ichor-cli", None).await;
                match reply.status {
                    StatusCode::OK => {
                        *token = rotated(&reply);
                        granted += 1;
                    }
                    StatusCode::TOO_MANY_REQUESTS => {
                        assert_eq!(reply.error(), "slow_down", "second {second}");
                        assert!(
                            reply.headers.contains_key(header::RETRY_AFTER),
                            "second {second}: no Retry-After"
                        );
                        held += 1;
                    }
                    other => panic!("second {second}: {other} {}", reply.text()),
                }
            }
        }
        // Carol refreshes in the middle of the flood, every second.
        let reply = h.refresh(&carol, "ichor-cli", None).await;
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "Carol at second {second}: {}",
            reply.text()
        );
        carol = rotated(&reply);
        h.clock.advance(SignedDuration::from_secs(1));
    }

    // One burst, then one a second: without the budget every attempt (6,400) was a write.
    let budget = USER_BURST + SECONDS;
    assert!(
        granted <= budget,
        "{granted} rotations of Mallory's sessions in {SECONDS} s; her budget is {budget}"
    );
    assert!(granted >= USER_BURST, "the burst was not granted: {granted}");
    assert_eq!(granted + held, SECONDS * (PER_SESSION * SESSIONS) as u64);
    assert_eq!(
        h.store.writes.load(Ordering::SeqCst),
        granted + SECONDS,
        "only Mallory's granted rotations and Carol's wrote"
    );
    assert!(
        h.metrics().contains(r#"reason="user_writes""#),
        "the refusals are counted"
    );
}

#[tokio::test]
async fn presentations_that_write_nothing_spend_no_budget() {
    let h = Harness::new();
    let sessions = mallory(&h);
    // Rotate one session once; its old token then lands in the grace window, answered with the
    // same tokens and nothing written.
    let reply = h.refresh(&sessions[0], "ichor-cli", None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let writes = h.store.writes.load(Ordering::SeqCst);
    // Within the family's ceiling: 19 more presentations of the old token this second, and 20 a
    // second after, for three seconds: more than the user's whole budget.
    for second in 0..3 {
        let presentations = if second == 0 { 19 } else { 20 };
        for _ in 0..presentations {
            let again = h.refresh(&sessions[0], "ichor-cli", None).await;
            assert_eq!(again.status, StatusCode::OK, "second {second}: {}", again.text());
        }
        h.clock.advance(SignedDuration::from_secs(1));
    }
    assert_eq!(
        h.store.writes.load(Ordering::SeqCst),
        writes,
        "the grace window wrote"
    );
    // Old tokens of families long gone: one read each, nothing written, nothing spent.
    let family = h
        .store
        .entry("mallory")
        .expect("entry")
        .family("m-1")
        .expect("family")
        .clone();
    for i in 0..USER_BURST {
        let old = h.mint_refresh("mallory", &format!("fam-gone-{i}"), &family);
        let refused = h.refresh(&old, "ichor-cli", None).await;
        assert_eq!(refused.error(), "invalid_grant", "{}", refused.text());
    }
    // The whole burst is still there: every other session rotates at once.
    for token in &sessions[1..] {
        let reply = h.refresh(token, "ichor-cli", None).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    }
}

#[tokio::test]
async fn codes_that_start_sessions_share_the_budget_and_one_held_back_is_redeemed_later() {
    let h = Harness::new();
    let sessions = mallory(&h);
    // Her sessions spend the burst.
    for token in &sessions {
        let reply = h.refresh(token, "ichor-cli", None).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    }
    let now = h.clock.now_ts();
    let code = |jti: &str| {
        let claims = tokens::CodeClaims {
            iss: ISSUER.to_owned(),
            jti: jti.to_owned(),
            client_id: "ichor-cli".to_owned(),
            redirect_uri: CLI_REDIRECT.to_owned(),
            sub: "mallory".to_owned(),
            nonce: "n".to_owned(),
            code_challenge: s256_challenge(VERIFIER),
            offline_access: true,
            audience: "ichor-kube".to_owned(),
            amr: Vec::new(),
            iat: now.as_second(),
            exp: now.as_second() + 60,
        };
        tokens::sign_artifact(&h.keys(), &claims, now, now).expect("sign")
    };
    let mut started = 0u64;
    let mut held_back = None;
    for i in 0..USER_BURST {
        let jti = format!("code-{i}");
        let reply = h.exchange(&code(&jti), "ichor-cli", CLI_REDIRECT, VERIFIER).await;
        match reply.status {
            StatusCode::OK => started += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                assert_eq!(reply.error(), "slow_down", "{}", reply.text());
                held_back.get_or_insert(jti);
            }
            other => panic!("code {i}: {other} {}", reply.text()),
        }
    }
    assert_eq!(
        started,
        USER_BURST - SESSIONS as u64,
        "codes started sessions past the budget the refreshes left"
    );
    // A code held back was not used up: once the budget refills it starts its session.
    h.clock.advance(SignedDuration::from_secs(1));
    let jti = held_back.expect("a code was held back");
    let reply = h.exchange(&code(&jti), "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert!(reply.json()["refresh_token"].is_string());
}
