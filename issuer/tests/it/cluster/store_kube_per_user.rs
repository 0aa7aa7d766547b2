//! The Kubernetes store's per-user layout on the real apiserver (docs/credentials-sharding.md):
//! - a fresh installation (the namespace `ichor-credentials`, no legacy Secret): a first entry
//!   creates the user's own Secret, a refresh writes that one object and no other user's, two
//!   replicas rotating one family lose no rotation, and 10,000 users of three sessions fit (far
//!   past one Secret's 1 MiB) with a sign-in and a refresh still one write of one small object;
//! - the issuer's side of the migration from the legacy Secret: in phase `legacy` entries stay
//!   there and no per-user Secret appears; after the switch to `migrating` a write moves the
//!   entry, a store that read before the switch cannot write the legacy key and moves it on its
//!   retry, a removal leaves neither copy, a copy left by a move killed between its two steps is
//!   never read, and two replicas' rotations across the switch lose nothing.

use std::sync::Arc;

use ichor_issuer::store::kube::KubeStore;
use ichor_issuer::store::{Change, StoreError, UserStore, modify_credentials};
use ichor_renderers::auth::credentials::{CREDENTIALS_SECRET_NAME, CredentialsEntry};
use ichor_renderers::contract::{
    CREDENTIALS_LAYOUT_ANNOTATION, LAYOUT_LEGACY, LAYOUT_MIGRATING, USER_CREDENTIALS_TYPE, USER_LABEL,
    user_credentials_secret,
};
use ichor_testkit::control_plane::ControlPlane;
use ichor_testkit::install::{self, CREDENTIALS_NAMESPACE, ISSUER_SERVICE_ACCOUNT, NAMESPACE};
use jiff::Timestamp;
use serde_json::{Value, json};

use super::{
    FAMILY, bump, cluster, family_entry as entry, fresh_cluster, issuer_client, own_entry, runtime,
    stored_entry,
};

/// `entry()` at family generation `generation`.
fn at_generation(generation: u64) -> CredentialsEntry {
    let mut e = entry();
    e.families.get_mut(FAMILY).unwrap().generation = generation;
    e
}

async fn remove(store: &KubeStore, user: &str) -> anyhow::Result<()> {
    modify_credentials(store, user, |_| Ok::<_, StoreError>(Change::Remove(()))).await?;
    Ok(())
}

fn generation(entry: Option<CredentialsEntry>) -> Option<u64> {
    entry.map(|e| e.family(FAMILY).unwrap().generation)
}

/// The user's own Secret as the apiserver holds it.
fn own_secret(plane: &ControlPlane, user: &str) -> anyhow::Result<Option<Value>> {
    plane.get_json(0, "secret", CREDENTIALS_NAMESPACE, &user_credentials_secret(user))
}

/// Every write of a Secret the issuer's ServiceAccount made so far, as (verb, namespace, name).
fn issuer_writes(plane: &ControlPlane) -> anyhow::Result<Vec<(String, String, String)>> {
    let issuer = install::service_account_user(ISSUER_SERVICE_ACCOUNT);
    Ok(plane
        .audit_events()?
        .into_iter()
        .filter(|e| {
            e.stage == "ResponseComplete"
                && e.user.username == issuer
                && matches!(e.verb.as_str(), "create" | "patch" | "update" | "delete")
        })
        .filter_map(|e| {
            let o = e.object_ref?;
            (o.resource == "secrets").then_some((e.verb, o.namespace, o.name))
        })
        .collect())
}

/// The legacy Secret's phase annotation.
fn phase(plane: &ControlPlane) -> anyhow::Result<Value> {
    let secret = plane
        .get_json(0, "secret", NAMESPACE, CREDENTIALS_SECRET_NAME)?
        .ok_or_else(|| anyhow::anyhow!("no legacy Secret"))?;
    Ok(secret["metadata"]["annotations"][CREDENTIALS_LAYOUT_ANNOTATION].clone())
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn a_refresh_writes_one_object_under_16_kib_and_no_other_users() -> anyhow::Result<()> {
    let Some(plane) = fresh_cluster(&[])? else {
        return Ok(());
    };
    runtime(2)?.block_on(async {
        let store = KubeStore::new(issuer_client(&plane).await?);
        for user in ["alice", "bob", "carol"] {
            let (none, absent) = store.read_credentials(user).await?;
            assert_eq!((none, absent.0.as_str()), (None, "absent-user"), "{user}");
            let written = store.write_credentials(user, &absent, Some(&entry())).await?;
            assert_eq!(own_entry(&plane, user)?, Some(entry()));
            assert_eq!(
                store.read_credentials(user).await?.1,
                written,
                "the version is the object read"
            );
        }
        assert_eq!(
            plane.get_json(0, "secret", NAMESPACE, CREDENTIALS_SECRET_NAME)?,
            None,
            "a fresh installation gets no legacy Secret"
        );
        let alice = own_secret(&plane, "alice")?.unwrap();
        assert_eq!(alice["type"], USER_CREDENTIALS_TYPE);
        assert_eq!(alice["metadata"]["labels"][USER_LABEL], "alice");
        assert_eq!(
            alice["data"].as_object().unwrap().keys().collect::<Vec<_>>(),
            ["entry"]
        );

        let others = |plane: &ControlPlane| -> anyhow::Result<Vec<Value>> {
            ["bob", "carol"]
                .iter()
                .map(|u| Ok(own_secret(plane, u)?.unwrap()["metadata"]["resourceVersion"].clone()))
                .collect()
        };
        let (before, writes_before) = (others(&plane)?, issuer_writes(&plane)?.len());
        bump(&store, "alice").await?;
        let writes = issuer_writes(&plane)?.split_off(writes_before);
        assert_eq!(
            writes,
            [(
                "patch".to_owned(),
                CREDENTIALS_NAMESPACE.to_owned(),
                "ichor-user-alice".to_owned()
            )],
            "a refresh writes exactly the user's own Secret"
        );
        assert_eq!(others(&plane)?, before, "no other user's Secret changed");
        assert_eq!(generation(own_entry(&plane, "alice")?), Some(2));
        let stored = own_secret(&plane, "alice")?.unwrap();
        let bytes = serde_json::to_vec(&stored)?.len();
        eprintln!("the user's Secret after a refresh, as the apiserver holds it: {bytes} bytes of JSON");
        assert!(bytes < 16 * 1024, "{bytes} bytes");

        // A removal deletes the object; the next first entry creates it again.
        remove(&store, "alice").await?;
        assert_eq!(own_secret(&plane, "alice")?, None);
        let (none, absent) = store.read_credentials("alice").await?;
        assert_eq!((none, absent.0.as_str()), (None, "absent-user"));
        anyhow::Ok(())
    })
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn two_replicas_rotating_one_family_lose_no_rotation() -> anyhow::Result<()> {
    let Some(plane) = fresh_cluster(&[])? else {
        return Ok(());
    };
    runtime(4)?.block_on(async {
        let replicas = [
            Arc::new(KubeStore::new(issuer_client(&plane).await?)),
            Arc::new(KubeStore::new(issuer_client(&plane).await?)),
        ];
        let (_, absent) = replicas[0].read_credentials("alice").await?;
        replicas[0]
            .write_credentials("alice", &absent, Some(&entry()))
            .await?;
        let mut tasks = Vec::new();
        for store in &replicas {
            for _ in 0..3 {
                let store = Arc::clone(store);
                tasks.push(tokio::spawn(async move {
                    let mut asked_again = 0;
                    for _ in 0..5 {
                        asked_again += bump(&store, "alice").await?;
                    }
                    anyhow::Ok(asked_again)
                }));
            }
        }
        let mut asked_again = 0;
        for task in tasks {
            asked_again += task.await??;
        }
        assert_eq!(
            generation(own_entry(&plane, "alice")?),
            Some(1 + 2 * 3 * 5),
            "every rotation landed once"
        );
        // The store's own retries outlast the other replica's run of writes: at most a rare
        // refresh is the 503 its client asks again after.
        eprintln!("30 rotations on two replicas: {asked_again} asked again after a 503");
        assert!(asked_again <= 1, "{asked_again} of 30 rotations were a 503 first");
        anyhow::Ok(())
    })
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn the_issuer_keeps_the_legacy_layout_until_the_switch_then_moves_each_entry_it_writes() -> anyhow::Result<()>
{
    let seeded = [
        ("alice", entry()),
        ("bob", entry()),
        ("carol", entry()),
        ("dave", entry()),
    ];
    let entries: Vec<(&str, &CredentialsEntry)> = seeded.iter().map(|(n, e)| (*n, e)).collect();
    let Some(plane) = cluster(&[], &entries)? else {
        return Ok(());
    };
    runtime(2)?.block_on(async {
        let a = KubeStore::new(issuer_client(&plane).await?);
        let b = KubeStore::new(issuer_client(&plane).await?);

        // Phase `legacy` (added by the first read of a Secret without one): entries are written
        // where they are, a new user goes into the legacy Secret, no per-user Secret appears.
        bump(&a, "alice").await?;
        assert_eq!(phase(&plane)?, LAYOUT_LEGACY);
        assert_eq!(generation(stored_entry(&plane, "alice")?), Some(2));
        let (_, absent) = a.read_credentials("erin").await?;
        assert!(absent.0.starts_with("absent@"), "{absent:?}");
        a.write_credentials("erin", &absent, Some(&entry())).await?;
        assert_eq!(stored_entry(&plane, "erin")?, Some(entry()));
        for user in ["alice", "bob", "carol", "dave", "erin"] {
            assert_eq!(own_secret(&plane, user)?, None, "{user}");
        }

        // b reads bob, then the controller switches to `migrating`.
        let (bob, bob_read) = b.read_credentials("bob").await?;
        let patch = json!({"metadata": {"annotations": {CREDENTIALS_LAYOUT_ANNOTATION: LAYOUT_MIGRATING}}});
        let args = install::merge_patch_args("secret", CREDENTIALS_SECRET_NAME, &patch, false);
        plane.kubectl_run(&args.iter().map(String::as_str).collect::<Vec<_>>(), None)?;

        // b's legacy write under the old phase is refused whole: nothing written anywhere.
        let mut next = bob.unwrap();
        next.families.get_mut(FAMILY).unwrap().generation += 1;
        let err = b
            .write_credentials("bob", &bob_read, Some(&next))
            .await
            .expect_err("a legacy write after the switch");
        assert!(matches!(err, StoreError::Conflict(ref u) if u == "bob"), "{err}");
        assert_eq!(stored_entry(&plane, "bob")?, Some(entry()));
        assert_eq!(own_secret(&plane, "bob")?, None);

        // Retried from a fresh read, the write moves the entry: its own Secret, no legacy key.
        bump(&b, "bob").await?;
        assert_eq!(generation(own_entry(&plane, "bob")?), Some(2));
        assert_eq!(stored_entry(&plane, "bob")?, None);
        bump(&a, "alice").await?;
        assert_eq!(generation(own_entry(&plane, "alice")?), Some(3));
        assert_eq!(stored_entry(&plane, "alice")?, None);
        // Written where it now is.
        bump(&b, "alice").await?;
        assert_eq!(generation(own_entry(&plane, "alice")?), Some(4));

        // A stale move: b reads erin's legacy entry; a moves it, then erin is removed (her
        // legacy key first, then her own Secret); b's move finds no Secret of hers and creates
        // one from what it read. Its legacy remove then fails, so it deletes that Secret again
        // and answers a conflict: the removed entry does not come back.
        let (erin, erin_read) = b.read_credentials("erin").await?;
        bump(&a, "erin").await?;
        assert_eq!(generation(own_entry(&plane, "erin")?), Some(2));
        remove(&a, "erin").await?;
        assert_eq!(own_secret(&plane, "erin")?, None);
        let mut stale = erin.unwrap();
        stale.families.get_mut(FAMILY).unwrap().generation += 1;
        let err = b
            .write_credentials("erin", &erin_read, Some(&stale))
            .await
            .expect_err("a move from a read older than a removal");
        assert!(matches!(err, StoreError::Conflict(ref u) if u == "erin"), "{err}");
        assert_eq!(
            own_secret(&plane, "erin")?,
            None,
            "the stale copy was deleted again"
        );
        assert_eq!(stored_entry(&plane, "erin")?, None);
        assert_eq!(b.read_credentials("erin").await?.0, None);

        // A new user while migrating gets its own Secret.
        let (_, absent) = a.read_credentials("frank").await?;
        assert_eq!(absent.0, "absent-user");
        a.write_credentials("frank", &absent, Some(&entry())).await?;
        assert_eq!(own_entry(&plane, "frank")?, Some(entry()));
        assert_eq!(stored_entry(&plane, "frank")?, None);

        // A removal while migrating leaves neither copy: of a legacy entry, of a moved one.
        remove(&a, "carol").await?;
        assert_eq!(stored_entry(&plane, "carol")?, None);
        assert_eq!(own_secret(&plane, "carol")?, None);
        remove(&b, "bob").await?;
        assert_eq!(own_secret(&plane, "bob")?, None);

        // A move killed between its create and its legacy remove: dave's own Secret holds the
        // newer entry, the legacy key the older one. Readers take his own Secret; writes go there;
        // his removal takes the stale copy first, so it can never be read again.
        let value = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            at_generation(7).to_json("dave")?,
        );
        plane.apply(
            &json!({"apiVersion": "v1", "kind": "Secret", "type": USER_CREDENTIALS_TYPE,
                "metadata": {"name": user_credentials_secret("dave"), "namespace": CREDENTIALS_NAMESPACE,
                             "labels": {USER_LABEL: "dave"}},
                "data": {"entry": value}})
            .to_string(),
        )?;
        let (read, version) = a.read_credentials("dave").await?;
        assert_eq!(generation(read), Some(7));
        assert!(version.0.starts_with("user@"), "{version:?}");
        bump(&a, "dave").await?;
        assert_eq!(generation(own_entry(&plane, "dave")?), Some(8));
        assert_eq!(
            stored_entry(&plane, "dave")?,
            Some(entry()),
            "the stale copy is untouched"
        );
        remove(&b, "dave").await?;
        assert_eq!(stored_entry(&plane, "dave")?, None);
        assert_eq!(own_secret(&plane, "dave")?, None);
        let (none, _) = a.read_credentials("dave").await?;
        assert_eq!(none, None, "no copy comes back");

        assert_eq!(
            phase(&plane)?,
            LAYOUT_MIGRATING,
            "the issuer never changes a set phase"
        );
        anyhow::Ok(())
    })
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn rotations_on_two_replicas_across_the_switch_lose_nothing() -> anyhow::Result<()> {
    let Some(plane) = cluster(&[], &[("alice", &entry()), ("bob", &entry())])? else {
        return Ok(());
    };
    let plane = Arc::new(plane);
    runtime(4)?.block_on(async {
        let replicas = [
            Arc::new(KubeStore::new(issuer_client(&plane).await?)),
            Arc::new(KubeStore::new(issuer_client(&plane).await?)),
        ];
        let mut tasks = Vec::new();
        for store in &replicas {
            for user in ["alice", "alice", "bob"] {
                let store = Arc::clone(store);
                tasks.push(tokio::spawn(async move {
                    for _ in 0..8 {
                        bump(&store, user).await?;
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    }
                    anyhow::Ok(())
                }));
            }
        }
        // The switch lands while the rotations run (once each user rotated a few times in the
        // legacy Secret): the rotations before it, the moves, the rest in each user's own Secret.
        let switch = {
            let plane = Arc::clone(&plane);
            tokio::task::spawn_blocking(move || {
                ichor_testkit::wait::until(
                    "a few rotations in the legacy Secret",
                    std::time::Duration::from_secs(30),
                    || {
                        let (a, b) = (
                            generation(stored_entry(&plane, "alice")?),
                            generation(stored_entry(&plane, "bob")?),
                        );
                        Ok((a >= Some(3) && b >= Some(3)).then_some(()))
                    },
                )?;
                let patch =
                    json!({"metadata": {"annotations": {CREDENTIALS_LAYOUT_ANNOTATION: LAYOUT_MIGRATING}}});
                let args = install::merge_patch_args("secret", CREDENTIALS_SECRET_NAME, &patch, false);
                plane.kubectl_run(&args.iter().map(String::as_str).collect::<Vec<_>>(), None)
            })
        };
        switch.await??;
        for task in tasks {
            task.await??;
        }
        // One more each, after the switch: whoever was not moved yet is now.
        bump(&replicas[0], "alice").await?;
        bump(&replicas[1], "bob").await?;
        anyhow::Ok(())
    })?;
    assert_eq!(phase(&plane)?, LAYOUT_MIGRATING);
    assert_eq!(
        generation(own_entry(&plane, "alice")?),
        Some(1 + 2 * 2 * 8 + 1),
        "every rotation of alice landed once"
    );
    assert_eq!(generation(own_entry(&plane, "bob")?), Some(1 + 2 * 8 + 1));
    assert_eq!(stored_entry(&plane, "alice")?, None, "moved");
    assert_eq!(stored_entry(&plane, "bob")?, None, "moved");
    Ok(())
}

/// Users seeded for the scale test.
const MANY_USERS: usize = 10_000;

/// `entry()` with three sessions, as a user who signed in on three devices.
fn three_sessions() -> CredentialsEntry {
    let now: Timestamp = "2026-11-05T10:00:00Z".parse().unwrap();
    (2..=3).fold(entry(), |e, i| {
        e.start_family(
            &format!("fam{i}"),
            "ichor-cli",
            "ichor-kube",
            now,
            jiff::SignedDuration::from_hours(12),
        )
        .unwrap()
    })
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn ten_thousand_users_with_three_sessions_fit_sign_in_and_refresh() -> anyhow::Result<()> {
    let Some(plane) = fresh_cluster(&[])? else {
        return Ok(());
    };
    runtime(4)?.block_on(async {
        let store = Arc::new(KubeStore::new(issuer_client(&plane).await?));
        // Every user's first entry, 16 at a time: far past what one Secret of 1 MiB holds (about
        // 1,800 users of three sessions).
        let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let started = std::time::Instant::now();
        let mut workers = Vec::new();
        for _ in 0..16 {
            let (store, next) = (Arc::clone(&store), Arc::clone(&next));
            workers.push(tokio::spawn(async move {
                let entry = three_sessions();
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= MANY_USERS {
                        return anyhow::Ok(());
                    }
                    let user = format!("user-{i}");
                    let (_, absent) = store.read_credentials(&user).await?;
                    store.write_credentials(&user, &absent, Some(&entry)).await?;
                }
            }));
        }
        for worker in workers {
            worker.await??;
        }
        eprintln!(
            "{MANY_USERS} users of three sessions stored in {:?}",
            started.elapsed()
        );

        // A sign-in (a fourth session) and a refresh of users spread over all of them: each one
        // write of the user's own Secret, no other object.
        let now: Timestamp = "2026-11-05T11:00:00Z".parse().unwrap();
        for i in [0, MANY_USERS / 2, MANY_USERS - 1] {
            let user = format!("user-{i}");
            let writes_before = issuer_writes(&plane)?.len();
            modify_credentials(store.as_ref(), &user, |current| {
                let next = current
                    .ok_or(StoreError::Missing(user.clone()))?
                    .start_family(
                        "fam4",
                        "ichor-cli",
                        "ichor-kube",
                        now,
                        jiff::SignedDuration::from_hours(12),
                    )
                    .map_err(|e| StoreError::Unavailable(e.to_string()))?;
                Ok::<_, StoreError>(Change::Put(next, ()))
            })
            .await?;
            bump(&store, &user).await?;
            let writes = issuer_writes(&plane)?.split_off(writes_before);
            let name = user_credentials_secret(&user);
            assert_eq!(writes.len(), 2, "{user}: {writes:?}");
            assert!(
                writes
                    .iter()
                    .all(|(verb, ns, n)| verb == "patch" && ns == CREDENTIALS_NAMESPACE && *n == name),
                "{writes:?}"
            );
            let stored = own_entry(&plane, &user)?.unwrap();
            assert_eq!(stored.families.len(), 4, "{user}");
            assert_eq!(generation(Some(stored)), Some(2), "{user}");
            let bytes = serde_json::to_vec(&own_secret(&plane, &user)?.unwrap())?.len();
            assert!(bytes < 16 * 1024, "{user}: {bytes} bytes");
        }
        anyhow::Ok(())
    })
}
