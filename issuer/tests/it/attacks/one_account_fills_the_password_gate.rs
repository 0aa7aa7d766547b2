//! One account with its right password keeps the process's argon2id busy through every path it
//! has: sign-ins in loops and `ChangeOwnPassword` calls held open, none cancelled (the budget of
//! credential changes, which would refuse the calls before any argon2id, is off here). A user signing
//! in for the first time from a device of her own (no device cookie: the shared queue) must still
//! get in, and soon: one user name holds only its share of the password gate.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use super::composed::{composed_with, peer};
use axum::http::StatusCode;
use ichor_issuer::oidc::passwords::DEFAULT_PER_USER;
use ichor_testkit::issuer::harness::{Harness, PASSWORD, UI_REDIRECT};

/// Sign-in loops of the one account.
const SIGN_IN_LOOPS: usize = 8;
/// `ChangeOwnPassword` calls of the one account held open at once.
const API_LOOPS: usize = 64;
/// How long carol may take to sign in: a few argon2id computations on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_accounts_right_passwords_in_a_loop_leave_room_for_another_users_first_sign_in() {
    let c = Arc::new(composed_with(Harness::with_write_caps_off()).await);
    let stop = Arc::new(AtomicBool::new(false));
    let mut loops = Vec::new();
    for i in 0..SIGN_IN_LOOPS {
        let (c, stop) = (Arc::clone(&c), Arc::clone(&stop));
        loops.push(tokio::spawn(async move {
            let ticket = c.h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
            let mut signed_in = 0_usize;
            while !stop.load(Ordering::Relaxed) {
                let reply =
                    c.h.login_from(peer(10 + i), &ticket, "alice", PASSWORD, None)
                        .await;
                match reply.status {
                    StatusCode::OK => signed_in += 1,
                    // Refused at once: straight back in, as a flood does.
                    _ => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            }
            signed_in
        }));
    }
    for i in 0..API_LOOPS {
        let (c, stop) = (Arc::clone(&c), Arc::clone(&stop));
        loops.push(tokio::spawn(async move {
            let mut changed = 0_usize;
            while !stop.load(Ordering::Relaxed) {
                // The same password again: the call verifies it and hashes it anew.
                match c
                    .change_own_password("alice", peer(100 + i), PASSWORD, PASSWORD)
                    .await
                {
                    Ok(_) => changed += 1,
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            }
            changed
        }));
    }

    // How many places of the shared gate alice holds, sampled all along.
    let most = tokio::spawn({
        let (c, stop) = (Arc::clone(&c), Arc::clone(&stop));
        async move {
            let mut most = 0;
            while !stop.load(Ordering::Relaxed) {
                most = most.max(c.h.issuer.hash_gate().places_of("alice"));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            most
        }
    });

    tokio::time::sleep(Duration::from_secs(2)).await;
    let ticket = c.h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let started = Instant::now();
    let carol = tokio::time::timeout(
        PATIENCE,
        c.h.login_from(peer(1), &ticket, "carol", PASSWORD, None),
    )
    .await;
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut alices = 0;
    for task in loops {
        alices += task.await.expect("join");
    }
    let most = most.await.expect("join");
    eprintln!("alice got {alices} answers, held {most} places at most; carol waited {took:?}");
    let carol = carol.unwrap_or_else(|_| {
        panic!("carol's first sign-in did not finish within {PATIENCE:?} beside one account's loop")
    });
    assert_eq!(carol.status, StatusCode::OK, "carol: {}", carol.text());
    assert!(alices > 0, "the account's loop got nothing through");
    assert!(
        (1..=DEFAULT_PER_USER).contains(&most),
        "alice held {most} places of the gate at once"
    );
}
