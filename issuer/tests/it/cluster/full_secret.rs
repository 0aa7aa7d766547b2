//! The credentials Secret at the apiserver's 1 MiB limit: the real apiserver refuses a write that
//! would pass it, and the store reports that as a full store — not a transient failure — with
//! nothing written; writes that shrink the Secret still land, also when they were grouped into
//! one JSON Patch with a refused one; the size gauge follows every read and write.

use std::collections::BTreeMap;

use base64::Engine as _;
use ichor_issuer::store::kube::KubeStore;
use ichor_issuer::store::kube::size::SECRET_DATA_LIMIT;
use ichor_issuer::store::{StoreError, UserStore};
use ichor_renderers::auth::credentials::{CREDENTIALS_SECRET_NAME, CredentialsEntry};
use ichor_testkit::control_plane::ControlPlane;
use ichor_testkit::install::NAMESPACE;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use super::store::patches;
use super::{cluster, issuer_client, runtime, stored_entry};

/// Bytes left free under the limit: less than any growing write below adds.
const SLACK: u64 = 100;

fn now() -> Timestamp {
    "2026-11-05T10:00:00Z".parse().unwrap()
}

fn entry() -> CredentialsEntry {
    ichor_testkit::issuer::harness::cli_family_entry(
        "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$SECRETHASHVALUE",
        now(),
        "fam1",
        now(),
    )
}

/// `entry()` with five more sessions: about 650 bytes longer.
fn grown() -> CredentialsEntry {
    (2..=6).fold(entry(), |e, i| {
        e.start_family(
            &format!("fam{i}"),
            "ichor-cli",
            "ichor-kube",
            now(),
            SignedDuration::from_hours(12),
        )
        .unwrap()
    })
}

fn size_of(name: &str, entry: &CredentialsEntry) -> u64 {
    entry.to_json(name).unwrap().len() as u64
}

/// The Secret's `resourceVersion` and data as the apiserver holds them.
fn snapshot(plane: &ControlPlane) -> anyhow::Result<(Value, Value)> {
    let secret = plane
        .get_json(0, "secret", NAMESPACE, CREDENTIALS_SECRET_NAME)?
        .ok_or_else(|| anyhow::anyhow!("no credentials Secret"))?;
    Ok((
        secret["metadata"]["resourceVersion"].clone(),
        secret["data"].clone(),
    ))
}

fn is_full(result: &Result<ichor_issuer::store::Version, StoreError>) -> bool {
    matches!(result, Err(StoreError::Full(m))
        if m.contains("1048576") && m.contains("nothing was written") && m.contains("end unused sessions"))
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn a_full_secret_refuses_growing_writes_whole_and_keeps_taking_shrinking_ones() -> anyhow::Result<()> {
    let users = [("alice", entry()), ("bob", entry()), ("dave", entry())];
    let seeded: Vec<(&str, &CredentialsEntry)> = users.iter().map(|(n, e)| (*n, e)).collect();
    let Some(plane) = cluster(&[], &seeded)? else {
        return Ok(());
    };
    runtime(2)?.block_on(async {
        let client = issuer_client(&plane).await?;
        let store = KubeStore::new(client.clone());
        let growth = size_of("alice", &grown()) - size_of("alice", &entry());
        // A first entry does not fit; alice's growth does not fit even beside bob's removal.
        assert!(size_of("carol", &entry()) > SLACK && growth > SLACK + size_of("bob", &entry()));

        // Fill the Secret to SLACK bytes under the limit with one key no user has.
        let held: u64 = users.iter().map(|(n, e)| size_of(n, e)).sum();
        let filler = vec![b'x'; usize::try_from(SECRET_DATA_LIMIT - SLACK - held)?];
        let patch = json!({"data": {"filler": base64::engine::general_purpose::STANDARD.encode(&filler)}});
        Api::<Secret>::namespaced(client.clone(), NAMESPACE)
            .patch(
                CREDENTIALS_SECRET_NAME,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;

        // The gauge follows the read.
        let (_, alice_read) = store.read_credentials("alice").await?;
        assert_eq!(store.secret_size().bytes(), Some(SECRET_DATA_LIMIT - SLACK));
        assert!(
            store.secret_size().ratio() > 0.99,
            "{}",
            store.secret_size().ratio()
        );
        let before = snapshot(&plane)?;

        // A first entry (merge patch under the resourceVersion) and a growing one (JSON Patch):
        // both refused as full, and the Secret is exactly as it was.
        let (_, carol_absent) = store.read_credentials("carol").await?;
        let carol = store
            .write_credentials("carol", &carol_absent, Some(&entry()))
            .await;
        assert!(is_full(&carol), "{carol:?}");
        let alice = store
            .write_credentials("alice", &alice_read, Some(&grown()))
            .await;
        assert!(is_full(&alice), "{alice:?}");
        assert_eq!(snapshot(&plane)?, before, "nothing of a refused write is stored");
        assert_eq!(stored_entry(&plane, "alice")?, Some(entry()));
        assert_eq!(stored_entry(&plane, "carol")?, None);

        // While dave's same-size rewrite is in flight, alice's growing write and bob's removal
        // queue and go out together as one JSON Patch; the apiserver refuses it whole as too
        // long, and each is sent again alone: bob's lands, alice's is refused.
        let (_, dave_read) = store.read_credentials("dave").await?;
        let (_, bob_read) = store.read_credentials("bob").await?;
        let (same, more) = (entry(), grown());
        let sent = patches(&plane)?;
        let (dave, alice, bob) = tokio::join!(
            store.write_credentials("dave", &dave_read, Some(&same)),
            store.write_credentials("alice", &alice_read, Some(&more)),
            store.write_credentials("bob", &bob_read, None),
        );
        dave?;
        bob?;
        assert!(is_full(&alice), "{alice:?}");
        assert_eq!(
            patches(&plane)? - sent,
            4,
            "dave's patch, the grouped one refused, then alice's and bob's alone"
        );
        assert_eq!(stored_entry(&plane, "alice")?, Some(entry()));
        assert_eq!(stored_entry(&plane, "bob")?, None);
        assert_eq!(stored_entry(&plane, "dave")?, Some(entry()));
        let free = SLACK + size_of("bob", &entry());
        assert_eq!(store.secret_size().bytes(), Some(SECRET_DATA_LIMIT - free));

        // The room made takes a first entry refused before.
        let (_, carol_absent) = store.read_credentials("carol").await?;
        store
            .write_credentials("carol", &carol_absent, Some(&entry()))
            .await?;
        assert_eq!(stored_entry(&plane, "carol")?, Some(entry()));
        let data: BTreeMap<String, Value> = serde_json::from_value(snapshot(&plane)?.1)?;
        assert_eq!(
            data.keys().map(String::as_str).collect::<Vec<_>>(),
            ["alice", "carol", "dave", "filler"]
        );
        anyhow::Ok(())
    })
}
