//! After the move to one Secret per user, on the real apiserver with the chart's policies: the
//! condition naming an issuer pod of a release before the per-user layout, and the way back from
//! the end state (the legacy Secret created again in phase `returning`, nobody moved back before
//! the issuers' memory of its absence has passed, then everyone, nothing lost).

use std::time::Duration;

use ichor_renderers::contract::{CREDENTIALS_LAYOUT_ANNOTATION, CREDENTIALS_LAYOUT_UNDERSTOOD};
use ichor_testkit::control_plane::ControlPlane;
use ichor_testkit::install::NAMESPACE;
use ichor_testkit::wait;
use serde_json::{Value, json};

use crate::attacks::{Running, SETTLE};
use crate::credentials::per_user_secret;
use crate::credentials_migration::{
    apply_users, entries, installation_status, issuer_pod, legacy, legacy_keys, own_secrets, phase,
    release_pod, stays, users,
};

/// The installation's `CredentialsLayoutUnderstood` condition, once written.
fn understood(plane: &ControlPlane) -> anyhow::Result<Option<Value>> {
    Ok(installation_status(plane)?["conditions"]
        .as_array()
        .and_then(|c| {
            c.iter()
                .find(|c| c["type"] == CREDENTIALS_LAYOUT_UNDERSTOOD)
                .cloned()
        }))
}

fn installation(plane: &ControlPlane, spec: &Value) -> anyhow::Result<()> {
    plane.apply(
        &json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorInstallation",
            "metadata": {"name": "ichor"}, "spec": spec})
        .to_string(),
    )?;
    Ok(())
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn an_issuer_pod_of_an_earlier_release_is_named_once_the_legacy_secret_is_gone() -> anyhow::Result<()> {
    let names = users("old", 2);
    let all = entries(&names)?;
    let prepared = all.clone();
    let Some(running) = Running::start_prepared(&[], move |plane| {
        apply_users(plane, &names)?;
        // The end state: every entry in its own Secret, no legacy Secret.
        for (user, value) in &prepared {
            plane.apply(&per_user_secret(user, value))?;
        }
        issuer_pod(plane, "ichor-issuer-new", Some("legacy,per-user"))?;
        issuer_pod(plane, "ichor-issuer-old", None)?;
        Ok(())
    })?
    else {
        return Ok(());
    };
    let plane = &running.plane;
    installation(plane, &json!({}))?;
    let checked = (|| -> anyhow::Result<()> {
        let c = wait::until("CredentialsLayoutUnderstood=False", SETTLE, || {
            Ok(understood(plane)?.filter(|c| c["status"] == "False"))
        })?;
        assert_eq!(c["reason"], "IssuerReleaseTooOld", "{c}");
        let message = c["message"].as_str().unwrap_or_default();
        assert!(message.contains("ichor-system/ichor-issuer-old"), "{message}");
        assert!(message.contains("must not run"), "{message}");
        assert!(!message.contains("ichor-issuer-new"), "{message}");
        // Terminating, it still serves: still named.
        plane.kubectl_run(
            &[
                "delete",
                "pod",
                "ichor-issuer-old",
                "-n",
                NAMESPACE,
                "--wait=false",
            ],
            None,
        )?;
        wait::until("the terminating pod named", SETTLE, || {
            Ok(understood(plane)?.filter(|c| {
                c["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("ichor-issuer-old (terminating)"))
            }))
        })?;
        assert_eq!(
            understood(plane)?.map(|c| c["status"].clone()),
            Some(json!("False"))
        );
        // Gone: True.
        release_pod(plane, "ichor-issuer-old")?;
        wait::until("CredentialsLayoutUnderstood=True", SETTLE, || {
            Ok(understood(plane)?.filter(|c| c["status"] == "True"))
        })?;
        Ok(())
    })();
    checked.map_err(|e| e.context(running.replica.log_tail()))?;
    release_pod(plane, "ichor-issuer-new").ok();
    Ok(())
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn from_the_end_state_legacy_asked_recreates_the_secret_waits_then_moves_everyone_back() -> anyhow::Result<()>
{
    // More than one batch of 100.
    let names = users("end", 130);
    let all = entries(&names)?;
    let prepared = all.clone();
    let Some(running) = Running::start_prepared(&[], move |plane| {
        apply_users(plane, &names)?;
        for (user, value) in &prepared {
            plane.apply(&per_user_secret(user, value))?;
        }
        Ok(())
    })?
    else {
        return Ok(());
    };
    let plane = &running.plane;
    let checked = (|| -> anyhow::Result<()> {
        installation(plane, &json!({}))?;
        wait::until("status perUser", SETTLE, || {
            let s = installation_status(plane)?;
            Ok((s["credentials"]["layout"] == "perUser").then_some(()))
        })?;
        assert!(legacy(plane)?.is_none());
        installation(plane, &json!({"users": {"credentialsLayout": "legacy"}}))?;
        // Created again through the controller's own policy: exactly the legacy Secret, empty.
        let created = wait::until("the legacy Secret created again", SETTLE, || legacy(plane))?;
        assert_eq!(created["type"], "Opaque", "{created}");
        assert_eq!(
            created["metadata"]["annotations"][CREDENTIALS_LAYOUT_ANNOTATION],
            "returning"
        );
        assert!(
            created["data"].as_object().is_none_or(serde_json::Map::is_empty),
            "created with keys"
        );
        let at: jiff::Timestamp = created["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap_or_default()
            .parse()?;
        // Nobody moves back while an issuer may still remember it as absent (10 s), nor until
        // the controller's wait (30 s) has passed: checked until 25 s after its creation.
        let until = at + jiff::SignedDuration::from_secs(25);
        let left = until.duration_since(jiff::Timestamp::now());
        let left = Duration::try_from(left).unwrap_or_default();
        assert!(
            left >= Duration::from_secs(10),
            "the check starts too late: {left:?}"
        );
        stays("nobody moved back before the wait", left, || {
            Ok(own_secrets(plane)?.len() == 130 && legacy_keys(plane)? == 0)
        })?;
        wait::until(
            "phase legacy, no own Secret left",
            Duration::from_secs(90),
            || {
                Ok(
                    (phase(plane)?.as_deref() == Some("legacy") && own_secrets(plane)?.is_empty())
                        .then_some(()),
                )
            },
        )?;
        let back = legacy(plane)?.ok_or_else(|| anyhow::anyhow!("no legacy Secret"))?;
        for (user, value) in &all {
            assert_eq!(
                back["data"][user].as_str(),
                Some(value.as_str()),
                "{user}'s entry back in the legacy Secret"
            );
        }
        assert_eq!(back["data"].as_object().map(serde_json::Map::len), Some(130));
        assert_eq!(
            back["metadata"]["uid"], created["metadata"]["uid"],
            "the Secret made again, kept"
        );
        wait::until("status legacy", SETTLE, || {
            let s = installation_status(plane)?;
            Ok((s["credentials"] == json!({"layout": "legacy", "moved": 0, "remaining": 130})).then_some(()))
        })?;
        Ok(())
    })();
    checked.map_err(|e| e.context(running.replica.log_tail()))?;
    let log = running.replica.log();
    for value in all.values() {
        assert!(
            !log.contains(value.as_str()),
            "an entry is in the controller's log"
        );
    }
    Ok(())
}
