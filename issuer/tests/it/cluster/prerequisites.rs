//! The issuer before Ichor core: the `ichor-issuer --store kube` process, as the chart runs it
//! (its ServiceAccount, the mounted keys and TLS as files), on a real apiserver without the
//! `IchorInstallation` CRD. Its runtime settings follow that kind, so its readiness waits for
//! it: `/readyz` names the missing kind and what to install, and answers 200 once the CRD is
//! installed, without a restart.

use std::time::{Duration, Instant};

use ichor_testkit::control_plane::{ControlPlane, Options};
use ichor_testkit::install::{self, ISSUER_SERVICE_ACCOUNT, crd};
use jiff::SignedDuration;

use super::runtime;
use crate::conformance_common::{Options as IssuerOptions, RunningIssuer, Store, USER};

const SENTENCE: &str = "not ready: the Ichor core kind IchorInstallation (ichor.maesh.dev/v1alpha1) is not \
                        served by this cluster: install Ichor core first";

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn a_missing_installation_kind_is_named_by_the_issuer_readiness_until_its_crd_is_installed()
-> anyhow::Result<()> {
    let Some(plane) = ControlPlane::start(Options::default())? else {
        return Ok(());
    };
    install::install_crds_without(&plane, "ichorinstallations.ichor.maesh.dev.yaml")?;
    // The chart with users on: the issuer's ServiceAccount and RBAC.
    install::install_chart(&plane)?;

    let options = IssuerOptions {
        store: Store::Kube {
            kubeconfig: install::component_kubeconfig(&plane, 0, ISSUER_SERVICE_ACCOUNT)?,
            ca_file: plane.ca_file(),
        },
        ..IssuerOptions::default()
    };
    let runtime = runtime(1)?;
    runtime.block_on(async {
        let mut issuer = RunningIssuer::start_unready(options, &[USER], SignedDuration::from_hours(30));
        let readyz = format!("{}/readyz", issuer.url);
        let deadline = Instant::now() + Duration::from_secs(30);
        let body = loop {
            if let Ok(r) = issuer.client.get(&readyz).send().await {
                let status = r.status().as_u16();
                let body: serde_json::Value = r.json().await.unwrap_or_default();
                if body["reasons"].is_array() {
                    assert_eq!(status, 503, "{body}");
                    break body;
                }
            }
            anyhow::ensure!(Instant::now() < deadline, "/readyz gave no reason within 30 s");
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_eq!(body["ready"], false);
        assert_eq!(body["waitingFor"], serde_json::json!(["installation"]), "{body}");
        assert_eq!(body["reasons"], serde_json::json!([SENTENCE]), "{body}");

        let installed = Instant::now();
        plane.apply(&crd("hack/crds", "ichorinstallations.ichor.maesh.dev.yaml")?)?;
        issuer.wait_ready().await;
        eprintln!(
            "issuer ready {:.1}s after the IchorInstallation CRD was applied",
            installed.elapsed().as_secs_f64()
        );
        anyhow::Ok(())
    })
}
