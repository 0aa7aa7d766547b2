//! ±2 minutes of clock skew between two replicas sharing keys and store, and the documented limits where it fails closed.

use super::*;

const SKEW: SignedDuration = SignedDuration::from_mins(2);

/// Replica `a` at the harness clock and replica `b` `skew` ahead of it (behind when negative),
/// sharing keys, settings and store.
fn skewed(skew: SignedDuration) -> (Harness, Harness) {
    let a = Harness::new();
    // Keys made an hour earlier, so that both replicas have an active signing key (see
    // `a_replica_behind_the_first_keys_creation_has_no_signing_key_and_answers_503`).
    a.ring.store(
        ichor_issuer::keys::LoadedKeys::from_document(&common::first_document(
            common::start() - SignedDuration::from_hours(1),
        ))
        .unwrap(),
    );
    let b = replica(
        Arc::clone(&a.store) as Arc<dyn UserStore>,
        Arc::clone(&a.store),
        Arc::clone(&a.ring),
        Arc::clone(&a.settings),
        Arc::new(ManualClock::new(common::start() + skew)),
    );
    (a, b)
}

fn advance_both(a: &Harness, b: &Harness, d: SignedDuration) {
    a.clock.advance(d);
    b.clock.advance(d);
}

#[tokio::test]
async fn an_id_token_of_a_replica_two_minutes_off_verifies_until_its_exp_on_the_verifiers_clock() {
    for skew in [SKEW, -SKEW] {
        let (a, b) = skewed(skew);
        let session = a.cli_session("alice").await;
        let id = session["id_token"].as_str().unwrap();
        assert_eq!(
            claims(id)["exp"].as_i64(),
            Some(a.clock.now_secs() + 300),
            "exp is on the issuing replica's clock"
        );
        assert!(b.issuer.verify_id_token(id, "ichor-kube").is_ok(), "skew {skew}");
        // Expiry is still enforced, on the verifying replica's own clock: B reaches exp
        // `skew` earlier (or later) than A.
        let left = 300 - skew.as_secs();
        advance_both(&a, &b, SignedDuration::from_secs(left - 1));
        assert!(b.issuer.verify_id_token(id, "ichor-kube").is_ok(), "skew {skew}");
        advance_both(&a, &b, SignedDuration::from_secs(1));
        assert_eq!(
            b.issuer.verify_id_token(id, "ichor-kube"),
            Err(ichor_issuer::tokens::TokenError::Expired),
            "skew {skew}"
        );
    }
}

#[tokio::test]
async fn a_sign_in_ticket_of_one_replica_is_accepted_by_a_replica_two_minutes_off() {
    for skew in [SKEW, -SKEW] {
        let (a, b) = skewed(skew);
        let ticket = a
            .ticket("ichor-cli", CLI_REDIRECT, "openid offline_access", "")
            .await;
        let reply = b.login(&ticket, "alice", common::PASSWORD).await;
        assert_eq!(reply.status, StatusCode::OK, "skew {skew}: {}", reply.text());
    }
}

/// A documented limit: the first keys are active from their creation on the controller's clock,
/// so a replica whose clock is behind that instant has no signing key yet. It fails closed with
/// a 503 (`temporarily_unavailable`) until its clock reaches the keys' `activeFrom`.
#[tokio::test]
async fn a_replica_behind_the_first_keys_creation_has_no_signing_key_and_answers_503() {
    let a = Harness::new();
    let behind = replica(
        Arc::clone(&a.store) as Arc<dyn UserStore>,
        Arc::clone(&a.store),
        Arc::clone(&a.ring),
        Arc::clone(&a.settings),
        Arc::new(ManualClock::new(common::start() - SKEW)),
    );
    let token = refresh_of(&a.cli_session("alice").await);
    let reply = behind.refresh(&token, "ichor-cli", None).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{}", reply.text());
    assert_eq!(reply.error(), "temporarily_unavailable");
    assert!(!reply.text().contains("alice"), "{}", reply.text());
    // Once its clock reaches the keys' activation it signs like the others.
    behind.clock.advance(SKEW);
    let session = behind.cli_session("alice").await;
    assert!(
        behind
            .issuer
            .verify_id_token(session["id_token"].as_str().unwrap(), "ichor-kube")
            .is_ok()
    );
}

#[tokio::test]
async fn a_code_of_a_replica_two_minutes_ahead_redeems_on_one_behind_and_still_expires() {
    let (ahead, behind) = skewed(-SKEW);
    // `ahead` is the harness replica; `behind` runs two minutes late.
    let code = ahead
        .code("alice", "ichor-cli", CLI_REDIRECT, "openid offline_access", "")
        .await;
    let reply = behind.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    // A code the behind replica sees 60 s + 2 min later is expired there too.
    let code = ahead
        .code("alice", "ichor-cli", CLI_REDIRECT, "openid offline_access", "")
        .await;
    advance_both(&ahead, &behind, SignedDuration::from_secs(180));
    let reply = behind.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.error(), "invalid_grant", "{}", reply.text());
    assert!(reply.text().contains("expired"), "{}", reply.text());
}

/// A documented limit: codes live 60 s and no leeway is added, so a code minted by a replica
/// two minutes BEHIND is already expired on one two minutes ahead. It fails closed
/// (`invalid_grant`; the user signs in again), it never extends a code's life.
#[tokio::test]
async fn a_code_of_a_replica_two_minutes_behind_is_expired_on_one_ahead_and_fails_closed() {
    let (behind, ahead) = skewed(SKEW);
    let code = behind
        .code("alice", "ichor-cli", CLI_REDIRECT, "openid offline_access", "")
        .await;
    let reply = ahead.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text());
    assert_eq!(reply.error(), "invalid_grant");
    assert!(reply.text().contains("expired"), "{}", reply.text());
    assert!(
        behind.store.entry("alice").unwrap().families.is_empty(),
        "no family was started"
    );
}

#[tokio::test]
async fn refreshes_alternate_between_replicas_two_minutes_apart_and_the_absolute_lifetime_holds() {
    for skew in [SKEW, -SKEW] {
        let (a, b) = skewed(skew);
        let mut token = refresh_of(&a.cli_session("alice").await);
        for step in 0..6u64 {
            let h = if step % 2 == 0 { &b } else { &a };
            let reply = h.refresh(&token, "ichor-cli", None).await;
            assert_eq!(
                reply.status,
                StatusCode::OK,
                "skew {skew} step {step}: {}",
                reply.text()
            );
            token = refresh_of(&reply.json());
            assert_eq!(generation_of(&token), step + 2);
            let id = reply.json()["id_token"].as_str().unwrap().to_owned();
            assert!(a.issuer.verify_id_token(&id, "ichor-kube").is_ok());
            assert!(b.issuer.verify_id_token(&id, "ichor-kube").is_ok());
            advance_both(&a, &b, SignedDuration::from_secs(30));
        }
        // The family ends 12 hours after it started on A's clock; B (ahead) refuses it at its
        // own clock's end, never later than the stored `exp`.
        let exp = claims(&token)["exp"].as_i64().unwrap();
        let end = Timestamp::from_second(exp).unwrap();
        a.clock.set(end - skew - SignedDuration::from_secs(1));
        b.clock.set(end - SignedDuration::from_secs(1));
        let reply = b.refresh(&token, "ichor-cli", None).await;
        assert_eq!(reply.status, StatusCode::OK, "skew {skew}: {}", reply.text());
        token = refresh_of(&reply.json());
        advance_both(&a, &b, SignedDuration::from_secs(1));
        let reply = b.refresh(&token, "ichor-cli", None).await;
        assert_eq!(reply.error(), "invalid_grant", "skew {skew}: {}", reply.text());
    }
}

/// A documented limit: the 10-second grace window is measured with the clock of the replica
/// that receives the retry against `rotatedAt` written by the one that rotated. A retry of the
/// previous token at a replica two minutes ahead is therefore a reuse: the family is revoked
/// (fails closed; the user signs in again). At a replica behind, the window is longer by the
/// skew, and the answer is still only the one successor.
#[tokio::test]
async fn a_grace_retry_at_a_replica_two_minutes_off_is_the_same_successor_behind_and_a_reuse_ahead() {
    // The retry lands on a replica behind: the same successor, nothing written.
    let (a, behind) = skewed(-SKEW);
    let first = refresh_of(&a.cli_session("alice").await);
    let successor = refresh_of(&a.refresh(&first, "ichor-cli", None).await.json());
    let writes = a.store.writes.load(Ordering::SeqCst);
    let again = behind.refresh(&first, "ichor-cli", None).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text());
    assert_eq!(refresh_of(&again.json()), successor);
    assert_eq!(a.store.writes.load(Ordering::SeqCst), writes);
    // ... and a reuse once the behind replica's clock is 10 s past the rotation.
    advance_both(&a, &behind, SKEW + SignedDuration::from_secs(10));
    let reuse = behind.refresh(&first, "ichor-cli", None).await;
    assert_eq!(reuse.error(), "invalid_grant");

    // The retry lands on a replica ahead: a reuse at once, the family revoked.
    let (a, ahead) = skewed(SKEW);
    let first = refresh_of(&a.cli_session("alice").await);
    let successor = refresh_of(&a.refresh(&first, "ichor-cli", None).await.json());
    let reuse = ahead.refresh(&first, "ichor-cli", None).await;
    assert_eq!(reuse.status, StatusCode::BAD_REQUEST, "{}", reuse.text());
    assert!(reuse.text().contains("already used"), "{}", reuse.text());
    let dead = a.refresh(&successor, "ichor-cli", None).await;
    assert_eq!(
        dead.error(),
        "invalid_grant",
        "fails closed: the family is revoked"
    );
}

/// Found by this suite: the refresh grant used to write the rotation before it signed the new
/// tokens, so a replica that cannot sign (no active key: its clock is behind the keys'
/// `activeFrom`) answered 503 AFTER committing, and the client's retry later was a reuse that
/// revoked the family. The grants now refuse before writing anything.
#[tokio::test]
async fn a_refresh_that_cannot_be_signed_writes_nothing_and_logs_no_one_out() {
    let a = Harness::new();
    let behind = replica(
        Arc::clone(&a.store) as Arc<dyn UserStore>,
        Arc::clone(&a.store),
        Arc::clone(&a.ring),
        Arc::clone(&a.settings),
        Arc::new(ManualClock::new(common::start() - SKEW)),
    );
    let token = refresh_of(&a.cli_session("alice").await);
    let writes = a.store.writes.load(Ordering::SeqCst);
    let reply = behind.refresh(&token, "ichor-cli", None).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{}", reply.text());
    assert_eq!(
        a.store.writes.load(Ordering::SeqCst),
        writes,
        "a 503 wrote nothing"
    );
    a.clock.advance(SignedDuration::from_secs(60));
    let reply = a.refresh(&token, "ichor-cli", None).await;
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "the retry a minute later: {}",
        reply.text()
    );
}
