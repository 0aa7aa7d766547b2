//! A compromised controller pod holds `create` on Secrets, which Kubernetes cannot restrict by
//! name. The attacks: forge a Helm release record (which `ichor init` and `helm upgrade
//! --reuse-values` would trust), create a Secret of any other name, or create one of the names
//! the controller owns, or the credentials Secret a users-off install lacks, as a
//! ServiceAccount-token Secret and read the token back, or create the legacy credentials Secret
//! (which the way back from one Secret per user creates again, empty, in phase `returning`)
//! holding entries of its choice or in another phase. As the controller's own ServiceAccount
//! (a TokenRequest token, so the apiserver decides with the chart's RBAC and its admission
//! policy), each is refused; the Secrets it does create still are not.

use std::time::Duration;

use ichor_testkit::control_plane::{ControlPlane, Kubectl};
use ichor_testkit::install::{self, CONTROLLER_SERVICE_ACCOUNT, NAMESPACE};
use ichor_testkit::{control_plane::Options, wait};
use serde_json::json;

/// kubectl with `kubeconfig`, `stdin` piped: `Ok(stdout)` or `Err(stderr)`.
fn kubectl_with(
    plane: &ControlPlane,
    kubeconfig: &std::path::Path,
    args: &[&str],
    stdin: &str,
) -> anyhow::Result<Result<String, String>> {
    Kubectl::new(plane.kubectl_bin(), kubeconfig)
        .with_cache_dir(plane.dir().join("kube-cache-controller"))
        .output(args, Some(stdin))
}

fn secret(name: &str, type_: &str, annotations: serde_json::Value) -> String {
    json!({"apiVersion": "v1", "kind": "Secret", "type": type_,
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations,
            "labels": {"owner": "helm", "name": "ichor", "status": "deployed", "version": "9"}},
        "data": {}})
    .to_string()
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn the_controller_can_create_only_its_own_secrets_of_their_own_types() -> anyhow::Result<()> {
    let Some(plane) = ControlPlane::start(Options::default())? else {
        return Ok(());
    };
    install::install(&plane)?;
    let kubeconfig = install::component_kubeconfig(&plane, 0, CONTROLLER_SERVICE_ACCOUNT)?;
    let create = ["create", "-o", "name", "-f", "-"];
    let dry = ["create", "--dry-run=server", "-o", "name", "-f", "-"];
    let token_of = |sa: &str| json!({"kubernetes.io/service-account.name": sa});

    // What it must still create (a server dry run: reviewed, not stored).
    for (name, type_) in [
        ("ichor-oidc-signing", "Opaque"),
        ("ichor-oidc-ca", "kubernetes.io/tls"),
        ("ichor-oidc-tls", "kubernetes.io/tls"),
        ("ichor-webhook-tls", "kubernetes.io/tls"),
    ] {
        let mut body: serde_json::Value = serde_json::from_str(&secret(name, type_, json!({})))?;
        if type_ == "kubernetes.io/tls" {
            body["data"] = json!({"tls.crt": "", "tls.key": ""});
        }
        if let Err(e) = kubectl_with(&plane, &kubeconfig, &dry, &body.to_string())? {
            anyhow::bail!("the controller may no longer create its own Secret {name}: {e}");
        }
    }
    let returning = json!({"ichor.maesh.dev/credentials-layout": "returning"});
    let mut empty_returning: serde_json::Value =
        serde_json::from_str(&secret("ichor-user-credentials", "Opaque", returning.clone()))?;
    if let Some(m) = empty_returning.as_object_mut() {
        m.remove("data");
    }
    let admitted = |body: &str| -> anyhow::Result<()> {
        wait::until(
            "the legacy Secret, empty in phase returning, admitted",
            Duration::from_secs(30),
            || Ok(kubectl_with(&plane, &kubeconfig, &dry, body)?.ok()),
        )?;
        Ok(())
    };
    admitted(&empty_returning.to_string())?;

    let attacks = [
        (
            "a forged Helm release record",
            secret("sh.helm.release.v1.ichor.v9", "helm.sh/release.v1", json!({})),
        ),
        (
            "an Opaque Secret of another name",
            secret("forged", "Opaque", json!({})),
        ),
        (
            "a ServiceAccount-token Secret named as the credentials Secret",
            secret(
                "ichor-user-credentials",
                "kubernetes.io/service-account-token",
                token_of("ichor-issuer"),
            ),
        ),
        (
            "a ServiceAccount-token Secret named as its own signing Secret",
            secret(
                "ichor-oidc-signing",
                "kubernetes.io/service-account-token",
                token_of("ichor-controller"),
            ),
        ),
        (
            "an Opaque credentials Secret",
            secret("ichor-user-credentials", "Opaque", json!({})),
        ),
        (
            "the credentials Secret in phase migrating",
            secret(
                "ichor-user-credentials",
                "Opaque",
                json!({"ichor.maesh.dev/credentials-layout": "migrating"}),
            ),
        ),
        (
            "the credentials Secret in phase returning holding an entry",
            json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": "ichor-user-credentials", "namespace": NAMESPACE,
                    "annotations": returning},
                "data": {"alice": "e30="}})
            .to_string(),
        ),
        (
            "the credentials Secret in phase returning holding an entry as stringData",
            json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": "ichor-user-credentials", "namespace": NAMESPACE,
                    "annotations": {"ichor.maesh.dev/credentials-layout": "returning"}},
                "stringData": {"alice": "{}"}})
            .to_string(),
        ),
    ];
    // An admission policy takes effect a moment after it is created: wait for the first refusal
    // (on the code before the policy, it never comes).
    wait::until(
        "the forged release record refused",
        Duration::from_secs(30),
        || Ok(kubectl_with(&plane, &kubeconfig, &dry, &attacks[0].1)?.err()),
    )?;
    for (what, body) in &attacks {
        match kubectl_with(&plane, &kubeconfig, &create, body)? {
            Ok(out) => anyhow::bail!("the controller created {what}: {out}"),
            Err(e) => assert!(
                e.contains("Forbidden") || e.contains("forbidden") || e.contains("denied"),
                "{what}: refused for another reason: {e}"
            ),
        }
    }
    for name in [
        "sh.helm.release.v1.ichor.v9",
        "forged",
        "ichor-user-credentials",
        "ichor-oidc-signing",
    ] {
        assert!(
            plane.get_json(0, "secret", NAMESPACE, name)?.is_none(),
            "Secret {name} exists"
        );
    }
    Ok(())
}
