//! Per-user credentials Secrets (docs/credentials-sharding.md, "Garbage collection") against the
//! running controller on the real apiserver: the controller sees them by metadata only, counts
//! them as a password (`PasswordSet=True`), and when an `IchorUser` is deleted removes its
//! legacy key and its own Secret, leaving every other user's alone.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ichor_renderers::auth::credentials::{CREDENTIALS_SECRET_NAME, CredentialsEntry};
use ichor_renderers::auth::hash::DUMMY_PHC;
use ichor_renderers::contract::{
    CREDENTIALS_NAMESPACE, USER_CREDENTIALS_KEY, USER_CREDENTIALS_TYPE, USER_LABEL, user_credentials_secret,
};
use ichor_testkit::control_plane::ControlPlane;
use ichor_testkit::install::{self, CONTROLLER_SERVICE_ACCOUNT, NAMESPACE, ichor_user};
use ichor_testkit::wait;
use serde_json::{Value, json};

use crate::attacks::{Running, SETTLE};
use crate::replicas::{condition, get};

pub(crate) fn entry(name: &str) -> anyhow::Result<String> {
    let json = CredentialsEntry::new(DUMMY_PHC.to_owned(), jiff::Timestamp::now(), false).to_json(name)?;
    Ok(STANDARD.encode(json))
}

/// The credentials namespace as `ichor init` makes it, and the controller's rights there as the
/// design grants them (`get`, `list`, `watch`, `delete` of `secrets` are what it uses here).
fn prepare(plane: &ControlPlane) -> anyhow::Result<()> {
    install::ensure_credentials_namespace(plane)?;
    plane.apply(
        &json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "ichor-controller-credentials-test", "namespace": CREDENTIALS_NAMESPACE},
                "rules": [{"apiGroups": [""], "resources": ["secrets"],
                    "verbs": ["get", "list", "watch", "delete"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "ichor-controller-credentials-test", "namespace": CREDENTIALS_NAMESPACE},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "ichor-controller-credentials-test"},
                "subjects": [{"kind": "ServiceAccount", "name": CONTROLLER_SERVICE_ACCOUNT,
                    "namespace": NAMESPACE}]}]})
        .to_string(),
    )?;
    Ok(())
}

/// `user`'s own credentials Secret holding `entry`, as the issuer creates it.
pub(crate) fn per_user_secret(user: &str, entry: &str) -> String {
    json!({"apiVersion": "v1", "kind": "Secret", "type": USER_CREDENTIALS_TYPE,
        "metadata": {"name": user_credentials_secret(user), "namespace": CREDENTIALS_NAMESPACE,
            "labels": {USER_LABEL: user}},
        "data": {USER_CREDENTIALS_KEY: entry}})
    .to_string()
}

pub(crate) fn own(plane: &ControlPlane, user: &str) -> anyhow::Result<Option<Value>> {
    plane.get_json(0, "secret", CREDENTIALS_NAMESPACE, &user_credentials_secret(user))
}

fn legacy_keys(plane: &ControlPlane) -> anyhow::Result<Vec<String>> {
    let mut keys: Vec<String> = get(plane, 0, "secret", CREDENTIALS_SECRET_NAME)?
        .and_then(|s| s["data"].as_object().map(|d| d.keys().cloned().collect()))
        .unwrap_or_default();
    keys.sort();
    Ok(keys)
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn a_deleted_users_own_secret_is_removed_and_another_users_is_untouched() -> anyhow::Result<()> {
    let Some(running) = Running::start_prepared(&[], prepare)? else {
        return Ok(());
    };
    let plane = &running.plane;
    plane.apply(&ichor_user("bob", &["viewer"]))?;
    plane.apply(&ichor_user("carol", &["viewer"]))?;
    // bob is half-moved (his legacy key and his own Secret), carol has her own Secret only.
    plane.apply(
        &json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": CREDENTIALS_SECRET_NAME, "namespace": NAMESPACE},
            "data": {"alice": entry("alice")?, "bob": entry("bob")?}})
        .to_string(),
    )?;
    let carol_entry = entry("carol")?;
    plane.apply(&per_user_secret("bob", &entry("bob")?))?;
    plane.apply(&per_user_secret("carol", &carol_entry))?;
    let carol_uid = own(plane, "carol")?.map(|s| s["metadata"]["uid"].clone());

    // Seen through the metadata watch: an own Secret is a password.
    let settled = (|| -> anyhow::Result<()> {
        for user in ["bob", "carol"] {
            wait::until(&format!("{user} PasswordSet=True"), SETTLE, || {
                Ok(get(plane, 0, "ichoruser", user)?
                    .filter(|u| condition(u, "PasswordSet").as_deref() == Some("True")))
            })?;
        }
        plane.kubectl_run(&["delete", "ichoruser", "bob", "-n", NAMESPACE], None)?;
        wait::until("bob's own Secret removed", SETTLE, || {
            Ok(own(plane, "bob")?.is_none().then_some(()))
        })
    })();
    settled.map_err(|e| e.context(running.replica.log_tail()))?;
    assert_eq!(legacy_keys(plane)?, ["alice"], "bob's legacy copy went too");
    let carol = own(plane, "carol")?.ok_or_else(|| anyhow::anyhow!("carol's own Secret was removed"))?;
    assert_eq!(
        Some(carol["metadata"]["uid"].clone()),
        carol_uid,
        "carol's Secret is the same one"
    );
    assert_eq!(
        get(plane, 0, "ichoruser", "carol")?
            .and_then(|u| condition(&u, "PasswordSet"))
            .as_deref(),
        Some("True")
    );
    // The controller never held an entry of a per-user Secret: none is in its log.
    let log = running.replica.log();
    assert!(
        !log.contains(&carol_entry),
        "carol's entry is in the controller's log"
    );
    Ok(())
}
