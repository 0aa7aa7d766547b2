//! A compromised issuer pod removing the admins as the controller manager: the issuer's
//! ServiceAccount may impersonate any user name that is not a ServiceAccount, with `ichor:`
//! groups, for creates, updates and deletes of `IchorUser`s (the API writes as the signed-in
//! person). `system:kube-controller-manager` with `ichor:admin` holds an admin's rights through
//! the group, and the webhook's match condition exempted the name whatever its groups: the
//! apiserver did not even call the webhook, so the last admin could be deleted or disabled.
//!
//! The attack, through the real kube-apiserver with the chart's roles and webhook
//! configuration: as the issuer's ServiceAccount, impersonate the controller manager with
//! `ichor:admin` and delete, then disable, alice, the only admin. Both are refused by the
//! last-enabled-admin rule. The real namespace controller (its name with its `system:` groups)
//! is still exempt and deletes alice.

use std::time::Duration;

use anyhow::Context as _;
use ichor_testkit::control_plane::{ControlPlane, Kubectl};
use ichor_testkit::install::{self, ISSUER_SERVICE_ACCOUNT, NAMESPACE};
use ichor_testkit::wait;
use serde_json::json;

use super::Running;

const CONTROLLER_MANAGER: (&str, &[&str]) = ("system:kube-controller-manager", &["ichor:admin"]);

/// kubectl with `kubeconfig` (the issuer's account) impersonating `who`, `stdin` as its input:
/// `Ok(stdout)` or `Err(stderr)`. Only `--raw` requests: the impersonated identity may do
/// nothing but write `IchorUser`s, not even discovery.
fn kubectl_with(
    plane: &ControlPlane,
    kubeconfig: &std::path::Path,
    who: (&str, &[&str]),
    args: &[&str],
    stdin: Option<&str>,
) -> anyhow::Result<Result<String, String>> {
    Kubectl::new(plane.kubectl_bin(), kubeconfig)
        .with_cache_dir(plane.dir().join("kube-cache-issuer"))
        .impersonating(who.0, who.1)
        .output(args, stdin)
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn a_compromised_issuer_cannot_remove_the_last_admin_as_the_controller_manager() -> anyhow::Result<()> {
    let Some(running) = Running::start(&[])? else {
        return Ok(());
    };
    let plane = &running.plane;
    let issuer = install::component_kubeconfig(plane, 0, ISSUER_SERVICE_ACCOUNT)?;
    let last = "cannot disable, demote or delete the last enabled admin \"alice\"";
    let path = format!("/apis/ichor.maesh.dev/v1alpha1/namespaces/{NAMESPACE}/ichorusers/alice");
    let mut disabled = plane
        .get_json(0, "ichoruser", NAMESPACE, "alice")?
        .context("no IchorUser alice")?;
    disabled["spec"]["disabled"] = json!(true);
    let disabled = disabled.to_string();
    let steps: [(&str, [&str; 3], Option<&str>); 2] = [
        ("delete", ["delete", "--raw", &path], None),
        ("disable", ["replace", "--raw", &path], Some(&disabled)),
    ];
    for (what, args, stdin) in steps {
        let args: Vec<&str> = args
            .into_iter()
            .chain(stdin.map(|_| ["-f", "-"]).into_iter().flatten())
            .collect();
        // Waited for only while the issuer's roles have not reached the authorizer.
        let answer = wait::until(
            "the issuer's impersonation authorized",
            Duration::from_secs(20),
            || match kubectl_with(plane, &issuer, CONTROLLER_MANAGER, &args, stdin)? {
                Err(e) if e.contains("cannot impersonate") => Ok(None),
                answer => Ok(Some(answer)),
            },
        )?;
        match answer {
            Ok(out) => anyhow::bail!(
                "the issuer, as the controller manager with ichor:admin, could {what} the last admin: {out}"
            ),
            Err(e) => anyhow::ensure!(
                e.contains(last),
                "{what} as the controller manager: refused, but not by the last-admin rule: {e}"
            ),
        }
    }
    anyhow::ensure!(
        plane.get_json(0, "ichoruser", NAMESPACE, "alice")?.is_some(),
        "alice is gone"
    );

    // The real namespace controller, with only the groups Kubernetes gives it, is still exempt
    // (namespace deletion works while the controller is down).
    let namespace_controller = (
        "system:serviceaccount:kube-system:namespace-controller",
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
            "system:authenticated",
        ][..],
    );
    plane
        .kubectl_as(
            Some(namespace_controller),
            &["delete", "ichoruser", "alice", "-n", NAMESPACE],
            None,
        )?
        .map_err(|e| anyhow::anyhow!("the namespace controller's delete of the last admin: refused: {e}"))?;
    Ok(())
}
