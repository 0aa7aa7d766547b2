//! The issuer before Ichor core: a real apiserver without the `IchorInstallation` CRD. The
//! issuer's runtime settings (`--store kube`) follow that kind, so its readiness waits for it:
//! `/readyz` names the missing kind and what to install, and becomes ready once the CRD is
//! installed, without a restart.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ichor_issuer::installation::{InstallationSettings, SOURCE_NAME};
use ichor_server::health::Readiness;
use ichor_server::metrics::ReloadStatus;
use ichor_testkit::control_plane::{ControlPlane, Options};
use ichor_testkit::install::{self, NAMESPACE};

use super::{issuer_client, runtime};

const SENTENCE: &str = "not ready: the Ichor core kind IchorInstallation (ichor.maesh.dev/v1alpha1) is not \
                        served by this cluster: install Ichor core first";

fn crd(dir: &str, file: &str) -> anyhow::Result<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(dir)
        .join(file);
    Ok(std::fs::read_to_string(path)?)
}

#[test]
fn a_missing_installation_kind_is_named_by_the_issuer_readiness_until_its_crd_is_installed()
-> anyhow::Result<()> {
    let Some(plane) = ControlPlane::start(Options::default())? else {
        return Ok(());
    };
    plane.apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NAMESPACE}\n"
    ))?;
    plane.apply(&crd("helm/ichor/crds", "ichorusers.ichor.maesh.dev.yaml")?)?;
    for file in [
        "talosclusters.ichor.maesh.dev.yaml",
        "talosmachines.ichor.maesh.dev.yaml",
        "talosoperations.ichor.maesh.dev.yaml",
    ] {
        plane.apply(&crd("hack/crds", file)?)?;
    }
    // The chart with users on: the issuer's ServiceAccount and RBAC.
    install::install_chart(&plane)?;

    let installation = Arc::new(InstallationSettings::new(
        ichor_testkit::issuer::harness::settings(),
    ));
    let readiness = Readiness::new().require_loaded(installation.clone() as Arc<dyn ReloadStatus>);
    let runtime = runtime(1)?;
    runtime.block_on(async {
        let client = issuer_client(&plane).await?;
        let follow = tokio::spawn(installation.clone().follow(client));

        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (waiting, reasons) = readiness.status();
            if !reasons.is_empty() {
                assert_eq!(waiting, vec![SOURCE_NAME]);
                assert_eq!(reasons, vec![SENTENCE.to_owned()]);
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "no reason given: waiting for {waiting:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(!installation.is_loaded());

        let installed = Instant::now();
        plane.apply(&crd("hack/crds", "ichorinstallations.ichor.maesh.dev.yaml")?)?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while !readiness.status().0.is_empty() {
            anyhow::ensure!(
                Instant::now() < deadline,
                "not ready 60 s after the CRD: {:?}",
                readiness.status()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(
            installation.not_ready_reason().is_none(),
            "the reason is gone once served"
        );
        eprintln!(
            "ready {:.1}s after the IchorInstallation CRD was applied",
            installed.elapsed().as_secs_f64()
        );
        follow.abort();
        anyhow::Ok(())
    })
}
