//! Whether the credentials namespace holds nothing but users' credentials Secrets, as the
//! running controller decides it on the real apiserver before the switch to one Secret per user
//! (docs/credentials-sharding.md, "The switch"): a foreign Secret holds the switch and is named;
//! a refused list of the namespace's Secrets shows nothing, and is not taken for an empty
//! namespace.

use std::collections::BTreeMap;
use std::time::Duration;

use ichor_renderers::contract::CREDENTIALS_NAMESPACE;
use ichor_testkit::control_plane::ControlPlane;
use ichor_testkit::install;
use ichor_testkit::wait;
use serde_json::{Value, json};

use crate::attacks::{Running, SETTLE};
use crate::credentials_migration::{
    apply_users, entries, installation, installation_status, legacy, legacy_secret, phase, rollout_observed,
    stays, users,
};

/// Users in the legacy Secret (phase `legacy`, the rollout observed) and a foreign Secret
/// `planted` in the credentials namespace, planted while the admission policy's binding was away
/// (or before it existed); the binding is back when this returns.
fn legacy_users_and_a_planted_secret(
    plane: &ControlPlane,
    names: &[String],
    prepared: &BTreeMap<String, String>,
) -> anyhow::Result<()> {
    apply_users(plane, names)?;
    plane.apply(&legacy_secret("legacy", prepared))?;
    rollout_observed(plane)?;
    plane.kubectl_run(
        &["delete", "validatingadmissionpolicybinding", "ichor-credentials"],
        None,
    )?;
    wait::until("the policy no longer enforced", SETTLE, || {
        let planted = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "planted", "namespace": CREDENTIALS_NAMESPACE},
            "data": {"token": "c2VjcmV0"}});
        Ok(plane.apply(&planted.to_string()).ok())
    })?;
    let binding = install::chart_object("ValidatingAdmissionPolicyBinding", "ichor-credentials")?;
    plane.apply(&binding.to_string()).map(|_| ())
}

/// `CredentialsNamespaceDedicated=False`, naming the planted Secret.
fn the_planted_secret_is_named(plane: &ControlPlane) -> anyhow::Result<()> {
    wait::until("CredentialsNamespaceDedicated=False", SETTLE, || {
        let s = installation_status(plane)?;
        Ok((s["conditions"][0]["status"] == "False").then_some(s))
    })?;
    let message = installation_status(plane)?["conditions"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(message.contains("ichor-credentials/planted"), "{message}");
    Ok(())
}

/// A user of the refused-list test without any credentials.
const NO_PASSWORD: &str = "rl-nopw";

/// Waits until `user`'s `PasswordSet` condition has this (status, reason).
fn password_set_becomes(plane: &ControlPlane, user: &str, wanted: (&str, &str)) -> anyhow::Result<()> {
    wait::until(
        &format!("{user} PasswordSet={} {}", wanted.0, wanted.1),
        SETTLE,
        || {
            let Some(object) = plane.get_json(0, "ichoruser", install::NAMESPACE, user)? else {
                return Ok(None);
            };
            let found = object["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "PasswordSet")
                .map(|c| (c["status"].clone(), c["reason"].clone()));
            Ok((found == Some((json!(wanted.0), json!(wanted.1)))).then_some(()))
        },
    )
}

/// The planted Secret removed, the move runs to the end: the legacy Secret is deleted.
fn its_removal_lets_the_move_end(plane: &ControlPlane) -> anyhow::Result<()> {
    plane.kubectl_run(
        &["delete", "secret", "planted", "-n", CREDENTIALS_NAMESPACE],
        None,
    )?;
    wait::until("the legacy Secret deleted", SETTLE, || {
        Ok(legacy(plane)?.is_none().then_some(()))
    })?;
    Ok(())
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn a_foreign_secret_in_the_credentials_namespace_holds_the_switch_back_and_is_named() -> anyhow::Result<()> {
    let names = users("fs", 2);
    let prepared = entries(&names)?;
    let Some(running) = Running::start_prepared(&[], move |plane| {
        legacy_users_and_a_planted_secret(plane, &names, &prepared)
    })?
    else {
        return Ok(());
    };
    let plane = &running.plane;
    // After the start: the installations' webhook is served by the replica.
    installation(plane)?;
    let checked = (|| -> anyhow::Result<()> {
        the_planted_secret_is_named(plane)?;
        stays(
            "phase legacy while the namespace is not dedicated",
            Duration::from_secs(4),
            || Ok(phase(plane)?.as_deref() == Some("legacy")),
        )?;
        its_removal_lets_the_move_end(plane)
    })();
    checked.map_err(|e| e.context(running.replica.log_tail()))?;
    Ok(())
}

/// The controller started while its Role in the credentials namespace does not apply to it (the
/// RoleBinding away, as right after an install before the authorizer's cache has it): the list
/// of the namespace's Secrets is refused, and a refusal shows nothing, not an empty namespace.
/// The switch waits and no condition is claimed; once the list is answered, the planted Secret
/// is named, and its removal lets the move run to the end.
#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn a_refused_list_of_the_credentials_namespace_holds_the_switch_until_it_is_answered() -> anyhow::Result<()> {
    let names = users("rl", 2);
    let prepared = entries(&names)?;
    let binding = std::sync::Arc::new(std::sync::Mutex::new(Value::Null));
    let kept = binding.clone();
    // The users webhook fails closed while the controller may not read the credentials
    // namespace, so the start does not wait for it to admit a user.
    let Some(running) = Running::start_prepared_users_webhook_refusing(&[], move |plane| {
        legacy_users_and_a_planted_secret(plane, &names, &prepared)?;
        apply_users(plane, &[NO_PASSWORD.to_owned()])?;
        let mut rb: Value = serde_json::from_str(&plane.kubectl_run(
            &[
                "get",
                "rolebinding",
                "ichor-controller",
                "-n",
                CREDENTIALS_NAMESPACE,
                "-o",
                "json",
            ],
            None,
        )?)?;
        if let Some(meta) = rb["metadata"].as_object_mut() {
            for field in ["resourceVersion", "uid", "creationTimestamp", "managedFields"] {
                meta.remove(field);
            }
        }
        *kept.lock().map_err(|_| anyhow::anyhow!("poisoned"))? = rb;
        plane.kubectl_run(
            &[
                "delete",
                "rolebinding",
                "ichor-controller",
                "-n",
                CREDENTIALS_NAMESPACE,
            ],
            None,
        )?;
        Ok(())
    })?
    else {
        return Ok(());
    };
    let plane = &running.plane;
    // The installations' webhook is served by the replica from its start; reached once its
    // Service answers.
    wait::until("the IchorInstallation admitted", SETTLE, || {
        Ok(installation(plane).ok())
    })?;
    let checked = (|| -> anyhow::Result<()> {
        // Listed, the planted Secret would be named (the condition False); refused and read as
        // empty, the namespace would count as dedicated (True) and the phase switch at once.
        stays(
            "phase legacy and no dedication claimed while the Secrets cannot be listed",
            Duration::from_secs(6),
            || {
                let dedicated = installation_status(plane)?["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "CredentialsNamespaceDedicated");
                Ok(phase(plane)?.as_deref() == Some("legacy") && !dedicated)
            },
        )?;
        // A user whose credentials are not found may have them in a Secret the controller
        // cannot see: not known, while the users whose legacy entry it read have a password.
        password_set_becomes(plane, NO_PASSWORD, ("Unknown", "CredentialsNotListed"))?;
        password_set_becomes(plane, "rl-000", ("True", "PasswordSet"))?;
        let rb = binding.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.clone();
        plane.apply(&rb.to_string())?;
        password_set_becomes(plane, NO_PASSWORD, ("False", "NoPassword"))?;
        the_planted_secret_is_named(plane)?;
        assert_eq!(phase(plane)?.as_deref(), Some("legacy"));
        its_removal_lets_the_move_end(plane)
    })();
    checked.map_err(|e| e.context(running.replica.log_tail()))?;
    Ok(())
}
