//! The chart's admission webhooks answered for the test apiserver as in a cluster: the
//! controller's own webhook code (`ichor_controller::admission`, the rules, the HTTPS listener
//! and the `SubjectAccessReview`s as the chart's ServiceAccount) on a thread of its own, the
//! chart's `ValidatingWebhookConfiguration` left as Helm wrote it (a `service:` reference) but
//! for the `caBundle` the controller would write, and the Service pointed at the listener by an
//! EndpointSlice. The apiserver must run with `--enable-aggregator-routing=true`, so that it
//! resolves the Service through its endpoints and verifies the serving certificate for
//! `ichor-controller-webhook.ichor-system.svc`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context as _;
use base64::Engine as _;
use ichor_controller::admission::fixtures::{ServingPair, WEBHOOK_HOST};
use ichor_controller::admission::{
    AdmissionObserver, AdmissionState, KubeAccessReviewer, KubeUserLister, ServerOptions,
    controller_identity, serve_on,
};
use ichor_testkit::control_plane::ControlPlane;
use ichor_testkit::install::{self, CONTROLLER_SERVICE_ACCOUNT, NAMESPACE};
use ichor_testkit::wait;
use serde_json::json;

/// The chart's webhook configuration, Service and the Service's port name.
pub const CONFIGURATION: &str = "ichor-identity";
const SERVICE: &str = "ichor-controller-webhook";
const PORT_NAME: &str = "webhook";

/// Every decision the webhooks made: the webhook and whether it allowed.
#[derive(Debug, Default)]
struct Decisions(Mutex<Vec<(&'static str, bool)>>);

impl AdmissionObserver for Decisions {
    fn decided(&self, webhook: &'static str, allowed: bool, _elapsed: Duration) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((webhook, allowed));
    }
}

/// The webhooks being served; stopped on drop.
pub struct Webhooks {
    decisions: Arc<Decisions>,
    ca_bundle: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _cert_dir: tempfile::TempDir,
}

impl Webhooks {
    /// Serves the webhooks of the chart installed on `plane` and waits until the apiserver
    /// reaches them: a server-side dry run of a change of the TalosCluster `probe_cluster` is
    /// reviewed and allowed.
    pub fn serve(plane: &ControlPlane, probe_cluster: &str) -> anyhow::Result<Self> {
        let kubeconfig = install::component_kubeconfig(plane, 0, CONTROLLER_SERVICE_ACCOUNT)?;
        let cert_dir = tempfile::tempdir()?;
        let pair = ServingPair::self_signed(WEBHOOK_HOST)?;
        pair.write_to(cert_dir.path())?;
        let decisions = Arc::new(Decisions::default());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (bound, port) = std::sync::mpsc::channel::<anyhow::Result<u16>>();
        let dir = cert_dir.path().to_path_buf();
        let observer = decisions.clone();
        let thread = std::thread::spawn(move || {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    let _ = bound.send(Err(e.into()));
                    return;
                }
            };
            runtime.block_on(async move {
                let started = async {
                    let config = kube::Config::from_custom_kubeconfig(
                        kube::config::Kubeconfig::read_from(&kubeconfig)?,
                        &kube::config::KubeConfigOptions::default(),
                    )
                    .await?;
                    let client = kube::Client::try_from(config)?;
                    let state = AdmissionState::new(
                        Arc::new(KubeAccessReviewer::new(client.clone())),
                        Arc::new(KubeUserLister::watching(client, NAMESPACE)),
                        controller_identity(NAMESPACE),
                    )
                    .with_observer(observer);
                    // Every address: an EndpointSlice may not hold a loopback one.
                    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], 0))).await?;
                    let port = listener.local_addr()?.port();
                    anyhow::Ok((listener, state, port))
                };
                let (listener, state, port) = match started.await {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = bound.send(Err(e));
                        return;
                    }
                };
                let _ = bound.send(Ok(port));
                let shutdown = async move {
                    let _ = stopped.await;
                };
                if let Err(e) =
                    serve_on(listener, dir, Arc::new(state), shutdown, ServerOptions::default()).await
                {
                    eprintln!("the webhook server stopped: {e}");
                }
            });
        });
        let port = port
            .recv_timeout(Duration::from_secs(30))
            .context("the webhook server did not start")??;
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&pair.cert_pem);
        let webhooks = Self {
            decisions,
            ca_bundle,
            stop: Some(stop),
            thread: Some(thread),
            _cert_dir: cert_dir,
        };
        webhooks.write_ca_bundle(plane)?;
        install::point_service_at(plane, SERVICE, PORT_NAME, install::host_address()?, port)?;
        wait::until(
            "the webhooks reached through their Service",
            Duration::from_secs(60),
            || {
                plane.kubectl_run(
                    &[
                        "label",
                        "taloscluster",
                        probe_cluster,
                        "-n",
                        NAMESPACE,
                        "ichor.test/probe=1",
                        "--dry-run=server",
                    ],
                    None,
                )?;
                Ok(Some(()))
            },
        )?;
        Ok(webhooks)
    }

    /// The controller's part: the `caBundle` of every webhook of the configuration.
    fn write_ca_bundle(&self, plane: &ControlPlane) -> anyhow::Result<()> {
        let configuration = plane
            .get_json(0, "validatingwebhookconfiguration", NAMESPACE, CONFIGURATION)?
            .with_context(|| format!("no ValidatingWebhookConfiguration {CONFIGURATION}"))?;
        let count = configuration["webhooks"].as_array().map_or(0, Vec::len);
        anyhow::ensure!(count > 0, "{CONFIGURATION} has no webhooks");
        let ops: Vec<_> = (0..count)
            .map(|i| json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": self.ca_bundle}))
            .collect();
        plane.kubectl_run(
            &[
                "patch",
                "validatingwebhookconfiguration",
                CONFIGURATION,
                "--type=json",
                "--field-manager=ichor-controller",
                "-p",
                &serde_json::Value::Array(ops).to_string(),
            ],
            None,
        )?;
        Ok(())
    }

    /// The `caBundle` written into every webhook (base64 of the serving certificate's PEM).
    pub fn ca_bundle(&self) -> &str {
        &self.ca_bundle
    }

    /// How many reviews `webhook` answered with `allowed`, so far.
    pub fn count(&self, webhook: &str, allowed: bool) -> usize {
        self.decisions
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(w, a)| *w == webhook && *a == allowed)
            .count()
    }
}

impl Drop for Webhooks {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
