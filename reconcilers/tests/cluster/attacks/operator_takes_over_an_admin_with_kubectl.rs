//! Taking over, or removing, the admins with `kubectl` under a site's delegated user-management
//! role (`ichorusers` rights bound to `ichor:operator`): the operator re-enables a disabled admin
//! whose password it knows; then, with a finalizer on one admin and that admin deleted (so it
//! stays as a terminating object that still looks like an enabled admin), the last real admin
//! is disabled, demoted or deleted; and a ServiceAccount with the same rights disables the last
//! admin, which the chart's match condition used to exempt with every other `system:` name.
//! The operator also tries to clear the way to an admin's password by demoting, disabling or
//! deleting it first; and an admin disabled by another keeps a kubectl token carrying
//! `ichor:admin` and tries to re-enable itself, or to make another admin, with it; and the
//! operator gives an admin an owner reference that does not exist, for the garbage collector
//! (exempt) to delete it.
//! Every step goes through the real apiserver, the chart's webhook configuration and its roles.

use std::time::Duration;

use ichor_testkit::install::NAMESPACE;
use ichor_testkit::wait;
use serde_json::json;

use super::{ALICE, OLGA, Running};
use crate::replicas::merge_patch;

/// Operators manage users, as a site may choose to let them.
const OPERATORS_MANAGE_USERS: &str = "\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: user-manager}
rules:
- apiGroups: [ichor.maesh.dev]
  resources: [ichorusers]
  verbs: [get, list, create, update, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: operators-manage-users}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: user-manager}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: 'ichor:operator'}
- {kind: ServiceAccount, name: deployer, namespace: ichor-system}
";

/// A CI robot's ServiceAccount with the same rights.
const DEPLOYER: (&str, &[&str]) = (
    "system:serviceaccount:ichor-system:deployer",
    &[
        "system:serviceaccounts",
        "system:serviceaccounts:ichor-system",
        "system:authenticated",
    ],
);

fn user(name: &str, roles: &[&str], disabled: bool) -> String {
    json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"displayName": name, "roles": roles, "disabled": disabled}})
    .to_string()
}

type Answer = Result<String, String>;

fn refused(what: &str, answer: Answer, why: &str) -> anyhow::Result<()> {
    match answer {
        Ok(out) => anyhow::bail!("{what}: accepted ({out})"),
        Err(e) => {
            anyhow::ensure!(e.contains(why), "{what}: refused, but not for {why:?}: {e}");
            Ok(())
        }
    }
}

fn accepted(what: &str, answer: Answer) -> anyhow::Result<()> {
    answer
        .map(|_| ())
        .map_err(|e| anyhow::anyhow!("{what}: refused: {e}"))
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn an_operator_cannot_re_enable_an_admin_nor_remove_the_last_one_behind_a_finalizer_or_a_service_account()
-> anyhow::Result<()> {
    let Some(running) = Running::start(&[])? else {
        return Ok(());
    };
    let plane = &running.plane;
    plane.apply(OPERATORS_MANAGE_USERS)?;
    plane.apply(&user("sleeper", &["admin"], true))?;
    plane.apply(&user("napper", &["viewer"], true))?;
    let enable = json!({"spec": {"disabled": false}});

    // Re-enabling is an act on the user: only someone who may grant each of its roles.
    refused(
        "an operator re-enables a disabled admin",
        plane.kubectl_as(
            Some(OLGA),
            &merge_patch("ichoruser", "sleeper", &enable, false),
            None,
        )?,
        "you may not re-enable user \"sleeper\": it holds role \"admin\", which is above your highest role \"operator\"",
    )?;
    accepted(
        "an operator re-enables a disabled viewer",
        plane.kubectl_as(
            Some(OLGA),
            &merge_patch("ichoruser", "napper", &enable, false),
            None,
        )?,
    )?;

    // Taking a role away, disabling and deleting are acts on the user too: an operator may not
    // make an admin something whose password it may then set.
    plane.apply(&user("boss", &["admin"], false))?;
    let steps: [(&str, Vec<String>, &str); 4] = [
        (
            "an operator demotes an admin",
            merge_patch(
                "ichoruser",
                "boss",
                &json!({"spec": {"roles": ["operator"]}}),
                false,
            ),
            "you may not take a role from user \"boss\"",
        ),
        (
            "an operator disables an admin",
            merge_patch("ichoruser", "boss", &json!({"spec": {"disabled": true}}), false),
            "you may not disable user \"boss\"",
        ),
        (
            "an operator deletes an admin",
            ["delete", "ichoruser", "boss", "-n", NAMESPACE]
                .map(str::to_owned)
                .to_vec(),
            "you may not delete user \"boss\"",
        ),
        (
            // An owner that does not exist: the exempt garbage collector would delete boss.
            "an operator gives an admin an owner reference",
            merge_patch(
                "ichoruser",
                "boss",
                &json!({"metadata": {"ownerReferences": [{
                    "apiVersion": "v1", "kind": "ConfigMap", "name": "x",
                    "uid": "0d5c7e2a-3f41-4b8e-9a57-6c1d2e3f4a5b"}]}}),
                false,
            ),
            "metadata.ownerReferences: you may not delete user \"boss\"",
        ),
    ];
    for (what, args, why) in steps {
        refused(what, plane.kubectl_as(Some(OLGA), &args, None)?, why)?;
    }
    // An admin may (and boss must go: the last-admin steps below need alice alone).
    accepted(
        "alice deletes boss",
        plane.kubectl_as(
            Some(ALICE),
            &["delete", "ichoruser", "boss", "-n", NAMESPACE],
            None,
        )?,
    )?;

    // An admin disabled by another still holds a kubectl token with `ichor:admin` until it
    // expires: with it, it may neither re-enable itself nor make another admin.
    plane.apply(&user("mallory", &["admin"], false))?;
    accepted(
        "alice disables mallory",
        plane.kubectl_as(
            Some(ALICE),
            &merge_patch(
                "ichoruser",
                "mallory",
                &json!({"spec": {"disabled": true}}),
                false,
            ),
            None,
        )?,
    )?;
    let mallory = ("ichor:mallory", &["ichor:admin"][..]);
    match plane.kubectl_as(
        Some(mallory),
        &merge_patch("ichoruser", "mallory", &enable, false),
        None,
    )? {
        Ok(out) => anyhow::bail!("mallory re-enables itself: accepted ({out})"),
        Err(e) => anyhow::ensure!(
            e.contains("\"mallory\" is disabled") || e.contains("\"mallory\" may not re-enable itself"),
            "mallory re-enables itself: refused, but not as a disabled requester: {e}"
        ),
    }
    let dry = ["create", "--dry-run=server", "-o", "name", "-f", "-"];
    wait::until(
        "mallory's remaining token refused",
        Duration::from_secs(10),
        || match plane.kubectl_as(Some(mallory), &dry, Some(&user("eve", &["admin"], false)))? {
            // The webhook's cache may be a moment behind the disable.
            Ok(_) => Ok(None),
            Err(e) if e.contains("\"mallory\" is disabled") => Ok(Some(())),
            Err(e) => Err(anyhow::anyhow!("refused, but not as a disabled requester: {e}")),
        },
    )?;

    // The finalizer sequence: bob, a second admin, held by a finalizer and deleted.
    plane.apply(&user("bob", &["admin"], false))?;
    accepted(
        "a finalizer on bob",
        plane.kubectl_as(
            Some(ALICE),
            &merge_patch(
                "ichoruser",
                "bob",
                &json!({"metadata": {"finalizers": ["example.com/hold"]}}),
                false,
            ),
            None,
        )?,
    )?;
    accepted(
        "bob deleted while alice is another enabled admin",
        plane.kubectl_as(
            Some(ALICE),
            &["delete", "ichoruser", "bob", "-n", NAMESPACE, "--wait=false"],
            None,
        )?,
    )?;
    let last = "cannot disable, demote or delete the last enabled admin \"alice\"";
    refused(
        "alice disabled while the only other admin is terminating",
        plane.kubectl_as(
            Some(ALICE),
            &merge_patch("ichoruser", "alice", &json!({"spec": {"disabled": true}}), false),
            None,
        )?,
        last,
    )?;
    refused(
        "alice demoted while the only other admin is terminating",
        plane.kubectl_as(
            Some(ALICE),
            &merge_patch(
                "ichoruser",
                "alice",
                &json!({"spec": {"roles": ["viewer"]}}),
                false,
            ),
            None,
        )?,
        last,
    )?;
    refused(
        "alice deleted while the only other admin is terminating",
        plane.kubectl_as(
            Some(ALICE),
            &["delete", "ichoruser", "alice", "-n", NAMESPACE],
            None,
        )?,
        last,
    )?;
    // A terminating admin's update is checked like any other: bob cannot be disabled either
    // (alice is the other admin, so this one passes), and releasing its finalizer passes.
    accepted(
        "bob's finalizer released",
        plane.kubectl_as(
            Some(ALICE),
            &merge_patch(
                "ichoruser",
                "bob",
                &json!({"metadata": {"finalizers": null}}),
                false,
            ),
            None,
        )?,
    )?;

    // Any ServiceAccount but the namespace controller and the garbage collector is checked.
    refused(
        "a CI ServiceAccount disables the last admin",
        plane.kubectl_as(
            Some(DEPLOYER),
            &merge_patch("ichoruser", "alice", &json!({"spec": {"disabled": true}}), false),
            None,
        )?,
        last,
    )?;
    Ok(())
}
