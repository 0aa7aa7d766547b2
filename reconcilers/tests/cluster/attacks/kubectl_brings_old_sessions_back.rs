//! Bringing a stolen refresh token back with `kubectl`: carol was disabled with a refresh family
//! still in her credentials entry (a disable made with `kubectl` does not go through the API,
//! which ends the sessions); an admin sets `spec.disabled: false` again with `kubectl`. Or dave
//! is deleted with `kubectl` and a new `dave` created before the controller collected the old
//! entry, so the new user would inherit the old password and sessions. The webhook refuses the
//! re-enable while a family from before lives, and the create while an entry of the name is
//! stored. The controller that would collect the entry is stopped for the test (a replica in dry
//! run serves the webhook), so the window the attack needs stays open as long as it likes.

use std::time::Duration;

use base64::Engine as _;
use ichor_renderers::auth::credentials::{CREDENTIALS_SECRET_NAME, CredentialsEntry};
use ichor_renderers::auth::hash::DUMMY_PHC;
use ichor_testkit::install::{self, CONTROLLER_SERVICE_ACCOUNT, NAMESPACE};
use ichor_testkit::wait;
use jiff::{SignedDuration, Timestamp};
use serde_json::json;

use super::{ALICE, Running, SETTLE};
use crate::replicas::{Replica, merge_patch};

fn user(name: &str, disabled: bool) -> String {
    json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"displayName": name, "roles": ["viewer"], "disabled": disabled}})
    .to_string()
}

/// An entry with one refresh family started an hour ago for 30 days (the thief's).
fn entry_with_family(name: &str) -> anyhow::Result<String> {
    let start = Timestamp::now() - SignedDuration::from_hours(1);
    let entry = CredentialsEntry::new(DUMMY_PHC.to_owned(), start - SignedDuration::from_hours(1), false)
        .start_family(
            "stolen-family",
            "ichor-cli",
            "ichor-kube",
            start,
            SignedDuration::from_hours(720),
        )?;
    Ok(entry.to_json(name)?)
}

/// Writes `name`'s entry into the credentials Secret, as the issuer would.
fn put_entry(
    plane: &ichor_testkit::control_plane::ControlPlane,
    name: &str,
    json: &str,
) -> anyhow::Result<()> {
    let value = base64::engine::general_purpose::STANDARD.encode(json);
    let patch = json!({"data": {name: value}});
    plane
        .kubectl_as(
            None,
            &merge_patch("secret", CREDENTIALS_SECRET_NAME, &patch, false),
            None,
        )?
        .map(drop)
        .map_err(|e| anyhow::anyhow!("writing {name}'s entry: {e}"))
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn kubectl_cannot_re_enable_a_user_with_old_sessions_nor_re_create_one_over_its_old_credentials()
-> anyhow::Result<()> {
    let Some(mut running) = Running::start(&[])? else {
        return Ok(());
    };
    // The collector stops; a replica that decides but applies nothing serves the webhook.
    running.replica.kill();
    let dir = tempfile::tempdir()?;
    let kubeconfig = install::component_kubeconfig(&running.plane, 0, CONTROLLER_SERVICE_ACCOUNT)?;
    let witness = Replica::start_with(
        dir.path(),
        "ichor-controller-dry",
        &kubeconfig,
        &[("ICHOR_CONTROLLER_DRY_RUN", "true")],
    )?;
    let plane = &running.plane;
    crate::webhooks::serve_from(plane, &witness)?;
    wait::until(
        "the dry-run replica's webhook reached through its Service",
        SETTLE,
        || {
            let dry = ["create", "--dry-run=server", "-o", "name", "-f", "-"];
            match plane.kubectl_as(Some(ALICE), &dry, Some(&user("probe", false)))? {
                Ok(_) => Ok(Some(())),
                Err(e) if e.contains("failed calling webhook") || e.contains("could not be checked") => {
                    Ok(None)
                }
                Err(e) => Err(anyhow::anyhow!(e)),
            }
        },
    )
    .map_err(|e| e.context(witness.log_tail()))?;

    // The Secret the issuer keeps the entries in (`ichor init` creates it).
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": CREDENTIALS_SECRET_NAME, "namespace": NAMESPACE}});
    plane.apply(&secret.to_string())?;

    // carol: disabled, her family from before still in the Secret.
    plane.apply(&user("carol", true))?;
    put_entry(plane, "carol", &entry_with_family("carol")?)?;
    let enable = merge_patch("ichoruser", "carol", &json!({"spec": {"disabled": false}}), false);
    match plane.kubectl_as(Some(ALICE), &enable, None)? {
        Ok(out) => anyhow::bail!("a re-enable with a live family from before was accepted: {out}"),
        Err(e) => anyhow::ensure!(
            e.contains("user \"carol\" still has 1 session(s) from before it was disabled"),
            "refused, but not for the sessions: {e}"
        ),
    }
    // Her sessions ended (what `ichor user revoke-sessions` writes): the re-enable passes.
    let ended = CredentialsEntry::parse("carol", entry_with_family("carol")?.as_bytes())?
        .revoke_all(Timestamp::now());
    put_entry(plane, "carol", &ended.to_json("carol")?)?;
    plane
        .kubectl_as(Some(ALICE), &enable, None)?
        .map_err(|e| anyhow::anyhow!("the re-enable after the sessions ended was refused: {e}"))?;

    // dave: deleted and created again while his entry is still stored.
    plane.apply(&user("dave", false))?;
    put_entry(plane, "dave", &entry_with_family("dave")?)?;
    plane
        .kubectl_as(
            Some(ALICE),
            &["delete", "ichoruser", "dave", "-n", NAMESPACE],
            None,
        )?
        .map_err(|e| anyhow::anyhow!("delete dave: {e}"))?;
    std::thread::sleep(Duration::from_millis(200));
    match plane.kubectl_as(
        Some(ALICE),
        &["create", "-o", "name", "-f", "-"],
        Some(&user("dave", false)),
    )? {
        Ok(out) => anyhow::bail!("a re-create over the old credentials was accepted: {out}"),
        Err(e) => anyhow::ensure!(
            e.contains("the credentials of an earlier user \"dave\" are still stored"),
            "refused, but not for the old credentials: {e}"
        ),
    }
    Ok(())
}
