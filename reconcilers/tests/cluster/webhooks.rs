//! The admission webhooks as the real apiserver calls them: the chart's
//! `ValidatingWebhookConfiguration` unchanged (a `service:` reference, the `caBundle` the
//! controller wrote), the Service pointed at a replica by an EndpointSlice, and the apiserver
//! started with `--enable-aggregator-routing=true` so that it resolves the Service through its
//! endpoints and verifies the serving certificate for `ichor-controller-webhook.ichor-system.svc`
//! as in a cluster. People are impersonated by the admin (`kubectl --as ichor:<name> --as-group
//! ichor:<role>`), so RBAC, the webhook's rules and its real `SubjectAccessReview`s all decide.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use base64::Engine as _;
use ichor_controller::run::watch::WEBHOOK_TLS_SECRET;
use ichor_testkit::control_plane::ControlPlane;
use ichor_testkit::install::{self, NAMESPACE, ichor_user};
use ichor_testkit::wait;
use serde_json::json;

use crate::replicas::{Replica, get, merge_patch};

/// The webhook Service of the chart and its port's name.
const SERVICE: &str = "ichor-controller-webhook";
const PORT_NAME: &str = "webhook";
/// The chart's `timeoutSeconds`.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The kubelet's Secret volume: `ichor-webhook-tls` as the controller issued it, written into
/// the replica's certificate directory (a replica is ready only once it holds a pair).
pub fn mount_certificate(plane: &ControlPlane, replica: &Replica) -> anyhow::Result<()> {
    let secret = get(plane, 0, "secret", WEBHOOK_TLS_SECRET)?
        .ok_or_else(|| anyhow::anyhow!("no Secret {WEBHOOK_TLS_SECRET}"))?;
    for key in ["tls.crt", "tls.key"] {
        let b64 = secret["data"][key]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("{WEBHOOK_TLS_SECRET} has no {key}"))?;
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64)?;
        std::fs::write(replica.cert_dir.join(key), bytes)?;
    }
    Ok(())
}

/// What a kubectl run answered: its stdout, or its stderr when it failed.
type Answer = Result<String, String>;

/// The kubelet's part: the Secret `ichor-webhook-tls` written into the replica's certificate
/// directory (the pod's Secret volume), then the Service pointed at the replica.
pub fn serve_from(plane: &ControlPlane, replica: &Replica) -> anyhow::Result<()> {
    mount_certificate(plane, replica)?;
    install::point_service_at(
        plane,
        SERVICE,
        PORT_NAME,
        install::host_address()?,
        replica.webhook_port,
    )
}

const ALICE: (&str, &[&str]) = ("ichor:alice", &["ichor:admin"]);
const OLGA: (&str, &[&str]) = ("ichor:olga", &["ichor:operator"]);
/// May write IchorUsers through a custom role, and holds operator: may grant up to operator.
const EVE: (&str, &[&str]) = ("ichor:eve", &["ichor:user-manager", "ichor:operator"]);

const USER_MANAGER: &str = "\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ichor-user-manager}
rules:
- apiGroups: [ichor.maesh.dev]
  resources: [ichorusers]
  verbs: [get, list, create, update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ichor-user-manager}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ichor-user-manager}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: 'ichor:user-manager'}]
";

fn operation(name: &str, kind: &str) -> String {
    json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "TalosOperation",
        "metadata": {"name": name, "namespace": NAMESPACE}, "spec": {"cluster": "prod", "kind": kind}})
    .to_string()
}

/// A person's write with no working webhook server: refused by failurePolicy Fail; how long it
/// took.
fn refused_within(plane: &ControlPlane, name: &str) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let answer = plane.kubectl_as(Some(ALICE), &APPLY, Some(&ichor_user(name, &[])))?;
    let took = started.elapsed();
    match answer {
        Ok(out) => anyhow::bail!("a write with no working webhook server was accepted: {out}"),
        Err(e) => anyhow::ensure!(e.contains("failed calling webhook"), "{e}"),
    }
    Ok(took)
}

const APPLY: [&str; 5] = ["apply", "--server-side", "--field-manager=ichor-test", "-f", "-"];

/// Every webhook rule through the apiserver, with `replica` serving; the refusals' messages are
/// appended to `golden`. Ends with the webhook server gone (the replica killed) and the
/// namespace being deleted.
pub fn phase(plane: &ControlPlane, replica: &mut Replica, golden: &mut String) -> anyhow::Result<()> {
    serve_from(plane, replica)?;
    plane.apply(USER_MANAGER)?;
    // The webhook judges an Ichor requester by its live `IchorUser`.
    plane.apply(&ichor_user("eve", &["user-manager", "operator"]))?;
    plane.apply(&ichor_user("olga", &["operator"]))?;
    let mut refused = |what: &str, answer: Answer| -> anyhow::Result<()> {
        match answer {
            Ok(out) => anyhow::bail!("{what}: accepted ({out})"),
            Err(stderr) => {
                writeln!(golden, "## {what}\n{stderr}\n")?;
                Ok(())
            }
        }
    };
    let accepted = |what: &str, answer: Answer| -> anyhow::Result<()> {
        answer
            .map(|_| ())
            .map_err(|e| anyhow::anyhow!("{what}: refused: {e}"))
    };

    // The webhook answers once the Service reaches the replica (the apiserver's endpoint informer).
    wait::until(
        "the webhook reached through its Service",
        Duration::from_secs(30),
        || match plane.kubectl_as(Some(EVE), &APPLY, Some(&ichor_user("frank", &["viewer"])))? {
            Ok(_) => Ok(Some(())),
            Err(stderr) => Err(anyhow::anyhow!(stderr)),
        },
    )?;

    // The grant rule: up to the highest built-in role held.
    refused(
        "a grant above the granter's own roles",
        plane.kubectl_as(Some(EVE), &APPLY, Some(&ichor_user("gina", &["admin"])))?,
    )?;
    // IchorUsers live in ichor-system only: one created elsewhere is refused, whoever creates it
    // (the admin's system:masters certificate too: outside ichor-system the match condition sends
    // every create to the webhook).
    let stray = json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
        "metadata": {"name": "stray", "namespace": "default"}, "spec": {"roles": ["viewer"]}})
    .to_string();
    refused(
        "an IchorUser created outside ichor-system",
        plane.kubectl_as(Some(ALICE), &APPLY, Some(&stray))?,
    )?;
    refused(
        "an IchorUser created outside ichor-system by the override certificate",
        plane.kubectl_as(None, &APPLY, Some(&stray))?,
    )?;
    // The last enabled admin.
    let disable = json!({"spec": {"disabled": true}});
    let patch = merge_patch("ichoruser", "alice", &disable, false);
    refused(
        "the last enabled admin disabled by herself",
        plane.kubectl_as(Some(ALICE), &patch, None)?,
    )?;
    refused(
        "the last enabled admin deleted",
        plane.kubectl_as(
            Some(ALICE),
            &["delete", "ichoruser", "alice", "-n", NAMESPACE],
            None,
        )?,
    )?;
    // A second admin lifts the rule (the dry run is reviewed and writes nothing) once the
    // controller's watch has delivered him to its cache; the webhook reads him again before
    // allowing.
    accepted(
        "a second admin",
        plane.kubectl_as(Some(ALICE), &APPLY, Some(&ichor_user("henry", &["admin"])))?,
    )?;
    let dry = merge_patch("ichoruser", "alice", &disable, true);
    wait::until(
        "an admin disabled while another remains",
        Duration::from_secs(10),
        || match plane.kubectl_as(Some(ALICE), &dry, None)? {
            Ok(_) => Ok(Some(())),
            Err(stderr) if stderr.contains("last enabled admin") => Ok(None),
            Err(stderr) => Err(anyhow::anyhow!("refused: {stderr}")),
        },
    )?;
    accepted(
        "henry removed",
        plane.kubectl_as(
            Some(ALICE),
            &["delete", "ichoruser", "henry", "-n", NAMESPACE],
            None,
        )?,
    )?;

    // TalosCluster: spec.authentication needs update on talosclusters/authentication (a real
    // SubjectAccessReview against the chart's roles).
    let external = json!({"spec": {"authentication": {"ichor": {"enabled": true, "url": "https://ichor.example.com"},
        "external": [{"issuerURL": "https://idp.example.org", "audiences": ["kubernetes"]}]}}});
    refused(
        "an operator repoints the cluster's identity providers",
        plane.kubectl_as(
            Some(OLGA),
            &merge_patch("taloscluster", "prod", &external, false),
            None,
        )?,
    )?;
    accepted(
        "an admin repoints them",
        plane.kubectl_as(
            Some(ALICE),
            &merge_patch("taloscluster", "prod", &external, true),
            None,
        )?,
    )?;
    // The Cilium values are ratcheted: `legacy` was written before the webhooks with a value the
    // chart does not have; an unrelated change passes, a change of the values is checked.
    accepted(
        "an unrelated change of a cluster with old invalid values",
        plane.kubectl_as(
            Some(ALICE),
            &[
                "label",
                "taloscluster",
                "legacy",
                "-n",
                NAMESPACE,
                "team=platform",
            ],
            None,
        )?,
    )?;
    let values = json!({"spec": {"cni": {"cilium": {"values": {"totallyUnknownKey": 2}}}}});
    refused(
        "changed Cilium values that the chart does not have",
        plane.kubectl_as(
            Some(ALICE),
            &merge_patch("taloscluster", "legacy", &values, false),
            None,
        )?,
    )?;

    // TalosOperation: a destructive start needs `start` on talosoperations/<kind>.
    refused(
        "an operator starts a shutdown",
        plane.kubectl_as(Some(OLGA), &APPLY, Some(&operation("stop-prod", "shutdown")))?,
    )?;
    accepted(
        "an admin starts one (dry run)",
        plane.kubectl_as(
            Some(ALICE),
            &["create", "--dry-run=server", "-o", "name", "-f", "-"],
            Some(&operation("stop-prod", "shutdown")),
        )?,
    )?;
    accepted(
        "an operator starts an upgrade",
        plane.kubectl_as(Some(OLGA), &APPLY, Some(&operation("upgrade-prod", "upgrade")))?,
    )?;

    // The webhook server hung, then gone: failurePolicy Fail refuses, after the configured
    // timeout when nothing answers, at once when nothing listens.
    replica.freeze()?;
    let hung = refused_within(plane, "jane")?;
    eprintln!("a write refused with the webhook server hung in {hung:?}");
    assert!(
        hung + Duration::from_millis(500) >= TIMEOUT && hung <= TIMEOUT + Duration::from_secs(3),
        "a hung webhook server refused the write after {hung:?}, not after its timeout of {TIMEOUT:?}"
    );
    replica.kill();
    let gone = refused_within(plane, "ivan")?;
    eprintln!("a write refused with the webhook server down in {gone:?}");
    assert!(
        gone <= TIMEOUT + Duration::from_secs(3),
        "the refusal took {gone:?}"
    );
    // The override certificate (system:masters) is not reviewed: recovery works with no webhook.
    plane.apply(&ichor_user("recovery", &["admin"]))?;

    // System identities are not reviewed (the match condition): the namespace controller empties
    // a namespace being deleted even while no controller runs.
    plane.kubectl_run(&["delete", "namespace", NAMESPACE, "--wait=false"], None)?;
    let namespace_controller = (
        "system:serviceaccount:kube-system:namespace-controller",
        &["system:serviceaccounts"][..],
    );
    accepted(
        "the namespace controller deletes an admin while no webhook runs",
        plane.kubectl_as(
            Some(namespace_controller),
            &["delete", "ichoruser", "alice", "-n", NAMESPACE],
            None,
        )?,
    )?;
    assert!(get(plane, 0, "ichoruser", "alice")?.is_none(), "alice is gone");
    Ok(())
}
