//! Two replicas on one local state directory racing rotations of one family: one rotation per generation, then a grace retry and a detected reuse.

use super::*;

struct LocalPair {
    _dir: tempfile::TempDir,
    a: Arc<Harness>,
    b: Arc<Harness>,
    state: PathBuf,
}

/// Two issuer replicas, each with its own `LocalStore` over one users and one state directory,
/// sharing keys, settings and one clock.
async fn local_pair() -> LocalPair {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    let state = dir.path().join("state");
    std::fs::create_dir_all(&users).unwrap();
    std::fs::write(users.join("alice.yaml"), user_yaml("alice", "[admin]")).unwrap();
    let seed = LocalStore::new(&users, &state);
    seed.write_credentials(
        "alice",
        &Version("absent".to_owned()),
        Some(&common::entry(false)),
    )
    .await
    .unwrap();
    let clock = Arc::new(ManualClock::new(common::start()));
    let ring = Arc::new(KeyRing::with_keys(
        ichor_issuer::keys::LoadedKeys::from_document(&common::first_document(common::start())).unwrap(),
    ));
    let settings = Arc::new(Settings::new(common::settings()));
    let make = || {
        Arc::new(replica(
            Arc::new(LocalStore::new(&users, &state)) as Arc<dyn UserStore>,
            Arc::new(MemoryStore::default()),
            Arc::clone(&ring),
            Arc::clone(&settings),
            Arc::clone(&clock),
        ))
    };
    LocalPair {
        a: make(),
        b: make(),
        _dir: dir,
        state,
    }
}

fn local_family(state: &Path, fam: &str) -> Option<u64> {
    let entries = parse_credentials_file(&state.join("credentials.json"));
    entries["alice"].family(fam).map(|f| f.generation)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_racing_rotations_of_one_family_make_one_rotation_per_generation() {
    let pair = local_pair().await;
    let mut token = refresh_of(&pair.a.cli_session("alice").await);
    let fam = family_of(&token);
    for round in 0..20u64 {
        let (a, b) = {
            let (ha, hb) = (Arc::clone(&pair.a), Arc::clone(&pair.b));
            let (ta, tb) = (token.clone(), token.clone());
            let a = tokio::spawn(async move { ha.refresh(&ta, "ichor-cli", None).await });
            let b = tokio::spawn(async move { hb.refresh(&tb, "ichor-cli", None).await });
            (a.await.unwrap(), b.await.unwrap())
        };
        assert_eq!(a.status, StatusCode::OK, "round {round} A: {}", a.text());
        assert_eq!(b.status, StatusCode::OK, "round {round} B: {}", b.text());
        let (sa, sb) = (refresh_of(&a.json()), refresh_of(&b.json()));
        assert_eq!(sa, sb, "round {round}: both replicas answer the one successor");
        assert_eq!(generation_of(&sa), round + 2);
        assert_eq!(
            local_family(&pair.state, &fam),
            Some(round + 2),
            "round {round}: exactly one rotation"
        );
        token = sa;
        pair.a.clock.advance(SignedDuration::from_secs(1));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_losing_token_of_a_replica_race_is_a_grace_retry_for_ten_seconds_then_a_detected_reuse() {
    let pair = local_pair().await;
    let first = refresh_of(&pair.a.cli_session("alice").await);
    let fam = family_of(&first);
    let (a, b) = {
        let (ha, hb) = (Arc::clone(&pair.a), Arc::clone(&pair.b));
        let (ta, tb) = (first.clone(), first.clone());
        let a = tokio::spawn(async move { ha.refresh(&ta, "ichor-cli", None).await });
        let b = tokio::spawn(async move { hb.refresh(&tb, "ichor-cli", None).await });
        (a.await.unwrap(), b.await.unwrap())
    };
    let successor = refresh_of(&a.json());
    assert_eq!(refresh_of(&b.json()), successor);
    // Within the grace window the losing (previous) token still gets the same successor on
    // either replica, and nothing is written.
    pair.a.clock.advance(SignedDuration::from_secs(9));
    for h in [&pair.a, &pair.b] {
        let again = h.refresh(&first, "ichor-cli", None).await;
        assert_eq!(again.status, StatusCode::OK, "{}", again.text());
        assert_eq!(refresh_of(&again.json()), successor);
    }
    assert_eq!(local_family(&pair.state, &fam), Some(2));
    // After it, the previous token on replica B is a reuse: the family is revoked for both.
    pair.a.clock.advance(SignedDuration::from_secs(1));
    let reuse = pair.b.refresh(&first, "ichor-cli", None).await;
    assert_eq!(reuse.status, StatusCode::BAD_REQUEST);
    assert_eq!(reuse.error(), "invalid_grant");
    assert!(reuse.text().contains("already used"), "{}", reuse.text());
    assert_eq!(
        local_family(&pair.state, &fam),
        None,
        "the family is revoked on disk"
    );
    let dead = pair.a.refresh(&successor, "ichor-cli", None).await;
    assert_eq!(
        dead.error(),
        "invalid_grant",
        "the successor is dead on replica A too"
    );
    assert!(
        pair.b
            .metrics()
            .contains("ichor_issuer_refresh_reuse_detections_total 1")
    );
}
