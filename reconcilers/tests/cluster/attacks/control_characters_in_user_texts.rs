//! Someone who may write `IchorUser`s with `kubectl` (an operator, a GitOps pipeline) puts a
//! terminal escape sequence into `spec.displayName` or `spec.email`, to have it run in the
//! terminal of every admin who types `ichor user list`. The API refuses such text; the CRD
//! itself must refuse it on the real apiserver (its CEL rules), for every writer, before any
//! webhook runs — and accept ordinary text in any script.

use ichor_testkit::control_plane::{ControlPlane, Options};
use ichor_testkit::install::{self, NAMESPACE};
use serde_json::{Value, json};

fn user(name: &str, spec: Value) -> String {
    json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
        "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec})
    .to_string()
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn the_apiserver_refuses_control_characters_in_a_users_display_name_and_email() -> anyhow::Result<()> {
    let Some(plane) = ControlPlane::start(Options::default())? else {
        return Ok(());
    };
    install::install_crds(&plane)?;
    let create = ["create", "-f", "-"];
    let cases = [
        (
            "an OSC title and bell",
            json!({"displayName": "Eve\u{1b}]0;pwned\u{7}"}),
            "spec.displayName",
        ),
        (
            "a screen clear",
            json!({"displayName": "Eve\u{1b}[2J"}),
            "spec.displayName",
        ),
        (
            "a C1 CSI",
            json!({"displayName": "Eve\u{9b}31m"}),
            "spec.displayName",
        ),
        (
            "a carriage return",
            json!({"displayName": "Eve\rroot"}),
            "spec.displayName",
        ),
        ("a DEL", json!({"displayName": "Eve\u{7f}"}), "spec.displayName"),
        (
            "an escape in an e-mail",
            json!({"email": "eve@example.com\u{1b}[8m"}),
            "spec.email",
        ),
        (
            "a newline in an e-mail",
            json!({"email": "eve@example.com\nroot"}),
            "spec.email",
        ),
        (
            "a space in an e-mail",
            json!({"email": "eve @example.com"}),
            "spec.email",
        ),
        (
            "a wide space in an e-mail",
            json!({"email": "eve\u{3000}@example.com"}),
            "spec.email",
        ),
    ];
    for (what, spec, field) in cases {
        let stderr = match plane.kubectl_as(None, &create, Some(&user("eve", spec)))? {
            Ok(out) => anyhow::bail!("{what}: the apiserver accepted it: {out}"),
            Err(stderr) => stderr,
        };
        assert!(
            stderr.contains(field) && stderr.contains("must not contain control characters"),
            "{what}: {stderr}"
        );
    }
    // Ordinary text of any script passes.
    plane.apply(&user(
        "ann",
        json!({"displayName": "Ann Bø 安 — O'Neil", "email": "ann.b+x@example.com"}),
    ))?;
    let names = plane.kubectl_run(&["get", "ichorusers", "-n", NAMESPACE, "-o", "name"], None)?;
    assert_eq!(names.trim(), "ichoruser.ichor.maesh.dev/ann");
    Ok(())
}
