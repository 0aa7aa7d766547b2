//! An admin deleted with `kubectl delete` (or pruned by GitOps) while a finalizer holds her
//! object: mallory, an admin, adds the finalizer `x/hold` to her own `IchorUser` (no role
//! changes, so nothing refuses it); the delete then only sets its `deletionTimestamp`. The
//! issuer used to serve the terminating object as a user: she kept signing in and refreshing,
//! her tokens still `ichor:admin`. Now a user being deleted is no user: sign-in answers exactly
//! as for a name nobody has, refresh is refused, and the store lists her no more — through the
//! real kube-apiserver, which keeps the object for as long as the finalizer stays.

use std::sync::Arc;
use std::time::Duration;

use ichor_issuer::keys::{KeyRing, LoadedKeys};
use ichor_issuer::oidc::Settings;
use ichor_issuer::store::UserStore;
use ichor_issuer::store::kube::KubeStore;
use ichor_testkit::install::{self, NAMESPACE};

use super::super::{cluster, issuer_client, refresh_of, runtime};
use crate::common::{self, ManualClock, MemoryStore, replica};
use ichor_testkit::issuer::harness::{PASSWORD, UI_REDIRECT};

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn an_admin_deleted_while_her_own_finalizer_holds_her_object_signs_in_and_refreshes_no_more()
-> anyhow::Result<()> {
    let Some(plane) = cluster(&[("alice", "admin")], &[("mallory", &common::entry(false))])? else {
        return Ok(());
    };
    plane.apply(&install::held_ichor_user("mallory", &["admin"]))?;
    let runtime = runtime(2)?;
    runtime.block_on(async {
        let client = issuer_client(&plane).await?;
        let store = Arc::new(KubeStore::new(client.clone()).with_user_ttl(Duration::ZERO));
        let clock = Arc::new(ManualClock::new(common::start()));
        let ring = Arc::new(KeyRing::with_keys(LoadedKeys::from_document(
            &common::first_document(common::start()),
        )?));
        let h = replica(
            Arc::clone(&store) as Arc<dyn UserStore>,
            Arc::new(MemoryStore::default()),
            ring,
            Arc::new(Settings::new(common::settings())),
            Arc::clone(&clock),
        );
        let refresh = refresh_of(&h.cli_session("mallory").await);

        plane.kubectl_run(
            &["delete", "ichoruser", "mallory", "-n", NAMESPACE, "--wait=false"],
            None,
        )?;
        let held = plane
            .get_json(0, "ichoruser", NAMESPACE, "mallory")?
            .ok_or_else(|| anyhow::anyhow!("the finalizer holds the object"))?;
        assert!(
            held["metadata"]["deletionTimestamp"].is_string(),
            "terminating: {held}"
        );

        // Sign-in: exactly the answer for a name nobody has.
        let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
        let hers = h.login(&ticket, "mallory", PASSWORD).await;
        let ticket = h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await;
        let nobodys = h.login(&ticket, "nobody", PASSWORD).await;
        assert_eq!(hers.status, nobodys.status, "{}", hers.text());
        assert_eq!(hers.text(), nobodys.text());
        assert!(hers.device_cookie().is_none(), "no device cookie either");

        // Refresh: refused.
        let reply = h.refresh(&refresh, "ichor-cli", None).await;
        assert_eq!(reply.error(), "invalid_grant", "{}", reply.text());

        // The store: no such user, listed no more.
        assert!(store.get_user("mallory").await?.is_none());
        assert!(
            !store.list_users().await?.iter().any(|u| u.name == "mallory"),
            "listed"
        );
        anyhow::Ok(())
    })?;
    install::remove_finalizers(&plane, "ichoruser", "mallory")?;
    Ok(())
}
