//! One user with many sessions: all of them refreshing flat out wait for their turns and get no
//! 503; a request that is answered 503 (the user's line full, or every write a conflict) wrote
//! nothing, so its retry with the same token succeeds; and the sign-in that ends the oldest of
//! the most families a user may have says so, in the log and in a metric.

use std::net::{Ipv4Addr, SocketAddr};

use super::*;
use ichor_issuer::store::{Change, MAX_CONFLICT_RETRIES, StoreError, modify_credentials};
use ichor_renderers::auth::credentials::MAX_FAMILIES;
use ichor_testkit::issuer::logs;

/// How long the sessions refresh flat out.
const FLAT_OUT: Duration = Duration::from_secs(10);
/// Grants per client address before the next one (the per-source bucket's burst is 60).
const PER_ADDRESS: usize = 50;

/// The issuer over a real local store holding alice (see [`common::entry`]), and that store.
async fn local_issuer(store: LocalStore, root: &Path) -> (Arc<Harness>, Arc<LocalStore>) {
    let users = root.join("users");
    std::fs::create_dir_all(&users).unwrap();
    std::fs::write(users.join("alice.yaml"), user_yaml("alice", "[admin]")).unwrap();
    store
        .write_credentials(
            "alice",
            &Version("absent".to_owned()),
            Some(&common::entry(false)),
        )
        .await
        .unwrap();
    let store = Arc::new(store);
    let clock = Arc::new(ManualClock::new(common::start()));
    let ring = Arc::new(KeyRing::with_keys(
        ichor_issuer::keys::LoadedKeys::from_document(&common::first_document(common::start())).unwrap(),
    ));
    let harness = replica(
        Arc::clone(&store) as Arc<dyn UserStore>,
        Arc::new(MemoryStore::default()),
        ring,
        Arc::new(Settings::new(common::settings())),
        clock,
    );
    (Arc::new(harness), store)
}

fn local_store(root: &Path) -> LocalStore {
    LocalStore::new(root.join("users"), root.join("state"))
}

/// Gives alice `n` sessions (`s00`, `s01`, …), started one second apart before `start`, and
/// returns each session's refresh token.
pub(crate) fn sessions(
    h: &Harness,
    base: &CredentialsEntry,
    n: usize,
) -> (CredentialsEntry, Vec<(String, String)>) {
    let mut entry = base.clone();
    for i in 0..n {
        let at = common::start() - SignedDuration::from_secs(i64::try_from(n - i).unwrap());
        entry = entry
            .start_family(
                &format!("s{i:02}"),
                "ichor-cli",
                "ichor-kube",
                at,
                SignedDuration::from_hours(12),
            )
            .unwrap();
    }
    let tokens = (0..n)
        .map(|i| {
            let fam = format!("s{i:02}");
            let token = h.mint_refresh("alice", &fam, entry.family(&fam).unwrap());
            (fam, token)
        })
        .collect();
    (entry, tokens)
}

/// The client address of the `n`-th batch of grants of session `session`.
pub(crate) fn peer(session: usize, n: usize) -> SocketAddr {
    let batch = n / PER_ADDRESS;
    let octets = [
        10,
        u8::try_from(session).unwrap(),
        u8::try_from(batch >> 8).unwrap(),
        u8::try_from(batch & 0xff).unwrap(),
    ];
    SocketAddr::from((Ipv4Addr::from(octets), 40000))
}

/// What one session saw while refreshing flat out.
#[derive(Default)]
struct Seen {
    granted: u64,
    unavailable: u64,
    last: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_concurrent_changes_of_one_users_entry_each_run_once_without_a_conflict() {
    let root = tempfile::tempdir().unwrap();
    let store = Arc::new(local_store(root.path()));
    let seeded = common::cli_family_entry(&common::password_hash(), common::start(), "f", common::start());
    store
        .write_credentials("alice", &Version("absent".to_owned()), Some(&seeded))
        .await
        .unwrap();
    let attempts = Arc::new(AtomicUsize::new(0));
    let changes: Vec<_> = (0..64)
        .map(|_| {
            let (store, attempts) = (Arc::clone(&store), Arc::clone(&attempts));
            tokio::spawn(async move {
                modify_credentials(store.as_ref(), "alice", |current| {
                    attempts.fetch_add(1, Ordering::SeqCst);
                    let mut next = current.cloned().unwrap();
                    next.families.get_mut("f").unwrap().generation += 1;
                    Ok::<_, StoreError>(Change::Put(next, ()))
                })
                .await
            })
        })
        .collect();
    for change in changes {
        change.await.unwrap().unwrap();
    }
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        64,
        "no change was read again after a conflict"
    );
    let (entry, _) = store.read_credentials("alice").await.unwrap();
    assert_eq!(
        entry.unwrap().family("f").unwrap().generation,
        65,
        "no change was lost"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_two_sessions_of_one_user_refreshing_flat_out_get_no_503_and_lose_no_session() {
    let root = tempfile::tempdir().unwrap();
    let (h, store) = local_issuer(local_store(root.path()), root.path()).await;
    let (entry, tokens) = sessions(&h, &common::entry(false), MAX_FAMILIES);
    let (_, version) = store.read_credentials("alice").await.unwrap();
    store
        .write_credentials("alice", &version, Some(&entry))
        .await
        .unwrap();

    let deadline = Instant::now() + FLAT_OUT;
    let tasks: Vec<_> = tokens
        .into_iter()
        .enumerate()
        .map(|(i, (fam, token))| {
            let h = Arc::clone(&h);
            tokio::spawn(async move {
                let mut seen = Seen {
                    last: token,
                    ..Seen::default()
                };
                let mut n = 0;
                while Instant::now() < deadline {
                    let reply = h.refresh_from(&seen.last, peer(i, n)).await;
                    n += 1;
                    match reply.status {
                        StatusCode::OK => {
                            seen.granted += 1;
                            seen.last = refresh_of(&reply.json());
                        }
                        // Retried at once with the same token, as an impatient client would.
                        StatusCode::SERVICE_UNAVAILABLE => seen.unavailable += 1,
                        // The family's ceilings (20 grants a second; 20 rotations, then one per
                        // 10 s) refill with time, which this frozen clock has only when asked:
                        // a second, as `Retry-After` says.
                        StatusCode::TOO_MANY_REQUESTS => h.clock.advance(SignedDuration::from_secs(1)),
                        other => panic!("session {fam}: {other} {}", reply.text()),
                    }
                }
                (fam, seen)
            })
        })
        .collect();
    let mut seen = Vec::new();
    for task in tasks {
        seen.push(task.await.unwrap());
    }

    let unavailable: u64 = seen.iter().map(|(_, s)| s.unavailable).sum();
    let granted: u64 = seen.iter().map(|(_, s)| s.granted).sum();
    assert_eq!(unavailable, 0, "no 503 in {granted} grants");
    let (stored, _) = store.read_credentials("alice").await.unwrap();
    let stored = stored.unwrap();
    // Long enough for every session's write cap to give one more rotation.
    h.clock.advance(SignedDuration::from_secs(10));
    for (fam, s) in &seen {
        assert!(s.granted > 0, "session {fam} was served");
        assert_eq!(
            stored.family(fam).map(|f| f.generation),
            Some(1 + s.granted),
            "session {fam}: one stored rotation per grant"
        );
        let last = h.refresh_from(&s.last, peer(200, 0)).await;
        assert_eq!(
            last.status,
            StatusCode::OK,
            "session {fam} still works: {}",
            last.text()
        );
    }
    assert_eq!(store.user_queue().unwrap().users(), 0, "no line left behind");
}

#[tokio::test]
async fn a_refresh_refused_because_the_users_line_is_full_wrote_nothing_and_its_retry_succeeds() {
    let root = tempfile::tempdir().unwrap();
    let (h, store) = local_issuer(local_store(root.path()).with_max_waiting_per_user(0), root.path()).await;
    let (entry, tokens) = sessions(&h, &common::entry(false), 1);
    let (_, version) = store.read_credentials("alice").await.unwrap();
    store
        .write_credentials("alice", &version, Some(&entry))
        .await
        .unwrap();
    let (fam, token) = tokens.into_iter().next().unwrap();

    // Another change of alice's credentials is in progress, and nobody may wait behind it.
    let turn = store.user_queue().unwrap().enter("alice").await.unwrap().unwrap();
    let refused = h.refresh_from(&token, peer(0, 0)).await;
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        refused.text()
    );
    assert_eq!(refused.error(), "temporarily_unavailable");
    assert_eq!(refused.headers["retry-after"], "1");
    let (after, _) = store.read_credentials("alice").await.unwrap();
    assert_eq!(after.as_ref(), Some(&entry), "nothing was written");

    drop(turn);
    let retried = h.refresh_from(&token, peer(0, 1)).await;
    assert_eq!(retried.status, StatusCode::OK, "{}", retried.text());
    assert_eq!(generation_of(&refresh_of(&retried.json())), 2);
    let (after, _) = store.read_credentials("alice").await.unwrap();
    assert_eq!(after.unwrap().family(&fam).unwrap().generation, 2);
}

#[tokio::test]
async fn a_refresh_whose_every_write_conflicted_is_a_503_that_wrote_nothing_and_its_retry_succeeds() {
    let h = Harness::new();
    let (entry, tokens) = sessions(&h, &h.store.entry("alice").unwrap(), 1);
    h.store.set_entry("alice", entry.clone());
    let (fam, token) = tokens.into_iter().next().unwrap();

    // Another replica wins every compare of the first attempt and of each retry.
    let attempts = u64::try_from(MAX_CONFLICT_RETRIES + 1).unwrap();
    h.store.conflicts.store(attempts, Ordering::SeqCst);
    let refused = h.refresh(&token, "ichor-cli", None).await;
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        refused.text()
    );
    assert_eq!(refused.error(), "temporarily_unavailable");
    assert_eq!(
        h.store.conflicts.load(Ordering::SeqCst),
        0,
        "every attempt was made"
    );
    assert_eq!(h.store.entry("alice"), Some(entry), "nothing was written");

    let retried = h.refresh(&token, "ichor-cli", None).await;
    assert_eq!(retried.status, StatusCode::OK, "{}", retried.text());
    assert_eq!(generation_of(&refresh_of(&retried.json())), 2);
    assert_eq!(
        h.store.entry("alice").unwrap().family(&fam).unwrap().generation,
        2
    );
}

#[tokio::test]
async fn a_sign_in_past_the_most_sessions_ends_the_oldest_and_logs_and_counts_it() {
    let h = Harness::new();
    let (entry, tokens) = sessions(&h, &h.store.entry("alice").unwrap(), MAX_FAMILIES);
    h.store.set_entry("alice", entry);
    assert!(
        h.metrics()
            .contains("ichor_issuer_refresh_families_evicted_total 0")
    );

    let logs = logs::capture();
    let fresh = refresh_of(&h.cli_session("alice").await);
    let logged = logs.text();

    assert!(
        h.metrics()
            .contains("ichor_issuer_refresh_families_evicted_total 1"),
        "{}",
        h.metrics()
    );
    let stored = h.store.entry("alice").unwrap();
    assert_eq!(stored.families.len(), MAX_FAMILIES);
    assert!(stored.family("s00").is_none(), "the oldest session was ended");
    assert!(stored.family(&family_of(&fresh)).is_some());
    let line = logged
        .lines()
        .find(|l| l.contains("oldest session was ended"))
        .unwrap_or_else(|| panic!("no eviction line in:\n{logged}"));
    assert!(
        line.contains("user=alice") && line.contains("family=s00"),
        "{line}"
    );
    for (_, token) in &tokens {
        assert!(!logged.contains(token.as_str()), "no refresh token is logged");
    }
    assert!(!logged.contains(&fresh), "no refresh token is logged");

    let ended = h.refresh(&tokens[0].1, "ichor-cli", None).await;
    assert_eq!(ended.error(), "invalid_grant", "{}", ended.text());
    let kept = h.refresh(&tokens[1].1, "ichor-cli", None).await;
    assert_eq!(kept.status, StatusCode::OK, "{}", kept.text());
    assert!(
        h.metrics()
            .contains("ichor_issuer_refresh_families_evicted_total 1")
    );
}
