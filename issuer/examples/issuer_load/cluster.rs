//! `control-plane --dir D`: the Kubernetes side of the kube-store benchmark. Starts the test kit's
//! real control plane (etcd and kube-apiserver built from their modules, on loopback), installs
//! Ichor from its chart, writes the users and credentials that `setup` wrote as files as
//! `IchorUser`s and their credentials in the layout asked for (one Secret per user in
//! `ichor-credentials`, as a fresh installation has, or the legacy `ichor-user-credentials`), and
//! `D/issuer.kubeconfig` (a
//! TokenRequest token of the chart's issuer ServiceAccount, so the issuers run under the chart's
//! RBAC) and `D/apiserver-ca.crt`. Writes `D/cluster-ready` when done, then keeps the control
//! plane up until SIGTERM or SIGINT, and stops it.

use anyhow::{Context as _, Result};
use base64::Engine as _;
use futures::{StreamExt as _, TryStreamExt as _};
use ichor_renderers::contract;
use ichor_testkit::control_plane::{ControlPlane, Options};
use ichor_testkit::install::{self, ISSUER_SERVICE_ACCOUNT, NAMESPACE};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use std::path::Path;

use crate::args::Layout;

/// Per-user Secrets created at once while seeding.
const CONCURRENT_CREATES: usize = 32;

pub async fn run(dir: &Path, layout: Layout) -> Result<()> {
    let plane = ControlPlane::start(Options::default())?.context(
        "kube-apiserver, etcd or kubectl is missing; run hack/kube/build.sh (or hack/test.sh) first",
    )?;
    install::install(&plane)?;
    // No controller serves the chart's webhooks in this benchmark, and nothing here writes
    // IchorUsers through them.
    plane.kubectl_run(
        &[
            "delete",
            "validatingwebhookconfiguration",
            contract::WEBHOOK_CONFIGURATION,
        ],
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
    let mut entries = Vec::new();
    for (name, entry) in state["entries"]
        .as_object()
        .context("credentials.json has no entries")?
    {
        let text = serde_json::to_string(entry)?;
        entries.push((
            name.clone(),
            base64::engine::general_purpose::STANDARD.encode(text),
        ));
    }
    match layout {
        Layout::Legacy => {
            let data: serde_json::Map<_, _> = entries
                .iter()
                .map(|(n, v)| (n.clone(), v.clone().into()))
                .collect();
            plane.apply(
                &serde_json::json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": contract::CREDENTIALS_SECRET, "namespace": NAMESPACE}, "data": data})
                .to_string(),
            )?;
        }
        Layout::PerUser => seed_per_user(&plane, &entries).await?,
    }
    let users = entries.len();
    let kubeconfig = install::component_kubeconfig(&plane, 0, ISSUER_SERVICE_ACCOUNT)?;
    std::fs::copy(&kubeconfig, dir.join("issuer.kubeconfig"))?;
    std::fs::write(dir.join("apiserver-ca.crt"), plane.ca_pem())?;
    std::fs::write(dir.join("cluster-ready"), plane.url(0))?;
    eprintln!(
        "control plane: {} (started in {:.1} s); {} users",
        plane.url(0),
        plane.started_in().as_secs_f64(),
        users
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

/// Creates each user's credentials Secret in `ichor-credentials` as the admin (the chart's policy
/// admits `system:masters`), [`CONCURRENT_CREATES`] at a time.
async fn seed_per_user(plane: &ControlPlane, entries: &[(String, String)]) -> Result<()> {
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(plane.admin_kubeconfig())?,
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    let secrets: Api<Secret> =
        Api::namespaced(kube::Client::try_from(config)?, contract::CREDENTIALS_NAMESPACE);
    futures::stream::iter(entries.iter().map(|(name, value)| {
        let secrets = secrets.clone();
        async move {
            let secret: Secret = serde_json::from_value(serde_json::json!({
                "metadata": {
                    "name": contract::user_credentials_secret(name),
                    "labels": {contract::USER_LABEL: name, contract::PART_OF_LABEL: contract::PART_OF_VALUE},
                },
                "type": contract::USER_CREDENTIALS_TYPE,
                "data": {contract::USER_CREDENTIALS_KEY: value},
            }))?;
            secrets
                .create(&PostParams::default(), &secret)
                .await
                .with_context(|| format!("creating the credentials Secret of {name}"))?;
            anyhow::Ok(())
        }
    }))
    .buffer_unordered(CONCURRENT_CREATES)
    .try_collect::<Vec<()>>()
    .await?;
    Ok(())
}
