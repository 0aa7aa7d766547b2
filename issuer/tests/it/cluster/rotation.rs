//! Two in-process issuers, each with its own `KubeStore`, race refresh rotations of one family,
//! in the legacy credentials Secret and in the user's own Secret (the apiserver's own
//! resourceVersion conflicts): each generation is rotated exactly once and both answer the one
//! successor; after the grace window the losing token is a detected reuse that revokes the family
//! in the Secret. The `UserService` backend
//! writes `IchorUser`s as the caller through real impersonation, so the apiserver's RBAC refuses
//! what the caller may not do. The chart grants every request made.

use std::sync::Arc;

use axum::http::StatusCode;
use ichor_issuer::api::{ApiError, UserBackend};
use ichor_issuer::keys::{KeyRing, LoadedKeys};
use ichor_issuer::oidc::Settings;
use ichor_issuer::store::UserStore;
use ichor_issuer::store::kube::KubeStore;
use ichor_renderers::auth::credentials::{CREDENTIALS_SECRET_NAME, CredentialsEntry};
use ichor_renderers::crd::{IchorUser, IchorUserSpec};
use ichor_testkit::control_plane::ControlPlane;
use ichor_testkit::install::{self, ISSUER_SERVICE_ACCOUNT, NAMESPACE};
use jiff::SignedDuration;
use serde_json::json;

use super::{cluster, fresh_cluster, issuer_client, own_entry, refresh_of, roles, runtime, stored_entry};
use crate::api_common::caller;
use crate::common::{self, Harness, ManualClock, MemoryStore, claims, replica};

const ROUNDS: u64 = 12;

/// Where a user's entry is, as the apiserver holds it: a key of the legacy Secret
/// ([`stored_entry`]) or the user's own Secret ([`own_entry`]).
type Holder = fn(&ControlPlane, &str) -> anyhow::Result<Option<CredentialsEntry>>;

/// The generation of family `fam` of alice's entry, as the apiserver holds it in `holder`.
fn generation(plane: &ControlPlane, holder: Holder, fam: &str) -> anyhow::Result<Option<u64>> {
    Ok(holder(plane, "alice")?.and_then(|e| e.family(fam).map(|f| f.generation)))
}

fn person(name: &str, roles: &[&str]) -> IchorUser {
    let mut user = IchorUser::new(
        name,
        IchorUserSpec {
            display_name: Some(name.to_owned()),
            email: None,
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
            disabled: false,
        },
    );
    user.metadata.namespace = Some(NAMESPACE.into());
    user
}

/// The `UserService` backend's writes as the caller: an admin creates, changes and deletes a
/// user; an operator, whom the chart's roles do not let write IchorUsers, is refused by the
/// apiserver, which names the impersonated caller.
async fn writes_as_the_caller(plane: &ControlPlane, store: &KubeStore) -> anyhow::Result<()> {
    let admin = caller("alice", &["admin"]);
    store.create_user(&admin, &person("bob", &["viewer"])).await?;
    assert_eq!(roles(plane, "bob")?, Some(json!(["viewer"])));
    store
        .update_user(&admin, &person("bob", &["operator", "viewer"]))
        .await?;
    assert_eq!(roles(plane, "bob")?, Some(json!(["operator", "viewer"])));
    let refused = store
        .create_user(&caller("carol", &["operator"]), &person("dave", &["viewer"]))
        .await;
    match refused {
        Err(ApiError::Denied(message)) => {
            assert!(
                message.contains("ichor:carol"),
                "the apiserver names the caller: {message}"
            );
        }
        other => anyhow::bail!("an operator created a user: {other:?}"),
    }
    assert_eq!(roles(plane, "dave")?, None, "nothing was written");

    // The apiserver's other answers, as the API maps them.
    match store.create_user(&admin, &person("bob", &["viewer"])).await {
        Err(ApiError::AlreadyExists(name)) => assert_eq!(name, "bob"),
        other => anyhow::bail!("a second bob: {other:?}"),
    }
    match store.update_user(&admin, &person("ghost", &["viewer"])).await {
        Err(ApiError::NotFound(name)) => assert_eq!(name, "ghost"),
        other => anyhow::bail!("an update of nobody: {other:?}"),
    }
    match store.delete_user(&admin, "ghost").await {
        Err(ApiError::NotFound(name)) => assert_eq!(name, "ghost"),
        other => anyhow::bail!("a delete of nobody: {other:?}"),
    }
    match store.create_user(&admin, &person("frank", &["Admin"])).await {
        Err(ApiError::InvalidArgument { field, reason }) => {
            assert!(
                field.starts_with("spec.roles"),
                "the CRD's field: {field} ({reason})"
            );
        }
        other => anyhow::bail!("a role the CRD refuses: {other:?}"),
    }
    match store.delete_user(&caller("vic", &["viewer"]), "bob").await {
        Err(ApiError::Denied(message)) => {
            assert!(message.contains("cannot delete resource"), "{message}");
        }
        other => anyhow::bail!("a viewer deleted a user: {other:?}"),
    }
    store.delete_user(&admin, "bob").await?;
    assert_eq!(roles(plane, "bob")?, None);

    // The undo of a create (its credentials write failed) removes only the object it created:
    // an erin deleted and created again by someone else meanwhile (another uid) stays.
    let created = store.create_user(&admin, &person("erin", &["viewer"])).await?;
    assert!(
        created.uid.is_some(),
        "the apiserver names the created object's uid"
    );
    plane.kubectl_run(&["delete", "ichoruser", "erin", "-n", NAMESPACE], None)?;
    store.create_user(&admin, &person("erin", &["operator"])).await?;
    match store.undo_create(&admin, "erin", &created).await {
        Err(ApiError::Conflict(message)) => assert!(message.contains("left in place"), "{message}"),
        other => anyhow::bail!("the undo of another erin: {other:?}"),
    }
    assert_eq!(
        roles(plane, "erin")?,
        Some(json!(["operator"])),
        "the new erin stays"
    );
    let created = store.create_user(&admin, &person("fay", &["viewer"])).await?;
    store.undo_create(&admin, "fay", &created).await?;
    assert_eq!(roles(plane, "fay")?, None, "the created fay is removed");
    Ok(())
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn two_kube_store_replicas_rotate_each_generation_once_on_the_real_secret_and_detect_reuse()
-> anyhow::Result<()> {
    let Some(plane) = cluster(&[("alice", "admin")], &[("alice", &common::entry(false))])? else {
        return Ok(());
    };
    let runtime = runtime(4)?;
    runtime.block_on(async {
        let client = issuer_client(&plane).await?;
        race_and_reuse(&plane, &client, stored_entry).await?;
        writes_as_the_caller(&plane, &KubeStore::new(client.clone())).await?;
        anyhow::Ok(())
    })?;

    // The store's requests, all granted by the chart's issuer Role.
    let usage = install::chart_rbac_usage(&plane, ISSUER_SERVICE_ACCOUNT)?;
    // The rest of the issuer's grants (access reviews, IchorInstallation) belong to the binary's
    // other parts, not to the store (tests/cluster/processes.rs checks the whole).
    eprintln!(
        "kube store requests: {:#?}\nnot used by the store: {:#?}",
        usage.requests, usage.unused
    );
    assert!(
        !usage.requests.is_empty(),
        "the store made no request as its ServiceAccount"
    );
    usage.check_granted("the kube store")?;
    Ok(())
}

/// Two replicas race the rotations of one family of alice's entry, held in `holder`, for
/// [`ROUNDS`] rounds: each generation is rotated once and both answer the one successor; past the
/// grace window the previous token is a detected reuse that revokes the family for both.
async fn race_and_reuse(plane: &ControlPlane, client: &kube::Client, holder: Holder) -> anyhow::Result<()> {
    let clock = Arc::new(ManualClock::new(common::start()));
    let ring = Arc::new(KeyRing::with_keys(LoadedKeys::from_document(
        &common::first_document(common::start()),
    )?));
    let settings = Arc::new(Settings::new(common::settings()));
    let make = || -> anyhow::Result<Arc<Harness>> {
        let store = KubeStore::new(client.clone());
        Ok(Arc::new(replica(
            Arc::new(store) as Arc<dyn UserStore>,
            Arc::new(MemoryStore::default()),
            Arc::clone(&ring),
            Arc::clone(&settings),
            Arc::clone(&clock),
        )))
    };
    let (a, b) = (make()?, make()?);

    let session = a.cli_session("alice").await;
    let first = refresh_of(&session);
    let fam = claims(&first)["fam"].as_str().expect("fam").to_owned();
    assert_eq!(generation(plane, holder, &fam)?, Some(1));
    let mut token = first.clone();
    let mut previous = first.clone();
    for round in 0..ROUNDS {
        let (ra, rb) = {
            let (ha, hb) = (Arc::clone(&a), Arc::clone(&b));
            let (ta, tb) = (token.clone(), token.clone());
            let ja = tokio::spawn(async move { ha.refresh(&ta, "ichor-cli", None).await });
            let jb = tokio::spawn(async move { hb.refresh(&tb, "ichor-cli", None).await });
            (ja.await?, jb.await?)
        };
        assert_eq!(ra.status, StatusCode::OK, "round {round} A: {}", ra.text());
        assert_eq!(rb.status, StatusCode::OK, "round {round} B: {}", rb.text());
        let (sa, sb) = (refresh_of(&ra.json()), refresh_of(&rb.json()));
        assert_eq!(sa, sb, "round {round}: both replicas answer the one successor");
        assert_eq!(claims(&sa)["generation"].as_u64(), Some(round + 2));
        assert_eq!(
            generation(plane, holder, &fam)?,
            Some(round + 2),
            "round {round}: exactly one rotation in the Secret"
        );
        previous = token;
        token = sa;
        clock.advance(SignedDuration::from_secs(11));
    }

    // Past the grace window the previous token is a reuse: the family is revoked in the
    // Secret, for both replicas.
    let reuse = b.refresh(&previous, "ichor-cli", None).await;
    assert_eq!(reuse.status, StatusCode::BAD_REQUEST, "{}", reuse.text());
    assert_eq!(reuse.error(), "invalid_grant");
    assert!(reuse.text().contains("already used"), "{}", reuse.text());
    assert_eq!(generation(plane, holder, &fam)?, None, "the family is revoked");
    let dead = a.refresh(&token, "ichor-cli", None).await;
    assert_eq!(
        dead.error(),
        "invalid_grant",
        "the successor is dead on the other replica too"
    );

    Ok(())
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn two_kube_store_replicas_rotate_each_generation_once_in_the_users_own_secret_and_detect_reuse()
-> anyhow::Result<()> {
    let Some(plane) = fresh_cluster(&[("alice", "admin")])? else {
        return Ok(());
    };
    runtime(4)?.block_on(async {
        let client = issuer_client(&plane).await?;
        let store = KubeStore::new(client.clone());
        let (_, absent) = store.read_credentials("alice").await?;
        store
            .write_credentials("alice", &absent, Some(&common::entry(false)))
            .await?;
        race_and_reuse(&plane, &client, own_entry).await?;
        anyhow::Ok(())
    })?;
    assert_eq!(
        plane.get_json(0, "secret", NAMESPACE, CREDENTIALS_SECRET_NAME)?,
        None,
        "a fresh installation's rotations never make a legacy Secret"
    );
    Ok(())
}
