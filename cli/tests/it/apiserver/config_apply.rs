//! `ichor config apply --cluster NAME` without `--dir` (the rollout in the cluster) through the
//! real `ichor` binary against a real kube-apiserver of the test kit, with the admin's kubeconfig:
//! the CRDs only (no chart, so no webhook reviews anything), a `TalosCluster` trusting Ichor's
//! issuer, its three control planes (and one of another cluster) and the trust ConfigMap
//! `ichor-oidc-trust`, from `ichor_controller_core::sim::fixtures`. One case adds the chart's built-in
//! roles (`files/ichor-roles.yaml`) for a user of `ichor:admin`, who may not read that ConfigMap.
//!
//! The controller's part is played by the test: once the command has created (or found) the
//! `TalosOperation`, the test writes the operation's status through its status subresource the
//! way the controller writes it (server-side apply of the whole status, field manager
//! `ichor-controller`, conditioned on the resourceVersion read; the states, fields and messages of
//! `ichor_controller_core::identity::rollout` and `ichor_controller::apply::rollout`), waiting after
//! each write for the line the command prints for it. The real controller doing the rollout is
//! tested in `reconcilers/tests/cluster/rollout.rs`.

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use ichor_controller::apply::{FIELD_MANAGER, rollout::APPLIED_HASHES_MANAGER};
use ichor_controller_core::sim::fixtures::{self, Auth};
use ichor_renderers::auth::second_factor_policy::SecondFactorPolicy;
use ichor_renderers::cluster::{AUTHENTICATION_DOCUMENT, render_cluster};
use ichor_renderers::crd::{
    IDENTITY_MANAGER, MANAGED_BY_LABEL, NodeState, OperationKind, OperationNodeResult, OperationPhase,
    PreviousDocument, TalosCluster, TalosMachine, TalosOperation, TalosOperationSpec, TalosOperationStatus,
};
use ichor_renderers::trust::{IssuerTrust, render_trust_configmap};
use ichor_testkit::control_plane::{ControlPlane, Options};
use ichor_testkit::install::{self, NAMESPACE};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};
use tokio::sync::mpsc;

use crate::support::ichor_command;

const PENDING: &str = NodeState::Pending.as_str();
const APPLYING: &str = NodeState::Applying.as_str();
const WAITING_READY: &str = NodeState::WaitingReady.as_str();
const DONE: &str = NodeState::Done.as_str();
const ROLLING_BACK: &str = NodeState::RollingBack.as_str();
const ROLLED_BACK: &str = NodeState::RolledBack.as_str();

mod rollout_off;

const CLUSTER: &str = "prod";
/// The control planes of [`CLUSTER`], created in this (unsorted) order.
const MACHINES: [(&str, &str); 3] = [
    ("cp-3", "10.0.0.13"),
    ("cp-1", "10.0.0.11"),
    ("cp-2", "10.0.0.12"),
];
/// The plan's order (by name).
const ORDER: [&str; 3] = ["cp-1", "cp-2", "cp-3"];
/// A control plane of another cluster, which no plan of [`CLUSTER`] holds.
const OTHER: (&str, &str, &str) = ("staging-cp-1", "staging", "10.1.0.11");
/// How long a line the command prints may take to appear (it polls every second).
const LINE_TIMEOUT: Duration = Duration::from_secs(30);
/// The hidden variable that shortens the command's wait before its unclaimed warning.
const UNCLAIMED_ENV: &str = "ICHOR_TEST_UNCLAIMED_AFTER_SECS";

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

/// A control plane with the cluster's objects, and a client as the admin.
struct Site {
    plane: ControlPlane,
    client: kube::Client,
    home: tempfile::TempDir,
}

impl Site {
    /// The control plane, the CRDs and the cluster's objects; `None` when the control plane's
    /// binaries are missing (and not required).
    async fn start() -> Option<Self> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let plane = tokio::task::block_in_place(|| ControlPlane::start(Options::default())).unwrap()?;
        eprintln!("control plane ready in {:?}", plane.started_in());
        tokio::task::block_in_place(|| install::install_crds(&plane)).unwrap();
        let kubeconfig = kube::config::Kubeconfig::read_from(plane.admin_kubeconfig()).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let site = Site {
            plane,
            client,
            home: tempfile::tempdir().unwrap(),
        };
        let mut objects = vec![fixtures::cluster(CLUSTER, 0, Auth::Ichor).value];
        for (name, address) in MACHINES {
            objects.push(fixtures::control_plane(name, CLUSTER, address, &[]).value);
        }
        objects.push(fixtures::control_plane(OTHER.0, OTHER.1, OTHER.2, &[]).value);
        let trust = IssuerTrust {
            discovery_url: "https://ichor-issuer.ichor-system.svc:8444".to_owned(),
            ca_pem: site.plane.ca_pem().to_owned(),
        };
        objects.push(serde_json::to_value(render_trust_configmap(&trust)).unwrap());
        let mut yaml = String::new();
        for mut object in objects {
            // Written by the apiserver, not by a client.
            object["metadata"].as_object_mut().unwrap().remove("generation");
            yaml.push_str("---\n");
            yaml.push_str(&serde_json::to_string(&object).unwrap());
            yaml.push('\n');
        }
        tokio::task::block_in_place(|| site.plane.apply(&yaml)).unwrap();
        Some(site)
    }

    /// `ichor config apply ARGS` with the admin's kubeconfig, stdin not a terminal, stdout and
    /// stderr piped.
    fn command(&self, args: &[&str]) -> tokio::process::Command {
        self.command_with(self.plane.admin_kubeconfig(), args)
    }

    /// `ichor config apply ARGS` with `kubeconfig`.
    fn command_with(&self, kubeconfig: &Path, args: &[&str]) -> tokio::process::Command {
        let mut argv = vec!["config", "apply"];
        argv.extend(args);
        let mut cmd = ichor_command(self.home.path(), &argv);
        cmd.env("KUBECONFIG", kubeconfig)
            .env_remove(UNCLAIMED_ENV)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.kill_on_drop(true);
        cmd
    }

    /// Runs the command to its end: exit status, stdout, stderr.
    async fn run(&self, args: &[&str]) -> (ExitStatus, String, String) {
        Self::output(self.command(args)).await
    }

    async fn output(mut cmd: tokio::process::Command) -> (ExitStatus, String, String) {
        let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
            .await
            .expect("ichor config apply did not end within 60 s")
            .unwrap();
        (
            out.status,
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn operations_api(&self) -> Api<TalosOperation> {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    async fn operations(&self) -> Vec<TalosOperation> {
        self.operations_api()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
    }

    /// The one operation, once it exists (the command creates it after printing the plan).
    async fn the_operation(&self) -> TalosOperation {
        let started = Instant::now();
        loop {
            let mut ops = self.operations().await;
            assert!(ops.len() <= 1, "more than one operation: {ops:?}");
            if let Some(op) = ops.pop() {
                return op;
            }
            assert!(
                started.elapsed() < LINE_TIMEOUT,
                "no TalosOperation after {LINE_TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Writes the operation's whole status as the controller does: server-side apply on the
    /// status subresource, field manager `ichor-controller`, forced, conditioned on the
    /// resourceVersion just read.
    async fn write_status(&self, name: &str, status: &TalosOperationStatus) {
        let api = self.operations_api();
        let current = api.get(name).await.unwrap();
        let body = json!({
            "apiVersion": "ichor.maesh.dev/v1alpha1",
            "kind": "TalosOperation",
            "metadata": {"name": name, "namespace": NAMESPACE,
                "resourceVersion": current.metadata.resource_version},
            "status": status,
        });
        api.patch_status(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
        .unwrap();
    }

    /// Every control plane of the cluster reports the rendered document applied, as the
    /// controller records it after a step (its own field manager, on the status subresource).
    async fn mark_all_applied(&self) {
        let clusters: Api<TalosCluster> = Api::namespaced(self.client.clone(), NAMESPACE);
        let machines: Api<TalosMachine> = Api::namespaced(self.client.clone(), NAMESPACE);
        let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
            Api::namespaced(self.client.clone(), NAMESPACE);
        let cluster = clusters.get(CLUSTER).await.unwrap();
        let trust = IssuerTrust::from_configmap(&configmaps.get("ichor-oidc-trust").await.unwrap()).unwrap();
        let all = machines.list(&ListParams::default()).await.unwrap().items;
        let render = render_cluster(&cluster, &all, Some(&trust), &SecondFactorPolicy::default());
        let sha = render.authentication.as_ref().unwrap().sha256.clone();
        for (name, _) in MACHINES {
            let body = json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "TalosMachine",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "status": {"appliedDocumentHashes": {AUTHENTICATION_DOCUMENT: sha}}});
            machines
                .patch_status(
                    name,
                    &PatchParams::apply(APPLIED_HASHES_MANAGER).force(),
                    &Patch::Apply(&body),
                )
                .await
                .unwrap();
        }
    }
}

/// A running `ichor config apply` whose stderr is read line by line as it comes.
struct Following {
    child: tokio::process::Child,
    lines: mpsc::UnboundedReceiver<String>,
    stdout: tokio::task::JoinHandle<String>,
    /// Every stderr line read so far.
    seen: Vec<String>,
}

impl Following {
    fn spawn(mut cmd: tokio::process::Command) -> Self {
        let mut child = cmd.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdout = tokio::spawn(async move {
            let mut out = String::new();
            let _ = stdout.read_to_string(&mut out).await;
            out
        });
        Following {
            child,
            lines,
            stdout,
            seen: Vec::new(),
        }
    }

    /// Waits until the command prints a line that `matches`; that line.
    async fn line_where(&mut self, what: &str, matches: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + LINE_TIMEOUT;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(line)) => {
                    self.seen.push(line.clone());
                    if matches(&line) {
                        return line;
                    }
                }
                Ok(None) => panic!(
                    "the command ended without printing {what}:\n{}",
                    self.seen.join("\n")
                ),
                Err(_) => panic!(
                    "no line {what} within {LINE_TIMEOUT:?}:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }

    /// Waits until the command prints exactly `line`.
    async fn expect(&mut self, line: &str) {
        self.line_where(&format!("{line:?}"), |l| l == line).await;
    }

    /// Waits for the command's end: its exit status, stdout and every stderr line.
    async fn finish(mut self) -> (ExitStatus, String, Vec<String>) {
        let status = tokio::time::timeout(LINE_TIMEOUT, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("the command did not end:\n{}", self.seen.join("\n")))
            .unwrap();
        while let Some(line) = self.lines.recv().await {
            self.seen.push(line);
        }
        (status, self.stdout.await.unwrap(), self.seen)
    }
}

/// The status the controller writes when it starts the operation: every step `Pending`.
fn started(cluster: &str) -> TalosOperationStatus {
    TalosOperationStatus {
        phase: Some(OperationPhase::Running),
        current_step: Some(0),
        nodes: ORDER
            .iter()
            .map(|name| OperationNodeResult {
                machine: (*name).to_owned(),
                state: PENDING.to_owned(),
                address: Some(address(name).to_owned()),
                ..OperationNodeResult::default()
            })
            .collect(),
        message: Some(format!(
            "restarting the API server of 3 control plane(s) of {cluster}, one at a time"
        )),
        rendered_sha256: Some("0".repeat(64)),
    }
}

fn address(machine: &str) -> &'static str {
    MACHINES.iter().find(|(n, _)| *n == machine).unwrap().1
}

/// Step `i` recorded `Applying` (the previous document recorded first, no message).
fn applying(status: &mut TalosOperationStatus, i: usize) {
    let node = &mut status.nodes[i];
    node.state = APPLYING.to_owned();
    node.started_at = Some(now());
    node.message = None;
    node.previous_document = Some(PreviousDocument {
        yaml: None,
        sha256: None,
    });
}

/// The message of a node applied (with what the Talos API answered the apply).
const WAITING_MESSAGE: &str = "applied (Applied configuration without a reboot); waiting for /readyz";

/// Step `i` applied, waiting for its `/readyz`.
fn waiting(status: &mut TalosOperationStatus, i: usize) {
    let node = &mut status.nodes[i];
    node.state = WAITING_READY.to_owned();
    node.applied_at = Some(now());
    node.message = Some(WAITING_MESSAGE.to_owned());
}

fn done_message(i: usize) -> String {
    format!(
        "the API server restarted and was ready {}s after the apply",
        10 + i
    )
}

/// Step `i` ready again after its restart; the next step is current.
fn done(status: &mut TalosOperationStatus, i: usize) {
    let total = status.nodes.len();
    let node = &mut status.nodes[i];
    node.state = DONE.to_owned();
    node.saw_not_ready = true;
    node.finished_at = Some(now());
    node.message = Some(done_message(i));
    status.current_step = u32::try_from((i + 1).min(total)).ok();
}

const SUCCEEDED_MESSAGE: &str = "every control plane of prod runs the rendered configuration";

fn succeeded(status: &mut TalosOperationStatus) {
    status.phase = Some(OperationPhase::Succeeded);
    status.current_step = None;
    status.message = Some(SUCCEEDED_MESSAGE.to_owned());
}

fn node_line(i: usize, state: &str, message: Option<&str>) -> String {
    let detail = message.map(|m| format!(": {m}")).unwrap_or_default();
    format!("[{}/3] {}: {state}{detail}", i + 1, ORDER[i])
}

/// Writes step `i` through `Applying`, `WaitingReady` (then `/readyz` seen down) and `Done`,
/// each time waiting for the command's line.
async fn roll_node(
    site: &Site,
    following: &mut Following,
    name: &str,
    status: &mut TalosOperationStatus,
    i: usize,
) {
    applying(status, i);
    site.write_status(name, status).await;
    following.expect(&node_line(i, APPLYING, None)).await;
    waiting(status, i);
    site.write_status(name, status).await;
    following
        .expect(&node_line(i, WAITING_READY, Some(WAITING_MESSAGE)))
        .await;
    // The probe saw it down: no new state, no new line.
    status.nodes[i].saw_not_ready = true;
    site.write_status(name, status).await;
    done(status, i);
    site.write_status(name, status).await;
    following
        .expect(&node_line(i, DONE, Some(&done_message(i))))
        .await;
}

/// The lines of node progress (`[i/n] ...`), in order.
fn progress(lines: &[String]) -> Vec<String> {
    lines.iter().filter(|l| l.starts_with('[')).cloned().collect()
}

fn assert_plan(stdout: &str) {
    assert!(
        stdout.starts_with(
            "Cluster prod: Restarts the Kubernetes API server on each control plane, one at a time; no reboot.\n"
        ),
        "{stdout}"
    );
    let positions: Vec<usize> = ORDER
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let step = format!(
                "\n{}. {name} ({}): apply the rendered machine configuration (no reboot), then wait for https://{}:6443/readyz.",
                i + 1,
                address(name),
                address(name)
            );
            stdout
                .find(&step)
                .unwrap_or_else(|| panic!("no step {step:?} in:\n{stdout}"))
        })
        .collect();
    assert!(positions.is_sorted(), "{stdout}");
    assert!(!stdout.contains("4. "), "{stdout}");
    assert!(!stdout.contains(OTHER.0), "another cluster's machine: {stdout}");
    assert!(stdout.contains("It reports no applied configuration"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the control plane: hack/kube/build.sh"]
async fn a_dry_run_prints_the_plan_and_creates_no_operation() {
    let Some(site) = Site::start().await else {
        return;
    };
    let (status, stdout, stderr) = site.run(&["--cluster", CLUSTER, "--dry-run"]).await;
    assert!(status.success(), "{stderr}");
    assert_plan(&stdout);
    assert!(stderr.contains("dry run: no operation was created"), "{stderr}");
    assert!(site.operations().await.is_empty());

    // The plan as JSON: the same steps, in order.
    let (status, stdout, stderr) = site
        .run(&["--cluster", "ichor-system/prod", "--dry-run", "-o", "json"])
        .await;
    assert!(status.success(), "{stderr}");
    let plan: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let machines: Vec<&str> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["machine"].as_str().unwrap())
        .collect();
    assert_eq!(machines, ORDER);
    assert_eq!(plan["controlPlanes"], 3);
    assert!(site.operations().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the control plane: hack/kube/build.sh"]
async fn with_yes_it_creates_one_operation_and_follows_it_node_by_node_through_an_apiserver_restart() {
    let Some(mut site) = Site::start().await else {
        return;
    };
    let started_at = Instant::now();
    let mut following = Following::spawn(site.command(&["--cluster", CLUSTER, "--yes"]));
    let op = site.the_operation().await;
    let name = op.metadata.name.clone().unwrap();
    assert!(name.starts_with("config-prod-"), "{name}");
    assert_eq!(op.metadata.generate_name.as_deref(), Some("config-prod-"));
    assert_eq!(
        op.spec,
        TalosOperationSpec {
            cluster: CLUSTER.to_owned(),
            kind: OperationKind::Config,
            action: None,
            machines: Vec::new(),
            paused: false,
        }
    );
    assert!(op.status.is_none(), "{op:?}");
    assert_eq!(
        op.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(MANAGED_BY_LABEL))
            .map(String::as_str),
        Some(IDENTITY_MANAGER),
        "labelled as this subsystem's, the only operations its controller drives: {op:?}"
    );
    following
        .expect(&format!("Created operation {NAMESPACE}/{name}."))
        .await;

    let mut status = started(CLUSTER);
    site.write_status(&name, &status).await;
    following
        .expect("restarting the API server of 3 control plane(s) of prod, one at a time")
        .await;
    roll_node(&site, &mut following, &name, &mut status, 0).await;

    // The apiserver restarts (as the one the command talks to does in a rollout): the command
    // waits it out and goes on following.
    tokio::task::block_in_place(|| site.plane.stop_apiserver(0)).unwrap();
    following
        .line_where("saying the API did not answer", |l| {
            l.starts_with("The API did not answer (")
                && l.ends_with("its server may be restarting. Retrying.")
        })
        .await;
    let took =
        tokio::task::block_in_place(|| site.plane.start_apiserver(0, Duration::from_secs(120))).unwrap();
    eprintln!("apiserver back in {took:?}");
    following.expect("The API is back.").await;

    roll_node(&site, &mut following, &name, &mut status, 1).await;
    roll_node(&site, &mut following, &name, &mut status, 2).await;
    succeeded(&mut status);
    site.write_status(&name, &status).await;

    let (exit, stdout, stderr) = following.finish().await;
    let all = stderr.join("\n");
    assert!(exit.success(), "{all}");
    assert_plan(&stdout);
    assert!(
        stdout.ends_with(&format!(
            "operation {NAMESPACE}/{name} succeeded: {SUCCEEDED_MESSAGE}\n"
        )),
        "{stdout}"
    );
    let mut expected = Vec::new();
    for i in 0..3 {
        expected.push(node_line(i, APPLYING, None));
        expected.push(node_line(i, WAITING_READY, Some(WAITING_MESSAGE)));
        expected.push(node_line(i, DONE, Some(&done_message(i))));
    }
    assert_eq!(progress(&stderr), expected, "{all}");
    assert_eq!(
        stderr
            .iter()
            .filter(|l| l.starts_with("The API did not answer"))
            .count(),
        1,
        "said once per absence: {all}"
    );
    assert!(!all.contains("warning:"), "{all}");
    assert_eq!(site.operations().await.len(), 1);
    eprintln!("followed in {:?}", started_at.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the control plane: hack/kube/build.sh"]
async fn a_rolled_back_node_fails_the_operation_and_the_command_after_warning_once_that_nobody_took_it_up() {
    let Some(site) = Site::start().await else {
        return;
    };
    let mut cmd = site.command(&["--cluster", CLUSTER, "--yes"]);
    cmd.env(UNCLAIMED_ENV, "2");
    let mut following = Following::spawn(cmd);
    let name = site.the_operation().await.metadata.name.unwrap();
    // Nothing writes a status: after the (shortened) wait the command says what may be wrong.
    let warning = following
        .line_where("warning", |l| l.starts_with("warning:"))
        .await;
    assert_eq!(
        warning,
        "warning: the controller has not taken the operation up after 2s. Is the rollout on (chart value \
         controller.rollout.clusters={prod}) and does Secret ichor-system/prod-talosconfig exist?"
    );

    let mut status = started(CLUSTER);
    site.write_status(&name, &status).await;
    following
        .expect("restarting the API server of 3 control plane(s) of prod, one at a time")
        .await;
    applying(&mut status, 0);
    site.write_status(&name, &status).await;
    following.expect(&node_line(0, APPLYING, None)).await;
    waiting(&mut status, 0);
    site.write_status(&name, &status).await;
    following
        .expect(&node_line(0, WAITING_READY, Some(WAITING_MESSAGE)))
        .await;
    // /readyz did not come back: the previous document is re-applied.
    let why = "/readyz of cp-1 did not come back within 300s of the apply (last: connection refused)";
    status.nodes[0].state = ROLLING_BACK.to_owned();
    status.nodes[0].rolled_back_at = Some(now());
    status.nodes[0].message = Some(why.to_owned());
    site.write_status(&name, &status).await;
    following.expect(&node_line(0, ROLLING_BACK, Some(why))).await;
    // Ready again on the previous document: the node rolled back, the operation failed.
    let rolled_back =
        format!("{why}; the previous document was re-applied and the API server is ready again");
    status.nodes[0].state = ROLLED_BACK.to_owned();
    status.nodes[0].finished_at = Some(now());
    status.nodes[0].message = Some(rolled_back.clone());
    status.phase = Some(OperationPhase::Failed);
    status.current_step = Some(0);
    let failure = format!("stopped at cp-1: {rolled_back}; not touched: cp-2, cp-3");
    status.message = Some(failure.clone());
    site.write_status(&name, &status).await;

    let (exit, stdout, stderr) = following.finish().await;
    let all = stderr.join("\n");
    assert_eq!(exit.code(), Some(1), "{all}");
    assert_plan(&stdout);
    assert!(!stdout.contains("succeeded"), "{stdout}");
    assert_eq!(
        progress(&stderr),
        [
            node_line(0, APPLYING, None),
            node_line(0, WAITING_READY, Some(WAITING_MESSAGE)),
            node_line(0, ROLLING_BACK, Some(why)),
            node_line(0, ROLLED_BACK, Some(&rolled_back)),
        ],
        "{all}"
    );
    assert_eq!(
        stderr.last().unwrap(),
        &format!("operation {NAMESPACE}/{name} failed: {failure}")
    );
    assert_eq!(
        stderr.iter().filter(|l| l.starts_with("warning:")).count(),
        1,
        "{all}"
    );
    assert_eq!(site.operations().await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the control plane: hack/kube/build.sh"]
async fn an_operation_already_rolling_the_cluster_is_followed_not_duplicated() {
    let Some(site) = Site::start().await else {
        return;
    };
    // Someone else's `ichor config apply`, which the controller took halfway.
    let mut op = TalosOperation::new(
        "",
        TalosOperationSpec {
            cluster: CLUSTER.to_owned(),
            kind: OperationKind::Config,
            action: None,
            machines: Vec::new(),
            paused: false,
        },
    );
    op.metadata.name = None;
    op.metadata.generate_name = Some("config-prod-".to_owned());
    op.metadata.labels = Some(
        [(MANAGED_BY_LABEL.to_owned(), IDENTITY_MANAGER.to_owned())]
            .into_iter()
            .collect(),
    );
    let name = site
        .operations_api()
        .create(&PostParams::default(), &op)
        .await
        .unwrap()
        .metadata
        .name
        .unwrap();
    let mut status = started(CLUSTER);
    applying(&mut status, 0);
    waiting(&mut status, 0);
    done(&mut status, 0);
    applying(&mut status, 1);
    waiting(&mut status, 1);
    site.write_status(&name, &status).await;

    let mut following = Following::spawn(site.command(&["--cluster", CLUSTER, "--yes"]));
    following
        .expect(&format!(
            "Operation {NAMESPACE}/{name} is already rolling cluster prod; following it."
        ))
        .await;
    following
        .expect(&node_line(1, WAITING_READY, Some(WAITING_MESSAGE)))
        .await;
    done(&mut status, 1);
    site.write_status(&name, &status).await;
    following
        .expect(&node_line(1, DONE, Some(&done_message(1))))
        .await;
    roll_node(&site, &mut following, &name, &mut status, 2).await;
    succeeded(&mut status);
    site.write_status(&name, &status).await;

    let (exit, stdout, stderr) = following.finish().await;
    let all = stderr.join("\n");
    assert!(exit.success(), "{all}");
    assert!(
        stdout.ends_with(&format!(
            "operation {NAMESPACE}/{name} succeeded: {SUCCEEDED_MESSAGE}\n"
        )),
        "{stdout}"
    );
    assert_eq!(
        progress(&stderr),
        [
            node_line(0, DONE, Some(&done_message(0))),
            node_line(1, WAITING_READY, Some(WAITING_MESSAGE)),
            node_line(1, DONE, Some(&done_message(1))),
            node_line(2, APPLYING, None),
            node_line(2, WAITING_READY, Some(WAITING_MESSAGE)),
            node_line(2, DONE, Some(&done_message(2))),
        ],
        "{all}"
    );
    assert!(!all.contains("Created operation"), "{all}");
    let ops = site.operations().await;
    assert_eq!(ops.len(), 1, "{ops:?}");
    assert_eq!(ops[0].metadata.name.as_deref(), Some(name.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the control plane: hack/kube/build.sh"]
async fn without_yes_or_a_terminal_or_with_a_wrong_invocation_it_refuses_naming_why_and_creates_nothing() {
    let Some(site) = Site::start().await else {
        return;
    };
    // No --yes and no terminal to ask on: the plan, then the refusal.
    let (status, stdout, stderr) = site.run(&["--cluster", CLUSTER]).await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_plan(&stdout);
    assert!(
        stderr.contains("refusing to restart API servers without confirmation: there is no terminal"),
        "{stderr}"
    );
    assert!(stderr.contains("--yes"), "{stderr}");

    // Neither --cluster nor --dir.
    let (status, stdout, stderr) = site.run(&[]).await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("error: --cluster NAME is required without --dir"),
        "{stderr}"
    );

    // A cluster that does not exist, named.
    let (status, stdout, stderr) = site.run(&["--cluster", "nope", "--yes"]).await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("error: TalosCluster ichor-system/nope does not exist"),
        "{stderr}"
    );

    // A flag of the offline rollout.
    let dir = tempfile::tempdir().unwrap();
    let machine_configs = dir.path().to_str().unwrap();
    let (status, stdout, stderr) = site
        .run(&[
            "--cluster",
            CLUSTER,
            "--yes",
            "--machine-config-dir",
            machine_configs,
        ])
        .await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("error: --machine-config-dir goes with --dir only"),
        "{stderr}"
    );

    assert!(site.operations().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the control plane: hack/kube/build.sh"]
async fn nothing_to_do_when_every_control_plane_runs_the_render_creates_no_operation() {
    let Some(site) = Site::start().await else {
        return;
    };
    site.mark_all_applied().await;
    let (status, stdout, stderr) = site.run(&["--cluster", CLUSTER, "--yes"]).await;
    assert!(status.success(), "{stderr}");
    assert_eq!(
        stdout,
        "Cluster prod: nothing to do; every control plane runs the rendered configuration.\n"
    );
    assert!(
        stderr.contains("nothing to do: every control plane runs the rendered configuration"),
        "{stderr}"
    );
    assert!(site.operations().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the control plane: hack/kube/build.sh"]
async fn an_ichor_admin_who_may_not_read_the_trust_configmap_rolls_with_the_plan_of_the_controller() {
    let Some(site) = Site::start().await else {
        return;
    };
    // The built-in roles, and alice of ichor:admin (the admin impersonating her): she may read and
    // create TalosOperations but no ConfigMap, so the plan of a cluster trusting Ichor's issuer
    // cannot be rendered on her side.
    let roles = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../helm/ichor/files/ichor-roles.yaml"),
    )
    .unwrap();
    tokio::task::block_in_place(|| site.plane.apply(&roles)).unwrap();
    let admin = site.plane.kubeconfig_yaml(0);
    assert_eq!(admin.matches("  user:\n").count(), 1, "{admin}");
    let alice = admin.replace(
        "  user:\n",
        "  user:\n    as: alice\n    as-groups: [\"ichor:admin\"]\n",
    );
    let kubeconfig = site.home.path().join("alice.kubeconfig");
    std::fs::write(&kubeconfig, alice).unwrap();
    let cannot = "Your kubeconfig may not read ConfigMap ichor-system/ichor-oidc-trust (the issuer's trust, \
                  which cluster prod needs), so the plan cannot be shown here";

    // A dry run has nothing to show: it fails, creating nothing.
    let (status, stdout, stderr) =
        Site::output(site.command_with(&kubeconfig, &["--cluster", CLUSTER, "--dry-run"])).await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains(cannot), "{stderr}");
    assert!(stderr.contains("error: dry run without a plan"), "{stderr}");
    assert!(site.operations().await.is_empty());

    // The rollout: the operation is created and followed; the controller found nothing to do.
    let mut following = Following::spawn(site.command_with(&kubeconfig, &["--cluster", CLUSTER, "--yes"]));
    following
        .line_where("saying the plan cannot be shown", |l| l.starts_with(cannot))
        .await;
    let op = site.the_operation().await;
    let name = op.metadata.name.unwrap();
    assert_eq!(op.spec.cluster, CLUSTER);
    following
        .expect(&format!("Created operation {NAMESPACE}/{name}."))
        .await;
    let nothing = "nothing to do: every control plane of prod runs the rendered configuration";
    let status = TalosOperationStatus {
        phase: Some(OperationPhase::Succeeded),
        message: Some(nothing.to_owned()),
        rendered_sha256: Some("0".repeat(64)),
        ..TalosOperationStatus::default()
    };
    site.write_status(&name, &status).await;
    let (exit, stdout, stderr) = following.finish().await;
    assert!(exit.success(), "{}", stderr.join("\n"));
    assert_eq!(
        stdout,
        format!("operation {NAMESPACE}/{name} succeeded: {nothing}\n")
    );
    assert_eq!(site.operations().await.len(), 1);
}
