//! Ichor installed on a real control plane the way `helm install` leaves it, for components run
//! as local processes under the chart's own RBAC.
//!
//! [`install`] creates the namespace, applies the CRDs (the chart's and the partial views of the
//! Talos kinds in `hack/crds/`), waits until the apiserver serves them, and applies the chart
//! server-side: the rendering in `golden/chart/users-on.yaml`, which `hack/chart/test.sh` keeps
//! byte-equal to what the real Helm engine renders (`users.enabled=true`). Nothing runs the
//! Deployments (no kubelet): a test starts the binaries itself, each with a kubeconfig holding a
//! token of its ServiceAccount from the TokenRequest API ([`component_kubeconfig`]), so the
//! apiserver authorizes them exactly as it would their pods.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;

use crate::consumers::repo_root;
use crate::control_plane::ControlPlane;

/// The namespace Ichor installs into (a contract of its object names).
pub const NAMESPACE: &str = "ichor-system";
/// The namespace holding one credentials Secret per user (made by `ichor init`, never by the
/// chart).
pub const CREDENTIALS_NAMESPACE: &str = "ichor-credentials";
/// The controller's ServiceAccount.
pub const CONTROLLER_SERVICE_ACCOUNT: &str = "ichor-controller";
/// The issuer's ServiceAccount.
pub const ISSUER_SERVICE_ACCOUNT: &str = "ichor-issuer";
/// How long a component's token is valid (longer than any test).
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(3600);

/// The user name the apiserver gives a ServiceAccount of [`NAMESPACE`].
pub fn service_account_user(name: &str) -> String {
    format!("system:serviceaccount:{NAMESPACE}:{name}")
}

/// The chart as the real Helm engine renders it with users on (`golden/chart/users-on.yaml`).
///
/// # Errors
/// The file cannot be read.
pub fn chart_manifest() -> anyhow::Result<String> {
    read_golden("golden/chart/users-on.yaml")
}

/// The chart as the real Helm engine renders it with the default values, users off
/// (`golden/chart/default.yaml`).
///
/// # Errors
/// The file cannot be read.
pub fn chart_manifest_users_off() -> anyhow::Result<String> {
    read_golden("golden/chart/default.yaml")
}

fn read_golden(relative: &str) -> anyhow::Result<String> {
    let path = repo_root().join(relative);
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

/// What `service_account` of the chart did with the chart's grants, from the audit log of
/// `plane` (started with [`crate::control_plane::Options::audit`]).
///
/// # Errors
/// The chart or the audit log cannot be read.
pub fn chart_rbac_usage(plane: &ControlPlane, service_account: &str) -> anyhow::Result<crate::rbac::Usage> {
    let grants = crate::rbac::grants_for(&chart_manifest()?, NAMESPACE, service_account)?;
    Ok(crate::rbac::usage(
        &grants,
        &plane.audit_events()?,
        &service_account_user(service_account),
    ))
}

/// The object `kind`/`name` of the chart, as JSON (to apply again, or changed).
///
/// # Errors
/// The chart has no such object.
pub fn chart_object(kind: &str, name: &str) -> anyhow::Result<serde_json::Value> {
    use serde::Deserialize as _;
    let chart = chart_manifest()?;
    for document in serde_yaml::Deserializer::from_str(&chart) {
        let value = serde_json::Value::deserialize(document)
            .context("the chart holds a document that is not YAML")?;
        if value["kind"] == kind && value["metadata"]["name"] == name {
            return Ok(value);
        }
    }
    anyhow::bail!("the chart has no {kind} {name}")
}

/// Every CRD the controller watches: `helm/ichor/crds/` and `hack/crds/`, as one YAML stream.
///
/// # Errors
/// A directory or file cannot be read.
pub fn crd_manifests() -> anyhow::Result<String> {
    Ok(crd_dir_manifests("helm/ichor/crds")? + &crd_dir_manifests("hack/crds")?)
}

/// Every CRD of the repository folder `dir` (`helm/ichor/crds`, `hack/crds`), by file name, as
/// one YAML stream.
///
/// # Errors
/// The directory or a file cannot be read.
pub fn crd_dir_manifests(dir: &str) -> anyhow::Result<String> {
    let dir = repo_root().join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut out = String::new();
    for f in files {
        out.push_str("---\n");
        out.push_str(&std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?);
        out.push('\n');
    }
    Ok(out)
}

/// Installs Ichor on `plane`: [`install_crds`], then [`install_chart`].
///
/// # Errors
/// What kubectl answered when the apiserver refused an object.
pub fn install(plane: &ControlPlane) -> anyhow::Result<()> {
    install_crds(plane)?;
    install_chart(plane)
}

/// The namespace and the CRDs, waited for until established: what exists before the chart's
/// webhooks do (an object written now is not reviewed by them).
///
/// # Errors
/// What kubectl answered when the apiserver refused an object.
pub fn install_crds(plane: &ControlPlane) -> anyhow::Result<()> {
    plane.apply(&namespace_manifest())?;
    plane.apply(&crd_manifests()?).context("applying the CRDs")?;
    wait_crds_established(plane)
}

/// Creates [`CREDENTIALS_NAMESPACE`] as `ichor init` does (labelled part of Ichor), keeping an
/// existing one.
///
/// # Errors
/// What kubectl answered when the apiserver refused it.
pub fn ensure_credentials_namespace(plane: &ControlPlane) -> anyhow::Result<()> {
    plane.apply(&credentials_namespace_manifest())?;
    Ok(())
}

/// The namespace [`NAMESPACE`] as a manifest.
fn namespace_manifest() -> String {
    format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NAMESPACE}\n")
}

/// The namespace and every CRD of the repository (`helm/ichor/crds/`, `hack/crds/`) but the
/// file `missing`, waited for until established: an apiserver that serves every Ichor kind but
/// one, as a site that installs identity before Ichor core (or without the chart's CRDs) has.
///
/// # Errors
/// A file cannot be read, or what kubectl answered when the apiserver refused an object.
pub fn install_crds_without(plane: &ControlPlane, missing: &str) -> anyhow::Result<()> {
    plane.apply(&namespace_manifest())?;
    for dir in ["helm/ichor/crds", "hack/crds"] {
        let path = repo_root().join(dir);
        let mut files: Vec<String> = std::fs::read_dir(&path)
            .with_context(|| format!("reading {}", path.display()))?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|f| f.ends_with(".yaml") && f != missing)
            .collect();
        files.sort();
        for file in files {
            plane.apply(&crd(dir, &file)?)?;
        }
    }
    wait_crds_established(plane)
}

/// One CRD file of the repository, `DIR/FILE` (`helm/ichor/crds` for the chart's own,
/// `hack/crds` for identity's views of Ichor core's kinds), for a test that installs only some.
///
/// # Errors
/// The file cannot be read.
pub fn crd(dir: &str, file: &str) -> anyhow::Result<String> {
    let path = repo_root().join(dir).join(file);
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

/// Waits up to 60 s until every CRD on `plane` is established.
///
/// # Errors
/// What kubectl answered when the wait ran out.
pub fn wait_crds_established(plane: &ControlPlane) -> anyhow::Result<()> {
    plane
        .kubectl_run(&WAIT_CRDS_ESTABLISHED, None)
        .context("waiting for the CRDs to be established")?;
    Ok(())
}

/// The kubectl arguments that wait up to 60 s until every CRD is established.
pub const WAIT_CRDS_ESTABLISHED: [&str; 5] = [
    "wait",
    "--for=condition=Established",
    "crd",
    "--all",
    "--timeout=60s",
];

/// [`CREDENTIALS_NAMESPACE`] as `ichor init` creates it, as a manifest.
pub fn credentials_namespace_manifest() -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {CREDENTIALS_NAMESPACE}\n  labels:\n    app.kubernetes.io/part-of: ichor\n"
    )
}

/// The chart, applied server-side as the admin, after the credentials namespace (what `ichor
/// init` creates before it turns users on).
///
/// # Errors
/// What kubectl answered when the apiserver refused an object.
pub fn install_chart(plane: &ControlPlane) -> anyhow::Result<()> {
    plane
        .apply(&credentials_namespace_manifest())
        .context("creating the credentials namespace")?;
    plane.apply(&chart_manifest()?).context("applying the chart")?;
    Ok(())
}

/// The first non-loopback IPv4 address of this host: where an apiserver reaches a webhook
/// server through a Service's endpoints (an EndpointSlice may not hold a loopback address).
///
/// # Errors
/// The host has no such address.
pub fn host_address() -> anyhow::Result<std::net::Ipv4Addr> {
    for probe in ["192.0.2.1:9", "10.255.255.255:9", "172.16.0.1:9", "192.168.0.1:9"] {
        let Ok(socket) = std::net::UdpSocket::bind("0.0.0.0:0") else {
            continue;
        };
        // A connected UDP socket sends nothing; it only picks the route and so the address.
        if socket.connect(probe).is_err() {
            continue;
        }
        if let Ok(std::net::SocketAddr::V4(local)) = socket.local_addr()
            && !local.ip().is_loopback()
            && !local.ip().is_unspecified()
        {
            return Ok(*local.ip());
        }
    }
    anyhow::bail!(
        "this host has no non-loopback IPv4 address, so no Service endpoint can point at a local webhook server"
    )
}

/// Points the Service `service` of [`NAMESPACE`] at `address:port` with an EndpointSlice named
/// after it (replacing the previous one): what a Deployment's ready pod gives a Service, for an
/// apiserver started with `--enable-aggregator-routing=true`, which resolves a webhook's
/// `service:` reference through its endpoints and verifies the serving certificate for the
/// Service's DNS name `<service>.<namespace>.svc`.
///
/// # Errors
/// What kubectl answered when the apiserver refused the slice.
pub fn point_service_at(
    plane: &ControlPlane,
    service: &str,
    port_name: &str,
    address: std::net::Ipv4Addr,
    port: u16,
) -> anyhow::Result<()> {
    let slice = format!(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {service}-local\n  namespace: {NAMESPACE}\n  labels:\n    kubernetes.io/service-name: {service}\naddressType: IPv4\nports:\n- name: {port_name}\n  port: {port}\n  protocol: TCP\nendpoints:\n- addresses: [\"{address}\"]\n  conditions:\n    ready: true\n"
    );
    plane
        .apply(&slice)
        .with_context(|| format!("pointing Service {service} at {address}:{port}"))?;
    Ok(())
}

/// A kubeconfig for apiserver `i` that authenticates as the ServiceAccount `service_account` of
/// [`NAMESPACE`] (a TokenRequest token valid for [`TOKEN_LIFETIME`]).
///
/// # Errors
/// The TokenRequest was refused, or the file cannot be written.
pub fn component_kubeconfig(
    plane: &ControlPlane,
    i: usize,
    service_account: &str,
) -> anyhow::Result<PathBuf> {
    let token = plane.service_account_token(NAMESPACE, service_account, TOKEN_LIFETIME)?;
    plane.token_kubeconfig(i, &token, &format!("{service_account}-{i}.kubeconfig"))
}

/// The arguments of `kubectl patch KIND NAME -n ichor-system --type=merge -p PATCH`, a server
/// dry run when `dry_run`.
pub fn merge_patch_args(kind: &str, name: &str, patch: &serde_json::Value, dry_run: bool) -> Vec<String> {
    let mut args: Vec<String> = ["patch", kind, name, "-n", NAMESPACE, "--type=merge", "-p"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    args.push(patch.to_string());
    if dry_run {
        args.push("--dry-run=server".to_owned());
    }
    args
}

/// Removes every finalizer of the `kind` `name` of [`NAMESPACE`] (a merge patch setting
/// `metadata.finalizers` to null), so a test leaves no object held.
///
/// # Errors
/// What kubectl answered when the patch was refused.
pub fn remove_finalizers(plane: &ControlPlane, kind: &str, name: &str) -> anyhow::Result<()> {
    let args = merge_patch_args(
        kind,
        name,
        &serde_json::json!({"metadata": {"finalizers": null}}),
        false,
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    plane.kubectl_run(&args, None)?;
    Ok(())
}

/// An `IchorUser` `name` of [`NAMESPACE`] with `roles` (display name = `name`), as a manifest
/// for [`ControlPlane::apply`].
pub fn ichor_user(name: &str, roles: &[&str]) -> String {
    serde_json::json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"displayName": name, "roles": roles}})
    .to_string()
}

/// An `IchorUser` `name` of [`NAMESPACE`] with `roles` and the finalizer `x/hold`, which keeps
/// it, terminating, after a delete until [`remove_finalizers`]; a manifest for
/// [`ControlPlane::apply`].
pub fn held_ichor_user(name: &str, roles: &[&str]) -> String {
    serde_json::json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
        "metadata": {"name": name, "namespace": NAMESPACE, "finalizers": ["x/hold"]},
        "spec": {"roles": roles}})
    .to_string()
}

/// Waits up to `timeout` until every webhook of the `ValidatingWebhookConfiguration`
/// `configuration` has a `caBundle` (the controller writes them once it issued its serving
/// certificate).
///
/// # Errors
/// The timeout, with the last kubectl error.
pub fn wait_webhook_ca_bundles(
    plane: &ControlPlane,
    configuration: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    crate::wait::until("the webhooks' caBundle", timeout, || {
        let vwc = plane.kubectl_run(
            &[
                "get",
                "validatingwebhookconfiguration",
                configuration,
                "-o",
                "json",
            ],
            None,
        )?;
        let vwc: serde_json::Value = serde_json::from_str(&vwc)?;
        let hooks = vwc["webhooks"].as_array().cloned().unwrap_or_default();
        Ok((!hooks.is_empty()
            && hooks.iter().all(|h| {
                h["clientConfig"]["caBundle"]
                    .as_str()
                    .is_some_and(|b| !b.is_empty())
            }))
        .then_some(()))
    })
}
