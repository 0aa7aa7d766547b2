//! A new user's password taken for an orphan, on the real apiserver under the chart's RBAC: the
//! issuer creates `newbie`, then writes its credentials entry. A controller that folded the
//! Secret's new key before the user (two watches) decides the key's removal from a World without
//! `newbie`. The removal, as the controller's ServiceAccount, reads `newbie` first (a quorum
//! GET the chart grants), finds it and keeps the key.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ichor_controller::apply::KubeApplier;
use ichor_controller_core::identity::effects::RemoveCredentialsKeyRequest;
use ichor_controller_core::perform::OsKeyMaterial;
use ichor_graph::{Action, Cause, EffectRequest, Event, Object, Reason, World};
use ichor_renderers::auth::credentials::{CREDENTIALS_SECRET_NAME, CredentialsEntry};
use ichor_renderers::auth::hash::DUMMY_PHC;
use ichor_testkit::install::{self, CONTROLLER_SERVICE_ACCOUNT, NAMESPACE, ichor_user};
use serde_json::{Value, json};

use super::Running;
use crate::replicas::get;

fn entry(name: &str) -> anyhow::Result<String> {
    let json = CredentialsEntry::new(DUMMY_PHC.to_owned(), jiff::Timestamp::now(), false).to_json(name)?;
    Ok(STANDARD.encode(json))
}

fn keys(secret: &Value) -> Vec<String> {
    secret["data"]
        .as_object()
        .map(|d| d.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn a_new_users_key_folded_before_the_user_survives_the_removal_under_the_charts_rbac() -> anyhow::Result<()> {
    let Some(running) = Running::start(&[])? else {
        return Ok(());
    };
    let plane = &running.plane;
    // The issuer's order: the user, then its entry.
    plane.apply(&ichor_user("newbie", &["viewer"]))?;
    plane.apply(
        &json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": CREDENTIALS_SECRET_NAME, "namespace": NAMESPACE},
            "data": {"alice": entry("alice")?, "newbie": entry("newbie")?}})
        .to_string(),
    )?;
    let secret = get(plane, 0, "secret", CREDENTIALS_SECRET_NAME)?
        .ok_or_else(|| anyhow::anyhow!("no {CREDENTIALS_SECRET_NAME}"))?;
    let rv = secret["metadata"]["resourceVersion"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("no resourceVersion: {secret}"))?
        .to_owned();

    // The World of a controller that folded the key first: the Secret as it is now, no newbie.
    let mut observed = Object::new("Secret", NAMESPACE, CREDENTIALS_SECRET_NAME, secret.clone());
    observed.resource_version = Some(rv.clone());
    let mut world = World::new();
    world.apply(Event::Applied(observed));
    let request = RemoveCredentialsKeyRequest {
        namespace: NAMESPACE.to_owned(),
        secret: CREDENTIALS_SECRET_NAME.to_owned(),
        key: "newbie".to_owned(),
        in_legacy: true,
        per_user: None,
    };
    let action = Action::Effect {
        request: EffectRequest::new(request.id(), &request)?,
        reason: Reason {
            node: Some("credentials-gc".into()),
            instance: None,
            cause: Cause::Initial,
        },
    };

    let kubeconfig = install::component_kubeconfig(plane, 0, CONTROLLER_SERVICE_ACCOUNT)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(async {
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&kubeconfig)?,
            &kube::config::KubeConfigOptions::default(),
        )
        .await?;
        let mut applier = KubeApplier::new(
            kube::Client::try_from(config)?,
            NAMESPACE,
            Box::new(OsKeyMaterial),
        );
        anyhow::Ok(applier.apply(&world, &[action]).await)
    })?;

    assert!(
        report.problems.is_empty() && report.applied.is_empty(),
        "the read is granted and nothing is removed: {report:?}"
    );
    assert_eq!(report.stale.len(), 1, "{report:?}");
    assert!(
        report
            .events
            .iter()
            .any(|e| matches!(e, Event::Applied(u) if &*u.kind == "IchorUser" && &*u.name == "newbie")),
        "the user as read is handed back: {report:?}"
    );
    let after = get(plane, 0, "secret", CREDENTIALS_SECRET_NAME)?
        .ok_or_else(|| anyhow::anyhow!("no {CREDENTIALS_SECRET_NAME}"))?;
    let mut left = keys(&after);
    left.sort();
    assert_eq!(left, ["alice", "newbie"], "newbie's password is still stored");
    Ok(())
}
