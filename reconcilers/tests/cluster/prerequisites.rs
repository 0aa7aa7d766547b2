//! The chart installed before Ichor core: a real apiserver that serves every Ichor kind but
//! `TalosCluster`. The controller is not ready, and its `/readyz` and its log (once) name the
//! missing kind and what to install; once the CRD is installed it becomes ready without a
//! restart. A replica started without the chart's own `IchorUser` CRD names that one, with the
//! chart's CRDs as the remedy.

use std::time::{Duration, Instant};

use ichor_testkit::control_plane::{ControlPlane, Options};
use ichor_testkit::install::{self, CONTROLLER_SERVICE_ACCOUNT, NAMESPACE, crd};
use ichor_testkit::wait;

use crate::replicas::Replica;

const MISSING: &str = "talosclusters.ichor.maesh.dev.yaml";
const SENTENCE: &str = "the Ichor core kind TalosCluster (ichor.maesh.dev/v1alpha1) is not served by this \
                        cluster: install Ichor core first";

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn a_missing_core_kind_is_named_by_readiness_until_its_crd_is_installed() -> anyhow::Result<()> {
    let Some(plane) = ControlPlane::start(Options::default())? else {
        return Ok(());
    };
    install::install_crds_without(&plane, MISSING)?;
    // The default install (users off), as `helm install` renders it.
    plane.apply(&install::chart_manifest_users_off()?)?;

    let dir = tempfile::tempdir()?;
    let kubeconfig = install::component_kubeconfig(&plane, 0, CONTROLLER_SERVICE_ACCOUNT)?;
    let replica = Replica::start(dir.path(), "ichor-controller-a", &kubeconfig)?;
    let named = wait::until("/readyz naming TalosCluster", Duration::from_secs(60), || {
        Ok(replica
            .readyz_answer()
            .filter(|(_, body)| body.contains("TalosCluster")))
    })
    .map_err(|e| e.context(replica.log_tail()))?;
    assert_eq!(named.0, 503, "not ready without TalosCluster: {}", named.1);
    let body: serde_json::Value = serde_json::from_str(&named.1)?;
    assert_eq!(body["ready"], false);
    assert_eq!(
        body["waitingFor"],
        serde_json::json!(["watchers", "the webhook serving certificate"])
    );
    assert_eq!(
        body["reasons"],
        serde_json::json!([format!("not ready: {SENTENCE}")]),
        "{body}"
    );
    // Still named after several retries; said once in the log.
    std::thread::sleep(Duration::from_secs(5));
    let again = replica.readyz_answer();
    assert!(
        again
            .as_ref()
            .is_some_and(|(s, b)| *s == 503 && b.contains(SENTENCE)),
        "{again:?}"
    );
    let log = replica.log();
    assert_eq!(log.matches(SENTENCE).count(), 1, "said once, at warn:\n{log}");
    assert!(
        log.lines().any(|l| l.contains(SENTENCE) && l.contains("WARN")),
        "{log}"
    );

    // Ichor core's CRD appears: ready, no restart.
    let installed = Instant::now();
    plane.apply(&crd("hack/crds", MISSING)?)?;
    install::wait_crds_established(&plane)?;
    // Its webhooks' certificate (issued with users off too), as the kubelet mounts it.
    wait::until("the webhooks' certificate", Duration::from_secs(60), || {
        plane.get_json(0, "secret", NAMESPACE, "ichor-webhook-tls")
    })
    .map_err(|e| e.context(replica.log_tail()))?;
    crate::webhooks::mount_certificate(&plane, &replica)?;
    wait::until(
        "/readyz 200 once TalosCluster is served",
        Duration::from_secs(60),
        || Ok((replica.readyz() == Some(200)).then_some(())),
    )
    .map_err(|e| e.context(replica.log_tail()))?;
    eprintln!(
        "ready {:.1}s after the TalosCluster CRD was applied",
        installed.elapsed().as_secs_f64()
    );

    // The chart's own CRD missing (installed with --skip-crds, or deleted): a replica that
    // starts now names it, with what to install instead of Ichor core.
    plane.kubectl_run(
        &["delete", "crd", "ichorusers.ichor.maesh.dev", "--wait=true"],
        None,
    )?;
    let late = Replica::start(dir.path(), "ichor-controller-b", &kubeconfig)?;
    let own = wait::until("/readyz naming IchorUser", Duration::from_secs(60), || {
        Ok(late
            .readyz_answer()
            .filter(|(_, body)| body.contains("IchorUser")))
    })
    .map_err(|e| e.context(late.log_tail()))?;
    assert_eq!(own.0, 503, "{}", own.1);
    let body: serde_json::Value = serde_json::from_str(&own.1)?;
    assert_eq!(
        body["reasons"],
        serde_json::json!([format!(
            "not ready: {}",
            ichor_renderers::crd::not_served_message("IchorUser")
        )]),
        "{body}"
    );
    assert!(
        body["reasons"][0]
            .as_str()
            .is_some_and(|r| r.contains("install the chart's CRDs")),
        "{body}"
    );
    Ok(())
}
