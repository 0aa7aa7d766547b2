//! Flooding the store through tokens that verify: a refresh token keeps its MAC until its
//! family's end, also after a sign-out, and a request whose token verifies is not refused by its
//! source's bucket. An attacker with an old refresh token of V (signed out, from an old file)
//! loops `POST /oidc/revoke` with it, and one who saw a code replays it: before, every such
//! request read V's credentials (on Kubernetes a GET of the whole Secret, queued in V's line) and
//! nothing refused them. Now a revocation takes from its family's bucket before the store is read
//! (503 with Retry-After once it is empty, RFC 7009 section 2.2.1), a family found gone is
//! remembered and not looked up again (at the token endpoint too), and a replayed code revokes
//! its family once: later replays of it read nothing. V's own sessions go on meanwhile.

use std::sync::atomic::Ordering;

use crate::common::*;
use axum::http::{StatusCode, header};
use jiff::SignedDuration;

/// The burst and the refill per second of a refresh family's bucket.
const FAMILY_BURST: u64 = 20;
/// Revocations the attacker sends per simulated second.
const PER_SECOND: u64 = 100;
/// Simulated seconds of flood.
const SECONDS: u64 = 10;
/// Old families of one account.
const FAMILIES: u64 = 30;

#[tokio::test]
async fn a_dead_refresh_token_flooding_revoke_is_held_to_its_family_bucket() {
    let h = Harness::new();
    // V (carol) has a live session, and the attacker an old token of a family signed out since.
    let live_entry = cli_family_entry(
        &password_hash(),
        start() - SignedDuration::from_hours(24),
        "fam-live",
        start(),
    );
    let family = live_entry.family("fam-live").expect("family").clone();
    h.store.add_user("carol", &["viewer"], Some(live_entry));
    let mut live = h.mint_refresh("carol", "fam-live", &family);
    let dead = h.mint_refresh("carol", "fam-signed-out", &family);

    let reads_before = h.store.credential_reads.load(Ordering::SeqCst);
    let (mut refused, mut answered) = (0, 0);
    for second in 0..SECONDS {
        for n in 0..PER_SECOND {
            let reply = h.revoke(&[("token", &dead), ("client_id", "ichor-cli")]).await;
            match reply.status {
                StatusCode::OK => answered += 1,
                StatusCode::SERVICE_UNAVAILABLE => {
                    assert!(
                        reply.headers.contains_key(header::RETRY_AFTER),
                        "second {second}, revocation {n}: no Retry-After"
                    );
                    refused += 1;
                }
                other => panic!("second {second}, revocation {n}: {other} {}", reply.text()),
            }
        }
        // V refreshes in the middle of the flood, every second.
        let reply = h.refresh(&live, "ichor-cli", None).await;
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "V's refresh at second {second}: {}",
            reply.text()
        );
        live = reply.json()["refresh_token"]
            .as_str()
            .expect("refresh_token")
            .to_owned();
        h.clock.advance(SignedDuration::from_secs(1));
    }

    // The first revocation finds the family gone and the replica remembers it; the family's
    // bucket (20 at once, then 20 a second) would bound the rest anyway. The flood made at most
    // one burst of credentials reads in all, beside V's one per refresh.
    let reads = h.store.credential_reads.load(Ordering::SeqCst) - reads_before;
    assert!(
        reads <= FAMILY_BURST + SECONDS,
        "{reads} credentials reads for {} revocations and {SECONDS} refreshes",
        PER_SECOND * SECONDS
    );
    assert_eq!(answered + refused, PER_SECOND * SECONDS);
    assert_eq!(
        h.store.writes.load(Ordering::SeqCst),
        SECONDS,
        "only V's rotations wrote"
    );
    assert!(
        h.store
            .entry("carol")
            .expect("entry")
            .family("fam-live")
            .is_some(),
        "V is still signed in"
    );
}

#[tokio::test]
async fn every_old_family_of_an_account_costs_one_store_read_at_both_endpoints() {
    let h = Harness::new();
    // The attacker's own account, signed in `FAMILIES` times and signed out (or displaced) each
    // time: every old token still verifies.
    let entry = cli_family_entry(
        &password_hash(),
        start() - SignedDuration::from_hours(24),
        "fam-now",
        start(),
    );
    let family = entry.family("fam-now").expect("family").clone();
    h.store.add_user("eve", &["viewer"], Some(entry));
    let old: Vec<String> = (0..FAMILIES)
        .map(|i| h.mint_refresh("eve", &format!("fam-old-{i}"), &family))
        .collect();

    let reads_before = h.store.credential_reads.load(Ordering::SeqCst);
    for second in 0..3 {
        for token in &old {
            for _ in 0..FAMILY_BURST {
                let revoked = h.revoke(&[("token", token), ("client_id", "ichor-cli")]).await;
                assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.text());
                let refreshed = h.refresh(token, "ichor-cli", None).await;
                assert_eq!(refreshed.status, StatusCode::BAD_REQUEST, "{}", refreshed.text());
                assert_eq!(refreshed.error(), "invalid_grant", "second {second}");
            }
        }
        h.clock.advance(SignedDuration::from_secs(1));
    }
    let reads = h.store.credential_reads.load(Ordering::SeqCst) - reads_before;
    assert!(
        reads <= FAMILIES,
        "{reads} credentials reads for {} presentations of {FAMILIES} old families",
        3 * FAMILIES * FAMILY_BURST * 2
    );
    assert_eq!(h.store.writes.load(Ordering::SeqCst), 0);
    // The live session is untouched.
    let live = h.mint_refresh("eve", "fam-now", &family);
    let reply = h.refresh(&live, "ichor-cli", None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
}

#[tokio::test]
async fn a_refused_revocation_of_a_live_family_revokes_it_once_its_bucket_refills() {
    let h = Harness::new();
    let session = h.cli_session("alice").await;
    let token = session["refresh_token"]
        .as_str()
        .expect("refresh_token")
        .to_owned();
    let fam = h
        .store
        .entry("alice")
        .expect("entry")
        .families
        .keys()
        .next()
        .cloned()
        .expect("family");
    // A thief empties the family's bucket with refreshes of the same generation (the grace
    // window answers them alike).
    for n in 0..FAMILY_BURST {
        let reply = h.refresh(&token, "ichor-cli", None).await;
        assert_eq!(reply.status, StatusCode::OK, "refresh {n}: {}", reply.text());
    }
    let refused = h.revoke(&[("token", &token), ("client_id", "ichor-cli")]).await;
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        refused.text()
    );
    assert_eq!(refused.error(), "temporarily_unavailable");
    assert_eq!(refused.headers[header::RETRY_AFTER], "1");
    assert!(
        h.store.entry("alice").expect("entry").family(&fam).is_some(),
        "a refused revocation revokes nothing, and says so (the client retries)"
    );

    h.clock.advance(SignedDuration::from_secs(1));
    let revoked = h.revoke(&[("token", &token), ("client_id", "ichor-cli")]).await;
    assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.text());
    assert!(h.store.entry("alice").expect("entry").families.is_empty());
}

#[tokio::test]
async fn a_replayed_code_revokes_its_family_once_and_later_replays_read_nothing() {
    let h = Harness::new();
    let code = h
        .code("alice", "ichor-cli", CLI_REDIRECT, "openid offline_access", "")
        .await;
    let first = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text());
    assert_eq!(h.store.entry("alice").expect("entry").families.len(), 1);

    let replay = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(replay.error(), "invalid_grant", "{}", replay.text());
    assert!(
        h.store.entry("alice").expect("entry").families.is_empty(),
        "the first replay revokes the family the code started"
    );

    // The attacker replays the code for the rest of its minute.
    let (reads, writes) = (
        h.store.credential_reads.load(Ordering::SeqCst),
        h.store.writes.load(Ordering::SeqCst),
    );
    for n in 0..200 {
        let replay = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
        assert_eq!(
            replay.status,
            StatusCode::BAD_REQUEST,
            "replay {n}: {}",
            replay.text()
        );
        assert_eq!(replay.error(), "invalid_grant", "replay {n}");
    }
    assert_eq!(
        h.store.credential_reads.load(Ordering::SeqCst) - reads,
        0,
        "later replays read nothing"
    );
    assert_eq!(h.store.writes.load(Ordering::SeqCst) - writes, 0);
    assert!(h.metrics().contains("ichor_issuer_code_replays_total 201"));
}
