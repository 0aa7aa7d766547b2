//! Replacing the session policy in force with `kubectl` without touching `spec.users`: the
//! issuer, the controller and the CLI use the `spec.users` of the first `IchorInstallation` by
//! name. An operator whom the site lets create, update and delete installations (but not update
//! `ichorinstallations/users`) creates `aaa` without `spec.users` (every default back: no second
//! factor required of admins, the default lifetimes), deletes the installation that carries it,
//! or gives it an owner that does not exist for the garbage collector to delete it. The chart
//! sends every create and delete of an installation to the webhook, which asks for `update` on
//! `ichorinstallations/users` (only `ichor-admin` holds it) for each, and for owner references.

use serde_json::json;

use super::{ALICE, OLGA, Running};

/// The installation in force: admins need a second factor, sessions are short.
const IN_FORCE: &str = r#"{"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorInstallation",
  "metadata": {"name": "ichor"}, "spec": {"users": {"tokenTTL": "5m", "refreshLifetime": "1h",
  "secondFactor": {"roles": {"admin": "required"}}}}}"#;

/// An installation that sorts before `ichor`, without `spec.users`.
const FIRST_BY_NAME: &str = r#"{"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorInstallation",
  "metadata": {"name": "aaa"}, "spec": {}}"#;

/// What a site might grant on top of the built-in roles: every write of installations, to the
/// operator and to the admin alike (the built-in roles grant neither create nor delete).
const SITE_ROLE: &str = r#"apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: site-installations
rules:
  - apiGroups: ["ichor.maesh.dev"]
    resources: ["ichorinstallations"]
    verbs: ["get", "list", "create", "update", "patch", "delete"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: site-installations
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: site-installations
subjects:
  - apiGroup: rbac.authorization.k8s.io
    kind: User
    name: ichor:olga
  - apiGroup: rbac.authorization.k8s.io
    kind: User
    name: ichor:alice
"#;

fn needs(act: &str) -> String {
    format!(
        "spec.users: {act} (the first IchorInstallation by name holds the spec.users in force: every user's \
         session policy, second-factor policy and kubeconfig server) needs verb \"update\" on \
         ichorinstallations/users, which user \"ichor:olga\" does not hold"
    )
}

/// The names of the installations stored, sorted.
fn installations(running: &Running) -> anyhow::Result<Vec<String>> {
    let out = running
        .plane
        .kubectl_run(&["get", "ichorinstallations", "-o", "name"], None)?;
    let mut names: Vec<String> = out
        .lines()
        .filter_map(|l| l.rsplit('/').next())
        .map(str::to_owned)
        .collect();
    names.sort();
    Ok(names)
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn an_operator_cannot_create_one_first_by_name_nor_delete_the_one_in_force_and_an_admin_can()
-> anyhow::Result<()> {
    let Some(running) = Running::start(&[])? else {
        return Ok(());
    };
    let plane = &running.plane;
    plane.apply(IN_FORCE)?;
    plane.apply(SITE_ROLE)?;
    let can = |verb: &str| -> anyhow::Result<bool> {
        let answer = plane.kubectl_as(Some(OLGA), &["auth", "can-i", verb, "ichorinstallations"], None)?;
        Ok(answer.is_ok_and(|out| out.trim() == "yes"))
    };
    anyhow::ensure!(
        can("create")? && can("delete")? && can("patch")?,
        "the site role does not reach the operator"
    );

    // (a) An installation first by name, without spec.users.
    match plane.kubectl_as(Some(OLGA), &["create", "-f", "-"], Some(FIRST_BY_NAME))? {
        Ok(out) => anyhow::bail!("the operator's create of \"aaa\" was accepted: {out}"),
        Err(e) => anyhow::ensure!(
            e.contains(&needs("creating IchorInstallation \"aaa\"")),
            "the create was refused, but not for the right: {e}"
        ),
    }
    // (b) The installation in force deleted.
    match plane.kubectl_as(Some(OLGA), &["delete", "ichorinstallation", "ichor"], None)? {
        Ok(out) => anyhow::bail!("the operator's delete of \"ichor\" was accepted: {out}"),
        Err(e) => anyhow::ensure!(
            e.contains(&needs("deleting IchorInstallation \"ichor\"")),
            "the delete was refused, but not for the right: {e}"
        ),
    }
    // (c) Handed to the garbage collector: an owner that does not exist.
    let owner = json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Namespace",
        "name": "gone", "uid": "0d5c7e2a-3f41-4b8e-9a57-6c1d2e3f4a5b"}]}});
    let patch = |body: &serde_json::Value| {
        vec![
            "patch".to_owned(),
            "ichorinstallation".to_owned(),
            "ichor".to_owned(),
            "--type=merge".to_owned(),
            "-p".to_owned(),
            body.to_string(),
        ]
    };
    match plane.kubectl_as(Some(OLGA), &patch(&owner), None)? {
        Ok(out) => anyhow::bail!("the operator's owner reference was accepted: {out}"),
        Err(e) => anyhow::ensure!(
            e.contains("metadata.ownerReferences: giving IchorInstallation \"ichor\" owner references")
                && e.contains("which user \"ichor:olga\" does not hold"),
            "the owner reference was refused, but not for the right: {e}"
        ),
    }
    anyhow::ensure!(
        installations(&running)? == ["ichor"],
        "the operator changed which installations exist"
    );
    let stored = plane.kubectl_run(&["get", "ichorinstallation", "ichor", "-o", "json"], None)?;
    let stored: serde_json::Value = serde_json::from_str(&stored)?;
    anyhow::ensure!(
        stored["spec"]["users"]["secondFactor"] == json!({"roles": {"admin": "required"}})
            && stored["metadata"]["ownerReferences"].is_null(),
        "the installation in force changed: {stored}"
    );
    // What needs nothing more stays open to the operator.
    plane
        .kubectl_as(
            Some(OLGA),
            &patch(&json!({"metadata": {"labels": {"team": "platform"}}})),
            None,
        )?
        .map_err(|e| anyhow::anyhow!("the operator's label change was refused: {e}"))?;

    // An admin may do both.
    plane
        .kubectl_as(Some(ALICE), &["create", "-f", "-"], Some(FIRST_BY_NAME))?
        .map_err(|e| anyhow::anyhow!("the admin's create was refused: {e}"))?;
    plane
        .kubectl_as(Some(ALICE), &["delete", "ichorinstallation", "ichor"], None)?
        .map_err(|e| anyhow::anyhow!("the admin's delete was refused: {e}"))?;
    anyhow::ensure!(
        installations(&running)? == ["aaa"],
        "the admin's create and delete are stored"
    );
    Ok(())
}
