//! Whoever may create a Service in `ichor-system` labels one `app.kubernetes.io/component=ui`
//! with a name that sorts before `ichor-issuer`, to steer the Ichor leaf's SANs, the trust
//! ConfigMap's `discoveryURL` and so every cluster's rendered document at an address they
//! control. The issuer Service is the chart's own, by its exact name: the impostor changes
//! nothing, before or after the real one is gone.

use std::time::{Duration, Instant};

use ichor_renderers::trust::{TLS_SECRET, TRUST_CONFIGMAP};
use ichor_testkit::install::NAMESPACE;
use serde_json::{Value, json};

use super::Running;
use crate::replicas::get;

/// How long the controller gets to (wrongly) follow the impostor: it reacts to a Service event
/// within a second or two.
const WATCH_FOR: Duration = Duration::from_secs(20);

/// The impostor Service; its ClusterIP is the apiserver's pick (a fixed one can collide with a
/// Service another test of the shared control plane was given).
fn impostor(name: &str) -> String {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/component": "ui", "app.kubernetes.io/part-of": "ichor",
                "app.kubernetes.io/name": "ichor", "app.kubernetes.io/managed-by": "Helm"}},
        "spec": {"type": "ClusterIP",
            "selector": {"app": "attacker"},
            "ports": [{"name": "https-internal", "port": 8444, "targetPort": 8444}]}})
    .to_string()
}

/// The leaf's data and the trust ConfigMap's data.
fn issued(running: &Running) -> anyhow::Result<(Value, Value)> {
    let plane = &running.plane;
    let leaf = get(plane, 0, "secret", TLS_SECRET)?.ok_or_else(|| anyhow::anyhow!("no {TLS_SECRET}"))?;
    let trust = get(plane, 0, "configmap", TRUST_CONFIGMAP)?
        .ok_or_else(|| anyhow::anyhow!("no {TRUST_CONFIGMAP}"))?;
    Ok((leaf["data"].clone(), trust["data"].clone()))
}

fn unchanged_for(running: &Running, before: &(Value, Value), what: &str) -> anyhow::Result<()> {
    let started = Instant::now();
    while started.elapsed() < WATCH_FOR {
        let now = issued(running)?;
        assert!(
            now.0 == before.0,
            "{what}: the Ichor leaf was issued again (for the impostor's address)\n{}",
            running.replica.log_tail()
        );
        assert!(
            now.1 == before.1,
            "{what}: the trust ConfigMap changed to {}\n{}",
            now.1,
            running.replica.log_tail()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    Ok(())
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn a_second_service_labelled_as_the_issuer_does_not_move_the_leaf_or_the_discovery_url() -> anyhow::Result<()>
{
    let Some(running) = Running::start(&[])? else {
        return Ok(());
    };
    let plane = &running.plane;
    let before = issued(&running)?;
    let discovery = before.1["discoveryURL"].as_str().unwrap_or_default().to_owned();

    plane.apply(&impostor("aaa-issuer"))?;
    let service = get(plane, 0, "service", "aaa-issuer")?.ok_or_else(|| anyhow::anyhow!("no impostor"))?;
    let address = service["spec"]["clusterIP"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        !address.is_empty() && !discovery.contains(&address),
        "the impostor has an address of its own ({address:?}), not the one in use: {discovery}"
    );
    unchanged_for(&running, &before, "beside the real issuer Service")?;

    // The real one gone: the impostor is still not the issuer (the trust stays as it was).
    plane.kubectl_run(&["delete", "service", "ichor-issuer", "-n", NAMESPACE], None)?;
    unchanged_for(&running, &before, "with the real issuer Service gone")?;
    Ok(())
}
