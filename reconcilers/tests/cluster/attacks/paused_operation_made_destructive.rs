//! An operator may create routine `TalosOperation`s but not destructive ones. The attack: create
//! a paused, harmless operation (a node reboot), then turn it into a destructive one by an
//! update — `spec.action: reset`, `spec.kind: shutdown`, an oddly spelled kind — or retarget a
//! destructive one an admin created, or resume one an admin holds paused, or write a shape whose
//! effect is a guess (`kind: reboot, action: reset`). Each change of what an operation does, and
//! resuming a destructive one, needs the same `start` right as creating it; pausing needs none.

use ichor_testkit::install::NAMESPACE;
use serde_json::json;

use super::{ALICE, OLGA, Running};
use crate::replicas::merge_patch;

fn operation(name: &str, kind: &str, action: Option<&str>, machines: &[&str]) -> String {
    let mut spec = json!({"cluster": "prod", "kind": kind, "paused": true, "machines": machines});
    if let Some(action) = action {
        spec["action"] = json!(action);
    }
    json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "TalosOperation",
        "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec})
    .to_string()
}

const CREATE: [&str; 4] = ["create", "-o", "name", "-f"];

fn create_args() -> Vec<&'static str> {
    let mut args = CREATE.to_vec();
    args.push("-");
    args
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn an_operator_cannot_patch_a_paused_reboot_into_a_reset_or_a_shutdown() -> anyhow::Result<()> {
    let Some(running) = Running::start(&[])? else {
        return Ok(());
    };
    let plane = &running.plane;
    let refused = |what: &str, answer: Result<String, String>, why: &str| -> anyhow::Result<()> {
        match answer {
            Ok(out) => anyhow::bail!("{what}: accepted ({out})"),
            Err(e) => {
                anyhow::ensure!(e.contains(why), "{what}: refused, but not for {why:?}: {e}");
                Ok(())
            }
        }
    };
    let accepted = |what: &str, answer: Result<String, String>| -> anyhow::Result<()> {
        answer
            .map(|_| ())
            .map_err(|e| anyhow::anyhow!("{what}: refused: {e}"))
    };

    // The harmless start an operator may make.
    accepted(
        "an operator creates a paused node reboot",
        plane.kubectl_as(
            Some(OLGA),
            &create_args(),
            Some(&operation("maint", "node", Some("reboot"), &["cp-1"])),
        )?,
    )?;
    // The attack: the same object made destructive by an update.
    refused(
        "an operator patches the reboot into a reset",
        plane.kubectl_as(
            Some(OLGA),
            &merge_patch(
                "talosoperation",
                "maint",
                &json!({"spec": {"action": "reset"}}),
                false,
            ),
            None,
        )?,
        "verb \"start\" on talosoperations/node-reset",
    )?;
    refused(
        "an operator patches the node operation into a cluster shutdown",
        plane.kubectl_as(
            Some(OLGA),
            &merge_patch(
                "talosoperation",
                "maint",
                &json!({"spec": {"kind": "shutdown", "action": null}}),
                false,
            ),
            None,
        )?,
        "verb \"start\" on talosoperations/shutdown",
    )?;
    for odd in ["Shutdown", "shutdown ", "etcd_restore", "ca-rotation\u{200b}"] {
        refused(
            &format!("an operator patches the kind into {odd:?}"),
            plane.kubectl_as(
                Some(OLGA),
                &merge_patch(
                    "talosoperation",
                    "maint",
                    &json!({"spec": {"kind": odd, "action": null}}),
                    false,
                ),
                None,
            )?,
            "spec.kind",
        )?;
        refused(
            &format!("an operator creates a {odd:?} operation"),
            plane.kubectl_as(
                Some(OLGA),
                &create_args(),
                Some(&operation("odd", odd, None, &[])),
            )?,
            "spec.kind",
        )?;
    }
    let stored = plane
        .get_json(0, "talosoperation", NAMESPACE, "maint")?
        .ok_or_else(|| anyhow::anyhow!("maint is gone"))?;
    assert_eq!(stored["spec"]["kind"], "node", "{stored}");
    assert_eq!(stored["spec"]["action"], "reboot", "{stored}");
    refused(
        "an operator creates a reboot with a reset action",
        plane.kubectl_as(
            Some(OLGA),
            &create_args(),
            Some(&operation("sneak", "reboot", Some("reset"), &["cp-1"])),
        )?,
        "spec.action: only an operation of kind \"node\" takes an action",
    )?;
    // Pausing and resuming a routine operation are no start.
    accepted(
        "an operator resumes the reboot",
        plane.kubectl_as(
            Some(OLGA),
            &merge_patch(
                "talosoperation",
                "maint",
                &json!({"spec": {"paused": false}}),
                false,
            ),
            None,
        )?,
    )?;
    // An admin holds the right, on update as on create.
    accepted(
        "an admin makes it a reset (dry run)",
        plane.kubectl_as(
            Some(ALICE),
            &merge_patch(
                "talosoperation",
                "maint",
                &json!({"spec": {"action": "reset"}}),
                true,
            ),
            None,
        )?,
    )?;

    // A destructive operation an admin created, retargeted by an operator.
    accepted(
        "an admin creates a paused reset of cp-1",
        plane.kubectl_as(
            Some(ALICE),
            &create_args(),
            Some(&operation("wipe", "node", Some("reset"), &["cp-1"])),
        )?,
    )?;
    refused(
        "an operator points the reset at another machine",
        plane.kubectl_as(
            Some(OLGA),
            &merge_patch(
                "talosoperation",
                "wipe",
                &json!({"spec": {"machines": ["cp-2"]}}),
                false,
            ),
            None,
        )?,
        "verb \"start\" on talosoperations/node-reset",
    )?;
    refused(
        "an operator points the reset at another cluster",
        plane.kubectl_as(
            Some(OLGA),
            &merge_patch(
                "talosoperation",
                "wipe",
                &json!({"spec": {"cluster": "staging"}}),
                false,
            ),
            None,
        )?,
        "verb \"start\" on talosoperations/node-reset",
    )?;
    refused(
        "an operator resumes the reset the admin holds paused",
        plane.kubectl_as(
            Some(OLGA),
            &merge_patch(
                "talosoperation",
                "wipe",
                &json!({"spec": {"paused": false}}),
                false,
            ),
            None,
        )?,
        "spec.paused: resuming a node \"reset\" operation needs verb \"start\" on talosoperations/node-reset",
    )?;
    accepted(
        "an admin resumes it (dry run)",
        plane.kubectl_as(
            Some(ALICE),
            &merge_patch(
                "talosoperation",
                "wipe",
                &json!({"spec": {"paused": false}}),
                true,
            ),
            None,
        )?,
    )?;
    accepted(
        "an operator pauses the admin's reset",
        plane.kubectl_as(
            Some(OLGA),
            &merge_patch(
                "talosoperation",
                "wipe",
                &json!({"spec": {"paused": true}}),
                false,
            ),
            None,
        )?,
    )?;
    Ok(())
}
