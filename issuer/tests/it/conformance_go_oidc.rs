//! The real `ichor-issuer` binary against go-oidc v2, the verifier library inside the
//! kube-apiserver's JWT authenticator: a token from a real sign-in is accepted through discovery
//! on the external listener and through the internal listener (as `discoveryURL` does), refused
//! for another audience and when expired, and a key rotation written over keys.json is served
//! without a restart.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::conformance_common::*;
use ichor_issuer::keys::LoadedKeys;
use ichor_issuer::tokens::{IdTokenClaims, sign_id_token};
use ichor_renderers::trust::keys::KeyTimes as _;
use jiff::{SignedDuration, Timestamp};
use std::time::Duration;

#[tokio::test]
#[ignore = "needs go-oidc: hack/install-test-deps.sh"]
async fn go_oidc_accepts_a_signed_in_token_through_both_listeners_and_refuses_another_audience() {
    let Some(verifier) = go_oidc_verifier() else {
        return;
    };
    let issuer = RunningIssuer::start(Options::default()).await;
    let tokens = issuer.cli_sign_in(Some("ichor-kube")).await;
    let id_token = tokens["id_token"].as_str().unwrap();

    let external = go_oidc_verify(&verifier, &issuer, "ichor-kube", None, id_token).await;
    assert!(
        external.accepted,
        "go-oidc refused it via the external listener: {}",
        external.stderr
    );
    let claims: serde_json::Value = serde_json::from_str(external.stdout.trim()).unwrap();
    assert_eq!(claims["iss"], issuer.issuer.as_str());
    assert_eq!(claims["sub"], USER);
    assert_eq!(claims["aud"], "ichor-kube");
    // Roles as they are; the kube-apiserver's claim mapping adds the `ichor:` prefix.
    assert_eq!(claims["groups"], serde_json::json!(["admin"]));

    let internal = issuer.internal_discovery();
    let via_internal = go_oidc_verify(&verifier, &issuer, "ichor-kube", Some(&internal), id_token).await;
    assert!(
        via_internal.accepted,
        "go-oidc refused it via the internal listener ({internal}): {}",
        via_internal.stderr
    );

    let wrong = go_oidc_verify(&verifier, &issuer, "ichor-ui", None, id_token).await;
    assert!(
        !wrong.accepted,
        "go-oidc accepted an ichor-kube token for ichor-ui"
    );
    assert!(wrong.stderr.contains("expected audience"), "{}", wrong.stderr);
}

#[tokio::test]
#[ignore = "needs go-oidc: hack/install-test-deps.sh"]
async fn go_oidc_refuses_a_token_of_our_key_that_has_expired() {
    let Some(verifier) = go_oidc_verifier() else {
        return;
    };
    let issuer = RunningIssuer::start(Options::default()).await;
    let keys = LoadedKeys::from_document(&issuer.keys).unwrap();
    let then = Timestamp::now() - SignedDuration::from_mins(10);
    let claims =
        ichor_testkit::issuer::harness::id_claims(&issuer.issuer, USER, "ichor-kube", &["admin"], then);
    let expired = sign_id_token(&keys, &claims, then).unwrap();
    let verdict = go_oidc_verify(&verifier, &issuer, "ichor-kube", None, &expired).await;
    assert!(!verdict.accepted, "go-oidc accepted an expired token");
    assert!(verdict.stderr.contains("token is expired"), "{}", verdict.stderr);

    // The same claims with a future expiry pass: the refusal above was the expiry alone.
    let now = Timestamp::now();
    let fresh = IdTokenClaims {
        exp: (now + SignedDuration::from_mins(5)).as_second(),
        iat: now.as_second(),
        ..claims
    };
    let fresh = sign_id_token(&keys, &fresh, now).unwrap();
    let verdict = go_oidc_verify(&verifier, &issuer, "ichor-kube", None, &fresh).await;
    assert!(verdict.accepted, "{}", verdict.stderr);
}

#[tokio::test]
#[ignore = "needs go-oidc: hack/install-test-deps.sh"]
async fn a_key_rotation_written_over_keys_json_is_served_without_a_restart() {
    let Some(verifier) = go_oidc_verifier() else {
        return;
    };
    let mut issuer = RunningIssuer::start(Options::default()).await;
    let before = issuer.cli_sign_in(None).await;
    let old_token = before["id_token"].as_str().unwrap().to_owned();
    let old_kid = jose_header(&old_token)["kid"].as_str().unwrap().to_owned();
    assert_eq!(issuer.jwks_kids().await, vec![old_kid.clone()]);

    // The controller's timeline planned 11 minutes ago (the first key is 30 h old, past the 24 h
    // rotation period): the successor was published then and signs from 1 minute ago, so the
    // rotation is both visible and active without waiting the 10-minute publication delay.
    let doc = issuer.rotate_keys_at(Timestamp::now() - SignedDuration::from_mins(11));
    let new_kid = doc
        .keys()
        .iter()
        .map(|k| k.kid().to_owned())
        .find(|k| *k != old_kid)
        .expect("the plan made a successor key");
    let started = std::time::Instant::now();
    loop {
        let kids = issuer.jwks_kids().await;
        if kids.contains(&new_kid) {
            assert!(
                kids.contains(&old_kid),
                "the old key left the JWKS too early: {kids:?}"
            );
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the new kid {new_kid} did not appear in the JWKS within 15 s (10 s poll): {kids:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("new kid served after {:?}", started.elapsed());

    // A token issued now (a refresh of the earlier session) is signed by the successor.
    let after = issuer.refresh(before["refresh_token"].as_str().unwrap()).await;
    let new_token = after["id_token"].as_str().unwrap();
    assert_eq!(jose_header(new_token)["kid"], new_kid.as_str());

    let fresh = go_oidc_verify(&verifier, &issuer, "ichor-kube", None, new_token).await;
    assert!(
        fresh.accepted,
        "go-oidc refused the successor's token: {}",
        fresh.stderr
    );
    let via_internal = go_oidc_verify(
        &verifier,
        &issuer,
        "ichor-kube",
        Some(&issuer.internal_discovery()),
        new_token,
    )
    .await;
    assert!(via_internal.accepted, "{}", via_internal.stderr);
    let old = go_oidc_verify(&verifier, &issuer, "ichor-kube", None, &old_token).await;
    assert!(
        old.accepted,
        "go-oidc refused the pre-rotation token: {}",
        old.stderr
    );
}
