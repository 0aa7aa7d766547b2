//! The faults an operator meets, on the walkthrough's installation: the controller leader's pod
//! deleted, an issuer pod deleted while clients refresh, and the issuer Service recreated with a
//! new ClusterIP. Each is measured for the record.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use ichor_testkit::wait;
use serde_json::Value;

use super::cluster::{Admin, NAMESPACE, Record};

/// The controller's Lease (its holder is the leader's pod).
const LEASE: &str = "ichor-controller";
/// How long a fault may take to heal.
const HEAL: Duration = Duration::from_secs(240);

fn holder(admin: &Admin) -> anyhow::Result<Option<String>> {
    Ok(admin
        .get("lease", LEASE)?
        .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_owned))
        .filter(|h| !h.is_empty()))
}

/// The leader's pod is deleted: the other replica takes the Lease, and the graph's writes go on
/// (the trust ConfigMap, deleted, is written back by the new leader).
pub fn leader_pod_deleted(admin: &Admin, record: &mut Record) -> anyhow::Result<()> {
    let old = wait::until("a controller leader", HEAL, || holder(admin))?;
    let started = Instant::now();
    admin.run(&["delete", "pod", &old, "-n", NAMESPACE, "--wait=false"], None)?;
    let new = wait::until("another replica to lead", HEAL, || {
        Ok(holder(admin)?.filter(|h| *h != old))
    })?;
    record.figure(
        "leader failover (pod deleted to Lease taken)",
        format!("{:.1} s ({old} -> {new})", started.elapsed().as_secs_f64()),
    );
    admin.run(
        &["delete", "configmap", "ichor-oidc-trust", "-n", NAMESPACE],
        None,
    )?;
    let deleted = Instant::now();
    wait::until("the new leader to write the trust ConfigMap again", HEAL, || {
        admin.get("configmap", "ichor-oidc-trust")
    })?;
    record.figure(
        "trust ConfigMap written back by the new leader",
        format!("{:.1} s", deleted.elapsed().as_secs_f64()),
    );
    admin.wait_ready("ichor-controller", HEAL)?;
    Ok(())
}

/// One refresh grant at the issuer `base` with a connection of its own (as each exec-plugin
/// run makes); the next refresh token.
async fn refresh(http: &reqwest::Client, base: &str, token: &str) -> anyhow::Result<String> {
    let answer = http
        .post(format!("{base}/oidc/token"))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", token),
            ("client_id", "ichor-cli"),
        ])
        .send()
        .await?;
    let status = answer.status();
    let body: Value = answer.json().await?;
    ensure!(status.is_success(), "refresh answered {status}: {body}");
    body["refresh_token"]
        .as_str()
        .map(str::to_owned)
        .context("no refresh_token in the answer")
}

/// An issuer pod is deleted while a client keeps refreshing: no refresh fails.
pub fn issuer_pod_deleted_mid_refresh(
    admin: &Admin,
    runtime: &tokio::runtime::Runtime,
    client: impl Fn() -> anyhow::Result<reqwest::Client> + Send + Sync + 'static,
    base: &str,
    refresh_token: String,
    record: &mut Record,
) -> anyhow::Result<()> {
    let victim = admin
        .pods("issuer")?
        .into_iter()
        .next()
        .context("no issuer pod")?;
    let stop = Arc::new(AtomicBool::new(false));
    let base = base.to_owned();
    let loop_stop = Arc::clone(&stop);
    let refreshing = runtime.spawn(async move {
        let (mut ok, mut failed) = (0_u32, Vec::new());
        let mut token = refresh_token;
        while !loop_stop.load(Ordering::Acquire) {
            let attempt = async { refresh(&client()?, &base, &token).await }.await;
            match attempt {
                Ok(next) => {
                    token = next;
                    ok += 1;
                }
                Err(e) => failed.push(format!("{e:#}")),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        (ok, failed)
    });
    std::thread::sleep(Duration::from_secs(2));
    let started = Instant::now();
    admin.run(&["delete", "pod", &victim, "-n", NAMESPACE, "--wait=true"], None)?;
    admin.wait_ready("ichor-issuer", HEAL)?;
    let replaced = started.elapsed();
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Release);
    let (ok, failed) = runtime.block_on(refreshing)?;
    record.figure(
        "issuer pod deleted mid-refresh",
        format!(
            "{ok} refreshes, {} failed, replacement ready after {:.1} s",
            failed.len(),
            replaced.as_secs_f64()
        ),
    );
    ensure!(
        failed.is_empty() && ok > 10,
        "refreshes failed while an issuer pod was replaced ({ok} succeeded): {failed:?}"
    );
    Ok(())
}

/// The issuer Service is deleted and created again (a new ClusterIP): the controller issues a
/// leaf for the new address and renders a new discoveryURL; the new ClusterIP, once the
/// rollout ran again.
pub fn issuer_service_recreated(admin: &Admin, record: &mut Record) -> anyhow::Result<IpAddr> {
    let old = admin.cluster_ip("ichor-issuer")?;
    let mut svc = admin
        .get("service", "ichor-issuer")?
        .context("no issuer Service")?;
    for field in ["resourceVersion", "uid", "creationTimestamp", "managedFields"] {
        if let Some(m) = svc["metadata"].as_object_mut() {
            m.remove(field);
        }
    }
    if let Some(spec) = svc["spec"].as_object_mut() {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
    if let Some(o) = svc.as_object_mut() {
        o.remove("status");
    }
    let started = Instant::now();
    admin.run(&["delete", "service", "ichor-issuer", "-n", NAMESPACE], None)?;
    admin.apply(&serde_json::to_string(&svc)?)?;
    let new = admin.cluster_ip("ichor-issuer")?;
    ensure!(new != old, "the recreated Service kept its ClusterIP {old}");
    let discovery = format!("https://{new}:8444");
    wait::until("the trust ConfigMap to name the new ClusterIP", HEAL, || {
        Ok(admin
            .get("configmap", "ichor-oidc-trust")?
            .filter(|c| c.to_string().contains(&discovery)))
    })?;
    record.figure(
        "new ClusterIP to new leaf and discoveryURL",
        format!("{:.1} s ({old} -> {new})", started.elapsed().as_secs_f64()),
    );
    Ok(new)
}
