//! The chart and the CRDs on a real apiserver: the chart with users off, then with users on over
//! it, is accepted object by object; every CRD Ichor installs or watches becomes established; the
//! `IchorUser` rules (a DNS-label name that cannot change, the roles' pattern, count and
//! uniqueness, the bounded informational fields) are enforced by the apiserver itself, with the
//! messages a `kubectl apply` user sees (a golden file).

use std::fmt::Write as _;

use ichor_testkit::control_plane::{ControlPlane, Options};

use crate::replicas::merge_patch;
use ichor_testkit::install::{self, NAMESPACE};
use serde_json::{Value, json};

fn user(name: &str, spec: Value) -> String {
    json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
        "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec})
    .to_string()
}

/// Runs kubectl as the admin, which must fail; its stderr.
fn refused<S: AsRef<std::ffi::OsStr>>(
    plane: &ControlPlane,
    args: &[S],
    stdin: Option<&str>,
) -> anyhow::Result<String> {
    match plane.kubectl_as(None, args, stdin)? {
        Ok(out) => {
            let args: Vec<_> = args.iter().map(|a| a.as_ref().to_string_lossy()).collect();
            anyhow::bail!("kubectl {} was accepted: {out}", args.join(" "))
        }
        Err(stderr) => Ok(stderr),
    }
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn the_apiserver_enforces_the_ichoruser_rules_with_the_messages_kubectl_shows() -> anyhow::Result<()> {
    let Some(plane) = ControlPlane::start(Options::default())? else {
        return Ok(());
    };
    // The chart with its default values (users off) first, then users turned on over it, as an
    // upgrade does: every object of both is accepted by the apiserver.
    install::install_crds(&plane)?;
    let workloads = || {
        let args = [
            "get",
            "deployments,serviceaccounts",
            "-n",
            NAMESPACE,
            "-o",
            "name",
        ];
        plane.kubectl_run(&args, None)
    };
    plane.apply(&install::chart_manifest_users_off()?)?;
    let off = workloads()?;
    assert!(off.contains("deployment.apps/ichor-controller"), "{off}");
    assert!(
        !off.contains("ichor-issuer"),
        "users off installs no issuer: {off}"
    );
    install::install_chart(&plane)?;
    let on = workloads()?;
    assert!(on.contains("deployment.apps/ichor-issuer"), "{on}");
    let established = plane.kubectl_run(&["get", "crd", "-o", "name"], None)?;
    for crd in [
        "ichorusers.ichor.maesh.dev",
        "talosclusters.ichor.maesh.dev",
        "talosmachines.ichor.maesh.dev",
        "talosoperations.ichor.maesh.dev",
        "ichorinstallations.ichor.maesh.dev",
    ] {
        assert!(established.contains(crd), "{crd} is not served: {established}");
    }

    // A valid user is taken as written, defaults filled in by the schema.
    plane.apply(&user(
        "alice",
        json!({"displayName": "Alice", "roles": ["admin", "viewer"]}),
    ))?;
    let alice: Value = serde_json::from_str(&plane.kubectl_run(
        &["get", "ichoruser", "alice", "-n", NAMESPACE, "-o", "json"],
        None,
    )?)?;
    assert_eq!(alice["spec"]["disabled"], false, "the schema's default: {alice}");
    assert_eq!(alice["spec"]["roles"], json!(["admin", "viewer"]));

    let long_name = "a".repeat(64);
    let many: Vec<String> = (0..17).map(|i| format!("role-{i}")).collect();
    let cases: Vec<(&str, String)> = vec![
        (
            "a name that is a DNS subdomain but not a label",
            user("alice.smith", json!({})),
        ),
        ("a name of 64 characters", user(&long_name, json!({}))),
        (
            "a role with a capital letter",
            user("bob", json!({"roles": ["Admin"]})),
        ),
        (
            "a role of 32 characters",
            user("bob", json!({"roles": ["r".repeat(32)]})),
        ),
        ("17 roles", user("bob", json!({"roles": many}))),
        (
            "the same role twice",
            user("bob", json!({"roles": ["admin", "admin"]})),
        ),
        (
            "a display name of 257 characters",
            user("bob", json!({"displayName": "d".repeat(257)})),
        ),
        (
            "a field the schema does not have",
            user("bob", json!({"password": "hunter2"})),
        ),
    ];
    let mut golden = String::new();
    for (what, manifest) in &cases {
        let stderr = refused(
            &plane,
            &["apply", "--server-side", "--field-manager=ichor-test", "-f", "-"],
            Some(manifest),
        )?;
        writeln!(golden, "## {what}\n{stderr}\n")?;
    }
    let rename = merge_patch(
        "ichoruser",
        "alice",
        &json!({"metadata": {"name": "mallory"}}),
        false,
    );
    let stderr = refused(&plane, &rename, None)?;
    writeln!(golden, "## a rename (the name is the identity)\n{stderr}")?;
    assert!(
        !golden.contains("hunter2"),
        "a refused value is not echoed back: {golden}"
    );
    insta::assert_snapshot!("ichoruser_refusals", golden);

    // Nothing half-written: only alice exists.
    let names = plane.kubectl_run(&["get", "ichorusers", "-n", NAMESPACE, "-o", "name"], None)?;
    assert_eq!(names.trim(), "ichoruser.ichor.maesh.dev/alice");
    Ok(())
}
