//! An admin deleted while her own finalizer holds her object, against the running controller
//! on the real apiserver: mallory, an admin, puts `x/hold` on her `IchorUser`; `kubectl delete`
//! then leaves it terminating. Her credentials key used to stay (the read before the removal
//! found the object), so her password and refresh families lived on. The controller now takes a
//! user being deleted for a gone one and removes its key; alice's stays.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ichor_renderers::auth::credentials::{CREDENTIALS_SECRET_NAME, CredentialsEntry};
use ichor_renderers::auth::hash::DUMMY_PHC;
use ichor_testkit::install::{self, NAMESPACE};
use ichor_testkit::wait;
use serde_json::json;

use super::{Running, SETTLE};
use crate::replicas::get;

fn entry(name: &str) -> anyhow::Result<String> {
    let json = CredentialsEntry::new(DUMMY_PHC.to_owned(), jiff::Timestamp::now(), false).to_json(name)?;
    Ok(STANDARD.encode(json))
}

fn keys(plane: &ichor_testkit::control_plane::ControlPlane) -> anyhow::Result<Vec<String>> {
    let secret = get(plane, 0, "secret", CREDENTIALS_SECRET_NAME)?
        .ok_or_else(|| anyhow::anyhow!("no {CREDENTIALS_SECRET_NAME}"))?;
    let mut keys: Vec<String> = secret["data"]
        .as_object()
        .map(|d| d.keys().cloned().collect())
        .unwrap_or_default();
    keys.sort();
    Ok(keys)
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn a_deleted_admin_held_by_her_own_finalizer_loses_her_credentials_key() -> anyhow::Result<()> {
    let Some(running) = Running::start(&[])? else {
        return Ok(());
    };
    let plane = &running.plane;
    plane.apply(&install::held_ichor_user("mallory", &["admin"]))?;
    plane.apply(
        &json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": CREDENTIALS_SECRET_NAME, "namespace": NAMESPACE},
            "data": {"alice": entry("alice")?, "mallory": entry("mallory")?}})
        .to_string(),
    )?;
    // Her key is hers while she is a user: the controller leaves it.
    wait::until("mallory's PasswordSet condition", SETTLE, || {
        Ok(get(plane, 0, "ichoruser", "mallory")?.filter(|u| {
            u["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "PasswordSet" && c["status"] == "True")
            })
        }))
    })?;
    assert_eq!(keys(plane)?, ["alice", "mallory"]);

    plane.kubectl_run(
        &["delete", "ichoruser", "mallory", "-n", NAMESPACE, "--wait=false"],
        None,
    )?;
    let held = get(plane, 0, "ichoruser", "mallory")?
        .ok_or_else(|| anyhow::anyhow!("the finalizer holds the object"))?;
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");

    wait::until("mallory's credentials key removed", SETTLE, || {
        Ok(Some(keys(plane)?).filter(|k| k == &["alice"]))
    })?;
    install::remove_finalizers(plane, "ichoruser", "mallory")?;
    Ok(())
}
