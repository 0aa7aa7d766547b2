//! The chart and the CRDs on a real apiserver: the chart with users off, then with users on over
//! it, is accepted object by object; every CRD Ichor installs or watches becomes established; the
//! `IchorUser` rules (a DNS-label name that cannot change, the roles' pattern, count and
//! uniqueness, the bounded informational fields) and the shape of
//! `IchorInstallation.spec.users.secondFactor` (its levels, its roles' names and count) are
//! enforced by the apiserver itself, with the messages a `kubectl apply` user sees (golden files).

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

/// An `IchorInstallation` named `ichor` whose `spec.users.secondFactor` is the YAML `policy`
/// (indented under it), as an operator writes it for `kubectl apply`.
fn installation_yaml(policy: &str) -> String {
    let policy: String = policy.lines().map(|l| format!("      {l}\n")).collect();
    format!(
        "apiVersion: ichor.maesh.dev/v1alpha1\nkind: IchorInstallation\nmetadata:\n  name: ichor\n\
         spec:\n  users:\n    secondFactor:\n{policy}"
    )
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn the_apiserver_enforces_the_second_factor_policy_s_shape_with_the_messages_kubectl_shows()
-> anyhow::Result<()> {
    let Some(plane) = ControlPlane::start(Options::default())? else {
        return Ok(());
    };
    install::install_crds(&plane)?;

    // Every level, by default and per role, is taken as written.
    plane.apply(&installation_yaml(
        "default: \"off\"\nroles:\n  admin: required\n  viewer: optional\n  db-ops: \"off\"",
    ))?;
    let stored: Value = serde_json::from_str(
        &plane.kubectl_run(&["get", "ichorinstallation", "ichor", "-o", "json"], None)?,
    )?;
    assert_eq!(
        stored["spec"]["users"]["secondFactor"],
        json!({"default": "off", "roles": {"admin": "required", "viewer": "optional", "db-ops": "off"}}),
        "{stored}"
    );
    let policy = ichor_renderers::crd::UsersSettings::resolve(
        serde_json::from_value::<ichor_renderers::crd::IchorInstallationSpec>(stored["spec"].clone())?
            .users
            .as_ref(),
    )?
    .second_factor;
    assert_eq!(
        policy.level_for(&["viewer", "admin"]),
        ichor_renderers::auth::second_factor_policy::SecondFactorLevel::Required
    );

    let many: String = (0..17).map(|i| format!("  role-{i}: required\n")).collect();
    let cases = [
        ("a level that is not one", "default: always".to_owned()),
        (
            "a level of a role that is not one",
            "roles:\n  admin: mandatory".to_owned(),
        ),
        (
            "a role with a capital letter",
            "roles:\n  Admin: required".to_owned(),
        ),
        (
            "a role of 32 characters",
            format!("roles:\n  {}: required", "r".repeat(32)),
        ),
        ("17 roles", format!("roles:\n{many}")),
        (
            "off not quoted (YAML 1.1 reads a boolean)",
            "default: off".to_owned(),
        ),
        ("a field the schema does not have", "always: true".to_owned()),
    ];
    let mut golden = String::new();
    for (what, policy) in &cases {
        let stderr = refused(
            &plane,
            &["apply", "--server-side", "--field-manager=ichor-test", "-f", "-"],
            Some(&installation_yaml(policy)),
        )?;
        writeln!(golden, "## {what}\n{stderr}\n")?;
    }
    insta::assert_snapshot!("second_factor_refusals", golden);
    Ok(())
}
