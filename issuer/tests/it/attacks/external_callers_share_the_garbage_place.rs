//! The argon2id gate's per-user share, from outside: external API callers (`oidc:…`) are not
//! user names, so they were all keyed with the sign-in fields that are not names. Five garbage
//! sign-ins in flight (or one external admin's five new hashes) left every external admin's
//! `CreateUser` with a password refused as busy. Now each external caller has a share of its
//! own, apart from every other and from the garbage fields.

use std::time::Duration;

use ichor_issuer::oidc::{
    HASH_PERMITS,
    password_limits::{PasswordLimitError, PasswordLimits},
    passwords::{ApiCaller, DEFAULT_PER_USER},
};
use ichor_renderers::auth::Password;

fn password() -> Password {
    Password::new("a long enough new password 42".to_owned())
}

/// `frank`'s new hash, asked for while every permit is held elsewhere: it must wait for a
/// permit (not be refused at once for a share someone else filled).
async fn waits_for_a_permit(limits: &PasswordLimits, caller: &str) {
    waits_for_a_permit_as(limits, ApiCaller::External(caller)).await;
}

/// As [`waits_for_a_permit`], for any kind of caller.
async fn waits_for_a_permit_as(limits: &PasswordLimits, caller: ApiCaller<'_>) {
    let asked = limits.hash(caller, password());
    match tokio::time::timeout(Duration::from_millis(300), asked).await {
        Err(_) => {}
        Ok(Err(PasswordLimitError::Busy { .. })) => {
            panic!("{caller:?}'s new hash was refused: its share is someone else's")
        }
        Ok(other) => panic!("{caller:?}'s new hash ran without a permit: {other:?}"),
    }
}

/// Holds every permit of the gate, so what enters waits in its queue, holding its place.
async fn every_permit(limits: &PasswordLimits) -> tokio::sync::OwnedSemaphorePermit {
    let permits = u32::try_from(HASH_PERMITS).expect("a few permits");
    std::sync::Arc::clone(limits.gate().semaphore())
        .acquire_many_owned(permits)
        .await
        .expect("the gate's permits")
}

async fn until(mut ready: impl FnMut() -> bool) {
    for _ in 0..200 {
        if ready() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the places were never taken");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_sign_in_fields_do_not_take_an_external_admins_place() {
    let limits = PasswordLimits::standalone();
    let held = every_permit(&limits).await;
    let mut garbage = Vec::new();
    for i in 0..DEFAULT_PER_USER {
        let gate = limits.gate().clone();
        garbage.push(tokio::spawn(async move {
            gate.enter(&format!("Not A Name {i}")).await.map(drop)
        }));
    }
    until(|| limits.gate().places_of("Not A Name") == DEFAULT_PER_USER).await;
    waits_for_a_permit(&limits, "oidc:frank@example.com").await;
    drop(held);
    for g in garbage {
        g.await.expect("joined").expect("admitted once permits are back");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_external_admins_new_hashes_do_not_take_another_external_admins_place() {
    let limits = PasswordLimits::standalone();
    let held = every_permit(&limits).await;
    let mut eve = Vec::new();
    for _ in 0..DEFAULT_PER_USER {
        let limits = limits.clone();
        eve.push(tokio::spawn(async move {
            limits
                .hash(ApiCaller::External("oidc:eve@example.com"), password())
                .await
                .map(drop)
        }));
    }
    until(|| limits.gate().waiting() == DEFAULT_PER_USER).await;
    waits_for_a_permit(&limits, "oidc:frank@example.com").await;
    // Eve's own share is still five: a sixth of hers is refused at once.
    match tokio::time::timeout(
        Duration::from_millis(300),
        limits.hash(ApiCaller::External("oidc:eve@example.com"), password()),
    )
    .await
    {
        Ok(Err(PasswordLimitError::Busy { .. })) => {}
        other => panic!("eve's sixth hash was not refused: {other:?}"),
    }
    drop(held);
    for e in eve {
        e.await.expect("joined").expect("hashed once permits are back");
    }
}

/// An external prefix need not contain a colon: external `corp-bob` is a valid Ichor user name.
/// Its new hashes must not fill local `corp-bob`'s places (its sign-ins and its own API
/// requests), nor the other way round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_caller_named_like_a_local_user_does_not_take_that_users_places() {
    let limits = PasswordLimits::standalone();
    let held = every_permit(&limits).await;
    let mut external = Vec::new();
    for _ in 0..DEFAULT_PER_USER {
        let limits = limits.clone();
        external.push(tokio::spawn(async move {
            limits
                .hash(ApiCaller::External("corp-bob"), password())
                .await
                .map(drop)
        }));
    }
    until(|| limits.gate().places_of_caller(ApiCaller::External("corp-bob")) == DEFAULT_PER_USER).await;
    assert_eq!(
        limits.gate().places_of("corp-bob"),
        0,
        "the external caller's places are the local user's sign-in places"
    );
    assert_eq!(limits.gate().places_of_caller(ApiCaller::User("corp-bob")), 0);
    // Local corp-bob's sign-in and its own new hash wait for a permit, not refused as busy.
    let gate = limits.gate().clone();
    let sign_in = tokio::spawn(async move { gate.enter("corp-bob").await.map(drop) });
    until(|| limits.gate().places_of("corp-bob") == 1).await;
    assert!(
        !sign_in.is_finished(),
        "local corp-bob's sign-in was not kept waiting"
    );
    waits_for_a_permit_as(&limits, ApiCaller::User("corp-bob")).await;
    drop(held);
    sign_in
        .await
        .expect("joined")
        .expect("local corp-bob's sign-in admitted");
    for e in external {
        e.await.expect("joined").expect("hashed once permits are back");
    }
}
