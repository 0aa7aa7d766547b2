//! The namespace `ichor-credentials` holds one Secret per user, and the issuer's and the
//! controller's Roles there grant Secrets without `resourceNames` (the names cannot be listed in
//! advance). Such a grant is as narrow as one by name only while nothing but credentials can be
//! in the namespace. The attacks, each through the real kube-apiserver under the chart's RBAC and
//! its `ValidatingAdmissionPolicy` `ichor-credentials` (applied from the rendered chart):
//!
//! - a compromised issuer (its ServiceAccount's own token) plants a Secret that is not a user's
//!   credentials (an `Opaque` one, one of another name, with another user's label, with a second
//!   key, without data): all refused, while a real one is admitted and an update smuggling in a
//!   key or a label is refused; an identity the RBAC lets create Secrets there, but which is
//!   neither the issuer nor the controller, is refused even a well-formed one;
//! - a ServiceAccount-token Secret, which the token controller would fill with a token readable
//!   by every holder of the Roles, cannot be created there, by the issuer, the controller or the
//!   cluster's admin;
//! - the issuer reads no Secret of `ichor-system` but the legacy credentials Secret (not the
//!   signing keys, not a Talos credentials Secret, not a Helm record), reads a per-user Secret
//!   by its name, and can list or watch none.

use std::path::Path;
use std::time::Duration;

use ichor_testkit::control_plane::{ControlPlane, Kubectl, Options};
use ichor_testkit::install::{
    self, CONTROLLER_SERVICE_ACCOUNT, CREDENTIALS_NAMESPACE, ISSUER_SERVICE_ACCOUNT, NAMESPACE,
};
use ichor_testkit::wait;
use serde_json::{Value, json};

/// `entry` of a Secret: any base64 value (the policy does not read it).
const ENTRY: &str = "e30=";

/// A Secret of `CREDENTIALS_NAMESPACE` as JSON.
fn secret(name: &str, type_: &str, user_label: Option<&str>, data: Value) -> String {
    let mut body = json!({"apiVersion": "v1", "kind": "Secret", "type": type_,
        "metadata": {"name": name, "namespace": CREDENTIALS_NAMESPACE}, "data": data});
    if let Some(user) = user_label {
        body["metadata"]["labels"] = json!({"ichor.maesh.dev/user": user});
    }
    body.to_string()
}

/// The credentials Secret of `user` as the issuer writes it.
fn credentials(user: &str) -> String {
    secret(
        &format!("ichor-user-{user}"),
        "ichor.maesh.dev/user-credentials",
        Some(user),
        json!({"entry": ENTRY}),
    )
}

/// kubectl with `kubeconfig` (a ServiceAccount's token): `Ok(stdout)` or `Err(stderr)`.
fn kubectl_with(
    plane: &ControlPlane,
    kubeconfig: &Path,
    args: &[&str],
    stdin: Option<&str>,
) -> Result<String, String> {
    let cache = plane.dir().join(format!(
        "kube-cache-{}",
        kubeconfig.file_name().unwrap().to_string_lossy()
    ));
    Kubectl::new(plane.kubectl_bin(), kubeconfig)
        .with_cache_dir(cache)
        .output(args, stdin)
        .unwrap()
}

const CREATE: [&str; 5] = ["create", "-o", "name", "-f", "-"];
const DRY_CREATE: [&str; 6] = ["create", "--dry-run=server", "-o", "name", "-f", "-"];

/// The control plane with Ichor installed (users on: the credentials namespace, the chart's
/// Roles there and its policy), and the issuer's and the controller's kubeconfigs, once the
/// policy refuses an Opaque Secret in the namespace (a policy takes effect a moment after it is
/// created).
fn installed() -> Option<(ControlPlane, std::path::PathBuf, std::path::PathBuf)> {
    let plane = ControlPlane::start(Options::default()).unwrap()?;
    install::install(&plane).unwrap();
    let issuer = install::component_kubeconfig(&plane, 0, ISSUER_SERVICE_ACCOUNT).unwrap();
    let controller = install::component_kubeconfig(&plane, 0, CONTROLLER_SERVICE_ACCOUNT).unwrap();
    let opaque = secret(
        "ichor-user-probe",
        "Opaque",
        Some("probe"),
        json!({"entry": ENTRY}),
    );
    wait::until(
        "the policy refusing an Opaque Secret",
        Duration::from_secs(30),
        || Ok(kubectl_with(&plane, &issuer, &DRY_CREATE, Some(&opaque)).err()),
    )
    .unwrap();
    Some((plane, issuer, controller))
}

/// The Secrets of the credentials namespace, by name.
fn credentials_secrets(plane: &ControlPlane) -> Vec<String> {
    plane
        .kubectl_run(
            &["get", "secrets", "-n", CREDENTIALS_NAMESPACE, "-o", "name"],
            None,
        )
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn assert_refused(what: &str, answer: Result<String, String>, needle: &str) {
    match answer {
        Ok(out) => panic!("{what} was admitted: {out}"),
        Err(e) => assert!(
            e.contains("ichor-credentials") && e.contains(needle),
            "{what}: refused, but not by the policy saying {needle:?}: {e}"
        ),
    }
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn only_credentials_secrets_can_be_created_there() {
    let Some((plane, issuer, controller)) = installed() else {
        return;
    };
    let long = "a".repeat(64);
    let attacks = [
        (
            "an Opaque Secret",
            secret(
                "ichor-user-alice",
                "Opaque",
                Some("alice"),
                json!({"entry": ENTRY}),
            ),
            "type ichor.maesh.dev/user-credentials",
        ),
        (
            "a Secret of another name",
            secret(
                "ichor-oidc-signing",
                "ichor.maesh.dev/user-credentials",
                Some("alice"),
                json!({"entry": ENTRY}),
            ),
            "is named ichor-user-",
        ),
        (
            "a user name that is no DNS label",
            secret(
                "ichor-user-alice.example",
                "ichor.maesh.dev/user-credentials",
                Some("alice.example"),
                json!({"entry": ENTRY}),
            ),
            "is named ichor-user-",
        ),
        (
            "a user name of 64 characters",
            // (A label value has at most 63 characters: the name is what the policy refuses.)
            secret(
                &format!("ichor-user-{long}"),
                "ichor.maesh.dev/user-credentials",
                Some("alice"),
                json!({"entry": ENTRY}),
            ),
            "is named ichor-user-",
        ),
        (
            "another user's label",
            secret(
                "ichor-user-alice",
                "ichor.maesh.dev/user-credentials",
                Some("bob"),
                json!({"entry": ENTRY}),
            ),
            "label",
        ),
        (
            "no label",
            secret(
                "ichor-user-alice",
                "ichor.maesh.dev/user-credentials",
                None,
                json!({"entry": ENTRY}),
            ),
            "label",
        ),
        (
            "a second key",
            secret(
                "ichor-user-alice",
                "ichor.maesh.dev/user-credentials",
                Some("alice"),
                json!({"entry": ENTRY, "tls.key": ENTRY}),
            ),
            "exactly one data key",
        ),
        (
            "another key",
            secret(
                "ichor-user-alice",
                "ichor.maesh.dev/user-credentials",
                Some("alice"),
                json!({"hash": ENTRY}),
            ),
            "exactly one data key",
        ),
        (
            "no data",
            secret(
                "ichor-user-alice",
                "ichor.maesh.dev/user-credentials",
                Some("alice"),
                json!({}),
            ),
            "exactly one data key",
        ),
    ];
    for (what, body, needle) in &attacks {
        assert_refused(what, kubectl_with(&plane, &issuer, &CREATE, Some(body)), needle);
    }
    assert!(credentials_secrets(&plane).is_empty());

    // The real thing: admitted for the issuer, the controller (the migration moves entries
    // into users' Secrets) and the admin (`ichor init`).
    let created = kubectl_with(&plane, &issuer, &CREATE, Some(&credentials("alice")));
    assert_eq!(
        created.as_deref(),
        Ok("secret/ichor-user-alice\n"),
        "the issuer's own write"
    );
    assert_eq!(
        kubectl_with(&plane, &controller, &DRY_CREATE, Some(&credentials("bob"))).as_deref(),
        Ok("secret/ichor-user-bob\n"),
        "the controller's move of a legacy entry"
    );
    assert_eq!(
        plane
            .kubectl_as(None, &DRY_CREATE, Some(&credentials("carol")))
            .unwrap()
            .as_deref(),
        Ok("secret/ichor-user-carol\n"),
        "the first admin's entry, written with the operator's kubeconfig"
    );

    // Updates are held to the same rules: no second key, no other user's label.
    let patch = |body: &str| {
        kubectl_with(
            &plane,
            &issuer,
            &[
                "patch",
                "secret",
                "ichor-user-alice",
                "-n",
                CREDENTIALS_NAMESPACE,
                "--type=merge",
                "-p",
                body,
            ],
            None,
        )
    };
    assert_refused(
        "an update adding a key",
        patch(r#"{"data":{"token":"e30="}}"#),
        "exactly one data key",
    );
    assert_refused(
        "an update relabelling",
        patch(r#"{"metadata":{"labels":{"ichor.maesh.dev/user":"bob"}}}"#),
        "label",
    );
    patch(r#"{"data":{"entry":"W10="}}"#).expect("the issuer's own update of the entry");

    // Someone whom RBAC lets create Secrets there, but who is neither the issuer nor the
    // controller (a careless grant, another operator's tool): refused even a well-formed one.
    plane
        .apply(&format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: careless\n  namespace: {CREDENTIALS_NAMESPACE}\n\
             rules:\n- apiGroups: [\"\"]\n  resources: [secrets]\n  verbs: [create, patch]\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: careless\n  namespace: {CREDENTIALS_NAMESPACE}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: careless}}\n\
             subjects:\n- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: mallory}}\n"
        ))
        .unwrap();
    let mallory = Some(("mallory", &["system:authenticated"][..]));
    assert_refused(
        "a well-formed Secret by another identity",
        plane
            .kubectl_as(mallory, &CREATE, Some(&credentials("dave")))
            .unwrap(),
        "only the issuer and the controller",
    );
    assert_eq!(credentials_secrets(&plane), ["secret/ichor-user-alice"]);
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn a_service_account_token_secret_cannot_land_there() {
    let Some((plane, issuer, controller)) = installed() else {
        return;
    };
    // The namespace's own default ServiceAccount, and the issuer's in ichor-system (whose token
    // the controller would then hand to whoever reads the namespace).
    let token = |name: &str, account: &str, label: bool| {
        let mut body: Value = serde_json::from_str(&secret(
            name,
            "kubernetes.io/service-account-token",
            label.then_some("alice"),
            json!({}),
        ))
        .unwrap();
        body["metadata"]["annotations"] = json!({"kubernetes.io/service-account.name": account});
        body.to_string()
    };
    let attacks = [
        token("ichor-user-alice", "default", true),
        token("default-token", "default", false),
        token("ichor-user-alice", ISSUER_SERVICE_ACCOUNT, true),
    ];
    for body in &attacks {
        for (who, answer) in [
            ("the issuer", kubectl_with(&plane, &issuer, &CREATE, Some(body))),
            (
                "the controller",
                kubectl_with(&plane, &controller, &CREATE, Some(body)),
            ),
            ("the admin", plane.kubectl_as(None, &CREATE, Some(body)).unwrap()),
        ] {
            // The controller may create there (the migration's moves): the policies refuse it,
            // `ichor-controller-secrets` or `ichor-credentials`, whichever answers first.
            let needle = if who == "the controller" {
                "ichor.maesh.dev/user-credentials"
            } else {
                "type ichor.maesh.dev/user-credentials"
            };
            assert_refused(&format!("a token Secret by {who}: {body}"), answer, needle);
        }
    }
    // Nothing landed for the token controller to fill.
    std::thread::sleep(Duration::from_secs(1));
    assert!(credentials_secrets(&plane).is_empty());
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn the_issuer_reads_no_secret_of_ichor_system_but_the_legacy_one() {
    let Some((plane, issuer, _controller)) = installed() else {
        return;
    };
    // What ichor-system holds on an installation: the signing keys, the CA and TLS keys, a
    // cluster's Talos credentials, the legacy credentials, a Helm release record.
    let system_secret = |name: &str, type_: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "type": type_,
            "metadata": {"name": name, "namespace": NAMESPACE}, "data": {"k": ENTRY}})
        .to_string()
    };
    for (name, type_) in [
        ("ichor-oidc-signing", "Opaque"),
        ("ichor-oidc-ca", "Opaque"),
        ("ichor-oidc-tls", "Opaque"),
        ("prod-talosconfig", "Opaque"),
        ("sh.helm.release.v1.ichor.v1", "helm.sh/release.v1"),
        ("ichor-user-credentials", "Opaque"),
    ] {
        plane.apply(&system_secret(name, type_)).unwrap();
    }
    plane.apply(&credentials("alice")).unwrap();

    let get = |namespace: &str, name: &str| {
        kubectl_with(
            &plane,
            &issuer,
            &["get", "secret", name, "-n", namespace, "-o", "name"],
            None,
        )
    };
    for name in [
        "ichor-oidc-signing",
        "ichor-oidc-ca",
        "ichor-oidc-tls",
        "prod-talosconfig",
        "sh.helm.release.v1.ichor.v1",
    ] {
        let e = get(NAMESPACE, name).expect_err(name);
        assert!(e.contains("Forbidden") || e.contains("forbidden"), "{name}: {e}");
    }
    assert_eq!(
        get(NAMESPACE, "ichor-user-credentials").as_deref(),
        Ok("secret/ichor-user-credentials\n")
    );
    assert_eq!(
        get(CREDENTIALS_NAMESPACE, "ichor-user-alice").as_deref(),
        Ok("secret/ichor-user-alice\n")
    );
    // `kubectl auth can-i` (a SelfSubjectAccessReview) as the issuer: it prints yes and exits
    // 0, or prints no and exits 1.
    let can = |verb: &str, resource: &str, namespace: &str| match kubectl_with(
        &plane,
        &issuer,
        &["auth", "can-i", verb, resource, "-n", namespace],
        None,
    ) {
        Ok(out) => {
            assert_eq!(out.trim(), "yes");
            true
        }
        Err(e) => {
            assert!(!e.contains("error"), "kubectl auth can-i failed: {e}");
            false
        }
    };
    // No list, no watch, in either namespace: the issuer learns no name it did not derive.
    for namespace in [NAMESPACE, CREDENTIALS_NAMESPACE] {
        for verb in ["list", "watch"] {
            assert!(!can(verb, "secrets", namespace), "{verb} secrets in {namespace}");
        }
        let e = kubectl_with(
            &plane,
            &issuer,
            &["get", "secrets", "-n", namespace, "-o", "name"],
            None,
        )
        .expect_err("a list of Secrets");
        assert!(e.contains("forbidden"), "{e}");
    }
    // What it may do with the Secrets of the namespace, and nothing more.
    for (verb, want) in [
        ("get", true),
        ("create", true),
        ("patch", true),
        ("delete", true),
        ("update", false),
        ("deletecollection", false),
    ] {
        assert_eq!(
            can(verb, "secrets/ichor-user-bob", CREDENTIALS_NAMESPACE),
            want,
            "{verb}"
        );
    }
    assert!(can("get", "secrets/ichor-user-credentials", NAMESPACE));
    assert!(!can("get", "secrets/ichor-oidc-signing", NAMESPACE));
}
