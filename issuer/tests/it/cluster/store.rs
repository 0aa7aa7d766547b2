//! The Kubernetes store's credentials writes on the real Secret, decided by the real apiserver:
//! a first write adds one key under the Secret's resourceVersion, later writes test the key's
//! value as read; a stale value (422 from the JSON Patch `test`) and a moved resourceVersion (409)
//! are conflicts, another user's write in between is none; concurrent writers on two stores lose
//! no change, and one store's concurrent writes are grouped into few PATCHes; a missing Secret
//! and a corrupt entry are reported without any value.

use std::collections::BTreeMap;
use std::sync::Arc;

use ichor_issuer::store::kube::KubeStore;
use ichor_issuer::store::{StoreError, UserStore, Version};
use ichor_renderers::auth::credentials::{CREDENTIALS_SECRET_NAME, CredentialsEntry};
use ichor_testkit::install::NAMESPACE;
use jiff::Timestamp;

use super::{FAMILY, bump, cluster, family_entry as entry, issuer_client, runtime, stored_entry};

fn revoked(day: i8) -> CredentialsEntry {
    entry().revoke_all(Timestamp::from_second(1_762_387_200 + i64::from(day) * 86_400).unwrap())
}

/// The credentials PATCHes the apiserver has answered so far.
pub(super) fn patches(plane: &ichor_testkit::control_plane::ControlPlane) -> anyhow::Result<usize> {
    Ok(plane
        .audit_events()?
        .iter()
        .filter(|e| {
            e.verb == "patch"
                && e.stage == "ResponseComplete"
                && e.object_ref
                    .as_ref()
                    .is_some_and(|o| o.name == CREDENTIALS_SECRET_NAME)
        })
        .count())
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn credentials_writes_on_the_real_secret_touch_one_key_and_conflict_exactly_when_they_should()
-> anyhow::Result<()> {
    let Some(plane) = cluster(&[], &[("alice", &entry()), ("bob", &entry())])? else {
        return Ok(());
    };
    let runtime = runtime(2)?;
    runtime.block_on(async {
        let client = issuer_client(&plane).await?;
        let (a, b) = (KubeStore::new(client.clone()), KubeStore::new(client.clone()));

        // A first write of carol: her one key, under the Secret's resourceVersion.
        let (none, absent) = a.read_credentials("carol").await?;
        assert_eq!(none, None);
        assert!(absent.0.starts_with("absent@"), "{absent:?}");
        let written = a.write_credentials("carol", &absent, Some(&entry())).await?;
        assert_eq!(stored_entry(&plane, "carol")?, Some(entry()));
        assert_eq!(b.read_credentials("carol").await?.1, written, "the version is the value read");
        // The same resourceVersion again is a conflict (409): the Secret moved on.
        let err = b
            .write_credentials("dave", &absent, Some(&entry()))
            .await
            .expect_err("a write under a moved resourceVersion");
        assert!(matches!(err, StoreError::Conflict(ref u) if u == "dave"), "{err}");
        assert_eq!(stored_entry(&plane, "dave")?, None);

        // An update tests alice's value as read: bob's write in between is no conflict, her own
        // is (422 from the test), and nothing is written.
        let (_, alice_read) = a.read_credentials("alice").await?;
        let (_, bob_read) = b.read_credentials("bob").await?;
        b.write_credentials("bob", &bob_read, Some(&revoked(1))).await?;
        a.write_credentials("alice", &alice_read, Some(&revoked(2))).await?;
        assert_eq!(stored_entry(&plane, "alice")?, Some(revoked(2)));
        assert_eq!(stored_entry(&plane, "bob")?, Some(revoked(1)));
        let err = b
            .write_credentials("alice", &alice_read, Some(&revoked(3)))
            .await
            .expect_err("a write against a stale value");
        assert!(matches!(err, StoreError::Conflict(ref u) if u == "alice"), "{err}");
        assert_eq!(stored_entry(&plane, "alice")?, Some(revoked(2)));

        // Removing tests the value, then removes the one key.
        let (_, carol_read) = b.read_credentials("carol").await?;
        let gone = b.write_credentials("carol", &carol_read, None).await?;
        assert!(gone.0.starts_with("absent@"), "{gone:?}");
        assert_eq!(stored_entry(&plane, "carol")?, None);
        assert_eq!(stored_entry(&plane, "bob")?, Some(revoked(1)));

        // Versions that cannot be current are refused before any request.
        for version in ["absent@", "", "100", "entry"] {
            let err = a
                .write_credentials("bob", &Version(version.to_owned()), None)
                .await
                .expect_err(version);
            assert!(matches!(err, StoreError::Conflict(_)), "{version}: {err}");
        }
        assert_eq!(stored_entry(&plane, "bob")?, Some(revoked(1)));

        // Concurrent writers on two stores, two users: every change lands once.
        for user in ["alice", "bob"] {
            let (_, read) = a.read_credentials(user).await?;
            a.write_credentials(user, &read, Some(&entry())).await?;
        }
        let stores = [Arc::new(a), Arc::new(b)];
        let mut tasks = Vec::new();
        for (i, store) in stores.iter().enumerate() {
            for task in 0..3 {
                let store = Arc::clone(store);
                let user = if (i + task) % 3 == 0 { "bob" } else { "alice" };
                tasks.push(tokio::spawn(async move {
                    for _ in 0..5 {
                        bump(&store, user).await?;
                    }
                    anyhow::Ok(user)
                }));
            }
        }
        let mut expected: BTreeMap<&str, u64> = BTreeMap::from([("alice", 1), ("bob", 1)]);
        for task in tasks {
            *expected.get_mut(task.await??).unwrap() += 5;
        }
        for (user, generation) in expected {
            let stored = stored_entry(&plane, user)?.unwrap();
            assert_eq!(stored.family(FAMILY).unwrap().generation, generation, "{user}");
        }

        // Writes made while one is in flight go out together: 32 users' concurrent writes from
        // one store are far fewer PATCHes, and each lands.
        let users: Vec<String> = (0..32).map(|i| format!("group-{i}")).collect();
        for user in &users {
            let (_, absent) = stores[0].read_credentials(user).await?;
            stores[0].write_credentials(user, &absent, Some(&entry())).await?;
        }
        let before = patches(&plane)?;
        let mut tasks = Vec::new();
        for user in users.clone() {
            let store = Arc::clone(&stores[0]);
            tasks.push(tokio::spawn(async move { bump(&store, &user).await }));
        }
        for task in tasks {
            task.await??;
        }
        let sent = patches(&plane)? - before;
        eprintln!("32 concurrent entry writes: {sent} PATCH requests");
        assert!(sent < 16, "32 concurrent writes took {sent} PATCHes");
        for user in &users {
            let stored = stored_entry(&plane, user)?.unwrap();
            assert_eq!(stored.family(FAMILY).unwrap().generation, 2, "{user}");
        }

        // A corrupt entry is named, its content is not.
        let bad = br#"{"v":1,"hash":"$argon2id$LEAKEDHASH","notBefore":"2026-11-05T10:00:00Z","mustChange":"LEAKED"}"#;
        let corrupt = serde_json::json!({"data": {"erin": base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            bad
        )}});
        let args = ichor_testkit::install::merge_patch_args("secret", CREDENTIALS_SECRET_NAME, &corrupt, false);
        plane.kubectl_run(&args.iter().map(String::as_str).collect::<Vec<_>>(), None)?;
        let err = stores[0].read_credentials("erin").await.expect_err("a corrupt entry");
        assert!(matches!(err, StoreError::Corrupt { ref user, .. } if user == "erin"), "{err}");
        assert!(!err.to_string().contains("LEAKED"), "{err}");

        // Without the legacy Secret, a read finds the per-user layout of a fresh installation
        // (no entry: a first one creates the user's own Secret); a write against a legacy
        // version is missing.
        plane.kubectl_run(
            &["delete", "secret", CREDENTIALS_SECRET_NAME, "-n", NAMESPACE],
            None,
        )?;
        let (none, absent) = stores[0].read_credentials("alice").await?;
        assert_eq!((none, absent.0.as_str()), (None, "absent-user"));
        let err = stores[1]
            .write_credentials("alice", &Version("absent@1".to_owned()), Some(&entry()))
            .await
            .expect_err("no Secret");
        assert!(matches!(err, StoreError::Missing(_)), "{err}");
        anyhow::Ok(())
    })
}
