//! Filling the cluster's etcd through one account: every refresh rotation writes the user's
//! credentials, on Kubernetes a put of the user's Secret (up to 16 KiB at the 32-session cap) into
//! etcd, whose history until the next compaction counts against its quota (past it the whole
//! cluster is read-only). Mallory, signed in 32 times, rotates every session as fast as the
//! presentation ceiling lets her (20 a second each): before, that was 640 writes a second per
//! replica, bounded only by the store's round trip. Now each session's rotations are held to its
//! write cap (20 at once, then one every 10 seconds per replica), answered `429 slow_down` with
//! `Retry-After` past it. The cap is per session, so a thief rotating a stolen session flat out
//! holds back that session only: the owner's other sessions and a new sign-in go on. Presentations
//! that write nothing (the grace window) spend nothing. A new session brings a whole cap, so the
//! sessions a user starts are held too (10 at once, then one every 30 seconds): signing in again
//! and again cannot multiply the caps.

use std::sync::atomic::Ordering;

use crate::common::*;
use axum::http::{StatusCode, header};
use jiff::SignedDuration;

/// The burst of a session's write cap.
const WRITE_BURST: u64 = 20;
/// Seconds per rotation past the burst.
const WRITE_EVERY: u64 = 10;
/// Sessions a user starts at once before one every 30 seconds.
const SESSION_STARTS: u64 = 10;
/// The sessions Mallory holds (the cap of refresh families per user).
const SESSIONS: usize = 32;
/// Simulated seconds of the flood.
const SECONDS: u64 = 10;
/// Grants attempted per session and simulated second (the presentation ceiling's 20, so only the
/// write cap can refuse them).
const PER_SESSION: usize = 20;

/// `user`'s entry holding `count` families `<prefix>-0` … of `ichor-cli`, and their tokens
/// (family ids are random in a real issuer; the prefixes keep the users' apart).
fn sessions(h: &Harness, user: &str, prefix: &str, count: usize) -> Vec<String> {
    let fam = |i: usize| format!("{prefix}-{i}");
    let mut entry = cli_family_entry(
        &password_hash(),
        start() - SignedDuration::from_hours(24),
        &fam(0),
        start(),
    );
    for i in 1..count {
        entry = entry
            .start_family(
                &fam(i),
                "ichor-cli",
                "ichor-kube",
                start(),
                SignedDuration::from_hours(12),
            )
            .expect("family");
    }
    h.store.add_user(user, &["viewer"], Some(entry.clone()));
    (0..count)
        .map(|i| h.mint_refresh(user, &fam(i), entry.family(&fam(i)).expect("family")))
        .collect()
}

/// The refresh token in a 200 answer.
fn rotated(reply: &Reply) -> String {
    reply.json()["refresh_token"]
        .as_str()
        .expect("refresh_token")
        .to_owned()
}

/// Refreshes `token` `times` times in a row, as fast as answered: the grants and the 429s.
async fn hammer(h: &Harness, token: &mut String, times: usize, second: u64) -> (u64, u64) {
    let (mut granted, mut held) = (0, 0);
    for _ in 0..times {
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
    (granted, held)
}

#[tokio::test]
async fn one_account_rotating_every_session_flat_out_is_held_to_its_sessions_write_caps() {
    let h = Harness::new();
    let mut mallory = sessions(&h, "mallory", "m", SESSIONS);
    let mut carol = sessions(&h, "carol", "c", 1).remove(0);

    let (mut granted, mut held) = (0, 0);
    for second in 0..SECONDS {
        for _ in 0..PER_SESSION {
            for token in &mut mallory {
                let (g, r) = hammer(&h, token, 1, second).await;
                granted += g;
                held += r;
            }
        }
        // Carol refreshes in the middle of the flood, every second.
        let (g, _) = hammer(&h, &mut carol, 1, second).await;
        assert_eq!(g, 1, "Carol at second {second} was refused");
        h.clock.advance(SignedDuration::from_secs(1));
    }

    // Each session: its burst, then one per 10 s. Without the cap every attempt (6,400) was a
    // write.
    let cap = SESSIONS as u64 * (WRITE_BURST + SECONDS.div_ceil(WRITE_EVERY));
    assert!(
        granted <= cap,
        "{granted} rotations of Mallory's sessions in {SECONDS} s; the caps allow {cap}"
    );
    assert!(
        granted >= SESSIONS as u64 * WRITE_BURST,
        "the bursts were not granted: {granted}"
    );
    assert_eq!(granted + held, SECONDS * (PER_SESSION * SESSIONS) as u64);
    assert_eq!(
        h.store.writes.load(Ordering::SeqCst),
        granted + SECONDS,
        "only Mallory's granted rotations and Carol's wrote"
    );
    assert!(
        h.metrics().contains(r#"reason="family_writes""#),
        "the refusals are counted"
    );
}

#[tokio::test]
async fn a_stolen_session_rotated_flat_out_holds_back_neither_the_owners_other_sessions_nor_a_sign_in() {
    let h = Harness::new();
    let mut tokens = sessions(&h, "alice", "a", 2);
    let mut own = tokens.pop().expect("the owner's session");
    let mut stolen = tokens.pop().expect("the stolen session");
    for second in 0..SECONDS {
        // The thief rotates the stolen session as fast as the presentation ceiling allows.
        hammer(&h, &mut stolen, PER_SESSION, second).await;
        let (g, _) = hammer(&h, &mut own, 1, second).await;
        assert_eq!(g, 1, "the owner's own session at second {second} was refused");
        h.clock.advance(SignedDuration::from_secs(1));
    }
    // A new sign-in of the owner starts a session at once.
    let session = h.cli_session("alice").await;
    assert!(session["refresh_token"].is_string(), "{session}");
}

#[tokio::test]
async fn presentations_that_write_nothing_spend_no_writes() {
    let h = Harness::new();
    let old = sessions(&h, "mallory", "m", 1).remove(0);
    // One rotation; the old token then lands in the grace window, answered with the same tokens
    // and nothing written.
    let reply = h.refresh(&old, "ichor-cli", None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let mut current = rotated(&reply);
    let writes = h.store.writes.load(Ordering::SeqCst);
    // Within the presentation ceiling: 19 more presentations this second, and 20 a second after,
    // for three seconds: far more than the session's write cap.
    for second in 0..3 {
        let presentations = if second == 0 { 19 } else { 20 };
        for _ in 0..presentations {
            let again = h.refresh(&old, "ichor-cli", None).await;
            assert_eq!(again.status, StatusCode::OK, "second {second}: {}", again.text());
        }
        h.clock.advance(SignedDuration::from_secs(1));
    }
    assert_eq!(
        h.store.writes.load(Ordering::SeqCst),
        writes,
        "the grace window wrote"
    );
    // The rest of the burst is still there: the session rotates 19 more times at once.
    let (granted, held) = hammer(&h, &mut current, WRITE_BURST as usize - 1, 3).await;
    assert_eq!((granted, held), (WRITE_BURST - 1, 0));
    // And a second later (the presentation ceiling whole again) the next is held back by the
    // write cap, counted as such.
    h.clock.advance(SignedDuration::from_secs(1));
    let (granted, held) = hammer(&h, &mut current, 1, 4).await;
    assert_eq!((granted, held), (0, 1));
    assert!(
        h.metrics().contains(r#"reason="family_writes""#),
        "held back by the write cap"
    );
}

#[tokio::test]
async fn signing_in_again_and_again_for_fresh_caps_is_held_to_the_users_session_starts() {
    // Each sign-in starts a family with a whole write cap: held to 10 starts at once, then one
    // every 30 s, the churn cannot multiply the caps. A code held back is not used up.
    let h = Harness::new();
    sessions(&h, "mallory", "m", 1);
    let now = h.clock.now_ts();
    let code = |jti: &str| {
        let claims = ichor_issuer::tokens::CodeClaims {
            iss: ISSUER.to_owned(),
            jti: jti.to_owned(),
            client_id: "ichor-cli".to_owned(),
            redirect_uri: CLI_REDIRECT.to_owned(),
            sub: "mallory".to_owned(),
            nonce: "n".to_owned(),
            code_challenge: ichor_issuer::oidc::request::s256_challenge(VERIFIER),
            offline_access: true,
            audience: "ichor-kube".to_owned(),
            amr: Vec::new(),
            iat: now.as_second(),
            exp: now.as_second() + 60,
        };
        ichor_issuer::tokens::sign_artifact(&h.keys(), &claims, now, now).expect("sign")
    };
    let mut started = 0;
    let mut held_back = Vec::new();
    for i in 0..SESSION_STARTS + 5 {
        let jti = format!("code-{i}");
        let reply = h.exchange(&code(&jti), "ichor-cli", CLI_REDIRECT, VERIFIER).await;
        match reply.status {
            StatusCode::OK => started += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                assert_eq!(reply.error(), "slow_down", "{}", reply.text());
                assert!(reply.headers.contains_key(header::RETRY_AFTER));
                held_back.push(jti);
            }
            other => panic!("code {i}: {other} {}", reply.text()),
        }
    }
    assert_eq!(started, SESSION_STARTS, "sessions started past the burst");
    assert!(h.metrics().contains(r#"reason="session_starts""#));
    // With the budget spent, a used code presented again is still told as a replay (and its
    // family revoked), not held back as if it were new.
    let replay = h
        .exchange(&code("code-0"), "ichor-cli", CLI_REDIRECT, VERIFIER)
        .await;
    assert_eq!(replay.status, StatusCode::BAD_REQUEST, "{}", replay.text());
    assert!(replay.text().contains("already used"), "{}", replay.text());
    // 30 s later one more starts, from a code held back (it lives 60 s): it was not claimed.
    h.clock.advance(SignedDuration::from_secs(30));
    let reply = h
        .exchange(&code(&held_back[0]), "ichor-cli", CLI_REDIRECT, VERIFIER)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert!(reply.json()["refresh_token"].is_string());
}
