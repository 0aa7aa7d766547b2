//! A signed-in user floods `ChangeOwnPassword` and cancels every call after 150 ms, shorter than
//! one argon2id computation (64 MiB): a computation must keep its place in the process's one
//! password gate until it really ends, so the process never runs more argon2id at once than the
//! gate allows, its memory stays within that many hashes, and another user still signs in during
//! the flood. Once in process (the computations counted as they run) and once against the real
//! `ichor-issuer` binary (its resident memory read from `/proc`).

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use super::composed::{MIB, composed, peak_rss_kib, peer, reset_peak, rss_kib};
use crate::conformance_common::{Options, PASSWORD, RunningIssuer};
use axum::http::StatusCode;
use ichor_issuer::{
    api::proto::ChangeOwnPasswordRequest,
    oidc::{HASH_PERMITS, devices::LANE_PERMITS, hash_pools},
};
use ichor_testkit::issuer::harness::UI_REDIRECT;

/// The client's deadline: shorter than one argon2id computation.
const DEADLINE: Duration = Duration::from_millis(150);
/// How long the flood lasts at most.
const FLOOD: Duration = Duration::from_secs(5);
/// Calls in flight at once.
const CALLERS: usize = 12;
/// Calls cancelled in all: where nothing bounds the computations, each may leave one running,
/// so this keeps the machine usable when the test fails (about 2 GiB).
const CALLS: usize = 2 * CALLERS;
/// When another user signs in, after the flood began.
const SIGN_IN_AT: Duration = Duration::from_millis(300);
/// Carol's device: another loopback address than the flood's 127.0.0.1.
const CAROL: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));
/// One argon2id computation's memory, KiB.
const HASH_KIB: u64 = 64 * MIB;
/// The most argon2id computations a process may run at once: the shared permits and the known
/// devices' lane.
const BOUND: u64 = (HASH_PERMITS + LANE_PERMITS) as u64;
/// What the process may grow by during the flood: its bound of hashes and one more for the
/// allocator and the tasks.
const ALLOWED_GROWTH_KIB: u64 = (BOUND + 1) * HASH_KIB;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancelled_password_changes_never_run_more_argon2id_at_once_than_the_gate_allows() {
    let c = Arc::new(composed().await);
    // One sign-in first, so the pools and the caches exist before the baseline is taken.
    let ticket = c.h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let reply = c.h.login_from(peer(1), &ticket, "bob", PASSWORD, None).await;
    assert_eq!(
        reply.status,
        StatusCode::UNAUTHORIZED,
        "bob is not in the issuer's store"
    );
    let baseline = rss_kib("self");
    reset_peak("self");

    let calls = Arc::new(AtomicUsize::new(0));
    let end = Instant::now() + FLOOD;
    let flood: Vec<_> = (0..CALLERS)
        .map(|i| {
            let (c, calls) = (Arc::clone(&c), Arc::clone(&calls));
            tokio::spawn(async move {
                let mut cancelled = 0_usize;
                while Instant::now() < end && calls.load(Ordering::Relaxed) < CALLS {
                    let call = c.change_own_password("alice", peer(100 + i), PASSWORD, PASSWORD);
                    match tokio::time::timeout(DEADLINE, call).await {
                        Err(_) => {
                            calls.fetch_add(1, Ordering::Relaxed);
                            cancelled += 1;
                        }
                        // Refused at once (the gate is full): try again at once, as a flood does.
                        Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                    }
                }
                cancelled
            })
        })
        .collect();

    // Carol signs in from a device of her own in the middle of the flood.
    tokio::time::sleep(SIGN_IN_AT).await;
    let ticket = c.h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
    let started = Instant::now();
    let reply = c.h.login_from(peer(2), &ticket, "carol", PASSWORD, None).await;
    let took = started.elapsed();

    let mut cancelled = 0;
    for task in flood {
        cancelled += task.await.expect("join");
    }
    // Let the computations the flood started end.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let growth = peak_rss_kib("self").saturating_sub(baseline);
    eprintln!(
        "{cancelled} calls cancelled; peak growth {} MiB; {} argon2id at once at most; carol in {took:?}",
        growth / MIB,
        hash_pools::peak_running(),
    );
    assert!(cancelled >= CALLERS, "the flood cancelled only {cancelled} calls");
    assert!(
        growth <= ALLOWED_GROWTH_KIB,
        "the process grew by {} MiB during the flood: more than {BOUND} argon2id computations ran at once",
        growth / MIB
    );
    assert!(
        hash_pools::peak_running() <= BOUND as usize,
        "{} argon2id computations ran at once; the gate allows {BOUND}",
        hash_pools::peak_running()
    );
    assert!(
        hash_pools::peak_running() >= 1,
        "the flood's computations did not go through the gate at all"
    );
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "carol during the flood: {}",
        reply.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancelled_password_changes_keep_the_real_issuers_memory_within_its_argon2id_bound() {
    let issuer = RunningIssuer::start_for(Options::default(), &["alice", "carol"]).await;
    let pid = issuer.child.id().to_string();
    let ui = issuer
        .sign_in("alice", PASSWORD, Some("ichor-ui"))
        .await
        .expect("alice signs in for the UI");
    let id_token = ui["id_token"].as_str().expect("id_token").to_owned();
    // Connections of eight streams each (the listener's stream cap per connection).
    let mut clients = Vec::new();
    for _ in 0..CALLERS.div_ceil(8) {
        clients.push(issuer.user_service(&id_token).await);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let baseline = rss_kib(&pid);
    reset_peak(&pid);

    let calls = Arc::new(AtomicUsize::new(0));
    let end = Instant::now() + FLOOD;
    let flood: Vec<_> = (0..CALLERS)
        .map(|i| {
            let mut client = clients[i % clients.len()].clone();
            let calls = Arc::clone(&calls);
            tokio::spawn(async move {
                let mut cancelled = 0_usize;
                while Instant::now() < end && calls.load(Ordering::Relaxed) < CALLS {
                    let call = client.change_own_password(ChangeOwnPasswordRequest {
                        old_password: PASSWORD.to_owned(),
                        new_password: PASSWORD.to_owned(),
                        code: String::new(),
                    });
                    // The deadline passes: the client drops the call (HTTP/2 RST_STREAM).
                    match tokio::time::timeout(DEADLINE, call).await {
                        Err(_) => {
                            calls.fetch_add(1, Ordering::Relaxed);
                            cancelled += 1;
                        }
                        Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                    }
                }
                cancelled
            })
        })
        .collect();

    // Carol signs in from an address of her own: the flood's reservations hold its address's
    // failure bucket (127.0.0.1, ten at once) while they run, as they would behind any address.
    tokio::time::sleep(SIGN_IN_AT).await;
    let carol = issuer.sign_in_from(CAROL, "carol", PASSWORD, None).await;

    let mut cancelled = 0;
    for task in flood {
        cancelled += task.await.expect("join");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let growth = peak_rss_kib(&pid).saturating_sub(baseline);
    eprintln!(
        "{cancelled} calls cancelled; the issuer's peak growth {} MiB (baseline {} MiB)",
        growth / MIB,
        baseline / MIB
    );
    assert!(cancelled >= CALLERS, "the flood cancelled only {cancelled} calls");
    assert!(
        growth <= ALLOWED_GROWTH_KIB,
        "the issuer grew by {} MiB during the flood: more than {BOUND} argon2id computations ran at once",
        growth / MIB
    );
    assert!(
        growth >= HASH_KIB / 2,
        "the issuer grew by only {} MiB: the flood ran no argon2id at all",
        growth / MIB
    );
    carol.expect("carol signs in during the flood");
    // And after it.
    issuer
        .sign_in_from(CAROL, "carol", PASSWORD, None)
        .await
        .expect("carol signs in after the flood");
}
