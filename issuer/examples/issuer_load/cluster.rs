//! `control-plane --dir D`: the Kubernetes side of the kube-store benchmark. Starts the test kit's
//! real control plane (etcd and kube-apiserver built from their modules, on loopback), installs
//! Ichor from its chart, writes the users and credentials that `setup` wrote as files as
//! `IchorUser`s and the `ichor-user-credentials` Secret, and `D/issuer.kubeconfig` (a
//! TokenRequest token of the chart's issuer ServiceAccount, so the issuers run under the chart's
//! RBAC) and `D/apiserver-ca.crt`. Writes `D/cluster-ready` when done, then keeps the control
//! plane up until SIGTERM or SIGINT, and stops it.

use anyhow::{Context as _, Result};
use base64::Engine as _;
use ichor_testkit::control_plane::{ControlPlane, Options};
use ichor_testkit::install::{self, ISSUER_SERVICE_ACCOUNT, NAMESPACE};
use std::path::Path;

pub async fn run(dir: &Path) -> Result<()> {
    let plane = ControlPlane::start(Options::default())?.context(
        "kube-apiserver, etcd or kubectl is missing; run hack/kube/build.sh (or hack/test.sh) first",
    )?;
    install::install(&plane)?;
    // No controller serves the chart's webhooks in this benchmark, and nothing here writes
    // IchorUsers through them.
    plane.kubectl_run(
        &["delete", "validatingwebhookconfiguration", "ichor-identity"],
        None,
    )?;
    let mut users = String::new();
    for entry in std::fs::read_dir(dir.join("users"))? {
        users.push_str("---\n");
        users.push_str(&std::fs::read_to_string(entry?.path())?);
    }
    plane.apply(&users).context("applying the users")?;
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("state/credentials.json"))?)?;
    let mut data = serde_json::Map::new();
    for (name, entry) in state["entries"]
        .as_object()
        .context("credentials.json has no entries")?
    {
        let text = serde_json::to_string(entry)?;
        data.insert(
            name.clone(),
            base64::engine::general_purpose::STANDARD.encode(text).into(),
        );
    }
    plane.apply(
        &serde_json::json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "ichor-user-credentials", "namespace": NAMESPACE}, "data": data})
        .to_string(),
    )?;
    let kubeconfig = install::component_kubeconfig(&plane, 0, ISSUER_SERVICE_ACCOUNT)?;
    std::fs::copy(&kubeconfig, dir.join("issuer.kubeconfig"))?;
    std::fs::write(dir.join("apiserver-ca.crt"), plane.ca_pem())?;
    std::fs::write(dir.join("cluster-ready"), plane.url(0))?;
    eprintln!(
        "control plane: {} (started in {:.1} s); {} users",
        plane.url(0),
        plane.started_in().as_secs_f64(),
        data.len()
    );

    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    drop(plane);
    Ok(())
}
