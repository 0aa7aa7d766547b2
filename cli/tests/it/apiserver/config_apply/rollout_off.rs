//! The controller's rollout as an install without a Helm release shows it (the chart applied
//! with kubectl, as `helm template | kubectl apply` or a GitOps tool does): the Deployment's
//! `ICHOR_CONTROLLER_ROLLOUT` and the Secret `<cluster>-talosconfig`. Without either the command
//! stops at once saying what to do and creates nothing; with both it creates the operation, and
//! when nobody takes it up it says the controller's pods may still be restarting. Where nothing
//! says (no release, no Deployment), an operation nobody takes up is given up on, not followed
//! forever.

use std::time::{Duration, Instant};

use ichor_testkit::install::{self, NAMESPACE};
use serde_json::json;

use super::{CLUSTER, Following, Site, UNCLAIMED_ENV};

/// The checks are made before any operation exists, in well under the 30 s after which an
/// operation nobody took up is looked at again.
const FAIL_FAST: Duration = Duration::from_secs(15);

/// Applies `manifest` and removes the chart's fail-closed webhooks (no controller runs here).
fn apply_chart(site: &Site, manifest: &str) {
    tokio::task::block_in_place(|| {
        // What `ichor init` creates before users are on (the chart has Roles there).
        site.plane
            .apply(&install::credentials_namespace_manifest())
            .unwrap();
        site.plane.apply(manifest).unwrap();
        site.plane
            .kubectl_run(
                &["delete", "validatingwebhookconfiguration", "ichor-identity"],
                None,
            )
            .unwrap();
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the control plane: hack/kube/build.sh"]
async fn without_the_rollout_or_its_secret_it_stops_at_once_and_with_both_it_creates_and_follows() {
    let Some(site) = Site::start().await else {
        return;
    };

    // The chart's default values: the controller runs without the rollout.
    apply_chart(&site, &install::chart_manifest_users_off().unwrap());
    let started = Instant::now();
    let (status, _, stderr) = site.run(&["--cluster", CLUSTER, "--yes"]).await;
    let took = started.elapsed();
    eprintln!("refused in {took:?}");
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(took < FAIL_FAST, "{took:?}");
    assert!(
        stderr.contains(
            "error: the controller does not roll out cluster prod: Deployment ichor-system/ichor-controller \
             runs without the rollout (ICHOR_CONTROLLER_ROLLOUT is not \"true\"). Set the chart value \
             controller.rollout.clusters to a list with prod"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("No operation was created."), "{stderr}");
    assert!(site.operations().await.is_empty());

    // The rollout on for prod (the test kit's users-on values list it): its Secret is missing.
    apply_chart(&site, &install::chart_manifest().unwrap());
    let started = Instant::now();
    let (status, _, stderr) = site.run(&["--cluster", CLUSTER, "--yes"]).await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(started.elapsed() < FAIL_FAST);
    assert!(
        stderr.contains(
            "error: Secret ichor-system/prod-talosconfig does not exist: the controller reads cluster prod's \
             Talos credentials from it"
        ),
        "{stderr}"
    );
    // No release to read the issuer URL from: its placeholder. Never a whole-file upload.
    assert!(
        stderr.contains(
            "ichor init --ui-url URL --cluster prod --talosconfig ./talosconfig --kube-ca ./kube-ca.crt"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("--from-file=talosconfig"), "{stderr}");
    assert!(site.operations().await.is_empty());

    // Both: the operation is created and followed; nobody takes it up here, and the warning
    // does not blame the values.
    tokio::task::block_in_place(|| {
        site.plane
            .apply(
                &json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": "prod-talosconfig", "namespace": NAMESPACE},
                    "stringData": {"talosconfig": "context: test\n", "ca.crt": "not read here"}})
                .to_string(),
            )
            .unwrap();
    });
    let mut cmd = site.command(&["--cluster", CLUSTER, "--yes"]);
    cmd.env(UNCLAIMED_ENV, "2");
    let mut following = Following::spawn(cmd);
    site.the_operation().await;
    let warning = following
        .line_where("warning", |l| l.starts_with("warning:"))
        .await;
    assert!(
        warning.contains(
            "though it is set to roll out cluster prod and Secret ichor-system/prod-talosconfig exists"
        ),
        "{warning}"
    );
    assert!(warning.ends_with("Still following."), "{warning}");
}

/// Where the caller can see neither a release nor the controller's Deployment (here: neither
/// exists), an operation nobody takes up is warned about, then given up on after ten times the
/// warning's delay: the command exits 1 naming the operation, which stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the control plane: hack/kube/build.sh"]
async fn an_operation_nobody_takes_up_is_given_up_on_not_followed_forever() {
    let Some(site) = Site::start().await else {
        return;
    };
    let mut cmd = site.command(&["--cluster", CLUSTER, "--yes"]);
    cmd.env(UNCLAIMED_ENV, "1");
    let started = Instant::now();
    let (status, _, stderr) = Site::output(cmd).await;
    let took = started.elapsed();
    eprintln!("given up after {took:?}");
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(took >= Duration::from_secs(10), "{took:?}");
    assert!(took < Duration::from_secs(30), "{took:?}");
    assert!(
        stderr.contains("warning: the controller has not taken the operation up after 1s."),
        "{stderr}"
    );
    let ops = site.operations().await;
    assert_eq!(ops.len(), 1, "the operation stays");
    let name = ops[0].metadata.name.clone().unwrap();
    assert!(
        stderr.contains(&format!(
            "error: no controller has taken operation ichor-system/{name} up in 10s"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("kubectl -n ichor-system delete talosoperation {name}")),
        "{stderr}"
    );
}
