//! Changing every user's session policy and kubeconfig server with `kubectl` as an operator:
//! the built-in operator role may `patch` `IchorInstallation`s, so it could lengthen the refresh
//! lifetime to 30 days, point every user's kubeconfig at a server it runs, or lift the second
//! factor the installation requires of admins. A change of
//! `spec.users` needs `update` on `ichorinstallations/users`, which only `ichor-admin` holds; the
//! chart registers the webhook for IchorInstallation and its roles grant the verb to admin only.

use serde_json::json;

use super::{ALICE, OLGA, Running};

const INSTALLATION: &str = r#"{"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorInstallation",
  "metadata": {"name": "ichor"}, "spec": {"users": {"tokenTTL": "5m", "refreshLifetime": "12h",
  "secondFactor": {"roles": {"admin": "required"}}}}}"#;

fn patch(body: &serde_json::Value) -> Vec<String> {
    vec![
        "patch".to_owned(),
        "ichorinstallation".to_owned(),
        "ichor".to_owned(),
        "--type=merge".to_owned(),
        "-p".to_owned(),
        body.to_string(),
    ]
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn an_operator_cannot_change_spec_users_and_an_admin_can() -> anyhow::Result<()> {
    let Some(running) = Running::start(&[])? else {
        return Ok(());
    };
    let plane = &running.plane;
    plane.apply(INSTALLATION)?;
    let needs = "spec.users: changing the session policy, the second-factor policy and the kubeconfig server needs verb \"update\" on \
                 ichorinstallations/users, which user \"ichor:olga\" does not hold";
    for (what, body) in [
        (
            "a 30-day refresh lifetime",
            json!({"spec": {"users": {"refreshLifetime": "720h"}}}),
        ),
        (
            "every kubeconfig pointed elsewhere",
            json!({"spec": {"users": {"kubeAPIServerURL": "https://evil.example:6443"}}}),
        ),
        (
            "the second factor lifted for admins",
            json!({"spec": {"users": {"secondFactor": {"roles": {"admin": "off"}}}}}),
        ),
        (
            "the second-factor policy removed",
            json!({"spec": {"users": {"secondFactor": null}}}),
        ),
        ("spec.users removed", json!({"spec": {"users": null}})),
    ] {
        match plane.kubectl_as(Some(OLGA), &patch(&body), None)? {
            Ok(out) => anyhow::bail!("an operator's change ({what}) was accepted: {out}"),
            Err(e) => anyhow::ensure!(e.contains(needs), "{what}: refused, but not for the right: {e}"),
        }
    }
    plane
        .kubectl_as(
            Some(OLGA),
            &patch(&json!({"metadata": {"labels": {"team": "platform"}}})),
            None,
        )?
        .map_err(|e| anyhow::anyhow!("an operator's label change was refused: {e}"))?;
    plane
        .kubectl_as(
            Some(ALICE),
            &patch(&json!({"spec": {"users": {"refreshLifetime": "24h",
                "secondFactor": {"default": "optional", "roles": {"admin": "required"}}}}})),
            None,
        )?
        .map_err(|e| anyhow::anyhow!("an admin's change was refused: {e}"))?;
    let stored = plane.kubectl_run(&["get", "ichorinstallation", "ichor", "-o", "json"], None)?;
    let stored: serde_json::Value = serde_json::from_str(&stored)?;
    anyhow::ensure!(
        stored["spec"]["users"]["refreshLifetime"] == "24h"
            && stored["spec"]["users"]["secondFactor"]
                == json!({"default": "optional", "roles": {"admin": "required"}}),
        "the admin's change is stored: {stored}"
    );
    Ok(())
}
