//! The apiserver-restart rollout run by a real `ichor-controller` against a real control plane of
//! three kube-apiservers (127.0.0.1, .2 and .3 on one port, sharing one etcd), each the
//! kube-apiserver of one `TalosMachine`. Talos itself cannot run here: its machine API is the
//! test kit's fake apid, speaking the real protocol over mutual TLS, and each node's
//! `ApplyConfiguration` restarts that node's real kube-apiserver with the authentication file
//! rendered from the new `KubeAuthenticationConfig`, as Talos re-renders the static pod. So every
//! `/readyz` the controller waits for is a real apiserver going down and coming back — or, with a
//! document the renderer accepts but the apiserver refuses at start-up (an external issuer equal
//! to the service-account issuer the renderer cannot know), never coming back.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use base64::Engine as _;
use ichor_controller_core::sim::fixtures::{Auth, cluster, control_plane};
use ichor_testkit::control_plane::{ControlPlane, Kubectl, Options, SERVICE_ACCOUNT_ISSUER};
use ichor_testkit::install::{self, CONTROLLER_SERVICE_ACCOUNT, NAMESPACE};
use ichor_testkit::talos::{FakeTalos, Mode, NodeOptions, Options as TalosOptions, restart_apiserver_hook};
use ichor_testkit::wait;
use serde_json::{Value, json};

use crate::replicas::Replica;

/// The three control planes: machine name, address (its apiserver's), apiserver index.
const NODES: [(&str, &str); 3] = [
    ("cp-1", "127.0.0.1"),
    ("cp-2", "127.0.0.2"),
    ("cp-3", "127.0.0.3"),
];
/// How long a hook waits for its apiserver to be ready again.
const RESTART_TIMEOUT: Duration = Duration::from_secs(30);
/// The controller's step timeout (after which a node is rolled back).
const STEP_TIMEOUT: &str = "45s";
/// The bound of a whole operation.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(300);
/// A machine configuration as Talos generates it under the v1.14 contract: the main document
/// and the default `KubeAuthenticationConfig` (no `jwt`, anonymous health checks).
const INITIAL_CONFIG: &str = "version: v1alpha1\nmachine:\n  type: controlplane\ncluster:\n  clusterName: prod\n---\n\
apiVersion: v1alpha1\nkind: KubeAuthenticationConfig\nconfiguration:\n  apiVersion: apiserver.config.k8s.io/v1beta1\n  \
kind: AuthenticationConfiguration\n  jwt: []\n---\napiVersion: v1alpha1\nkind: HostnameConfig\nhostname: keep-me\n";

fn lock(plane: &Mutex<ControlPlane>) -> MutexGuard<'_, ControlPlane> {
    plane.lock().unwrap_or_else(PoisonError::into_inner)
}

fn manifest(value: Value) -> String {
    serde_json::to_string(&value).unwrap_or_default()
}

/// Reads objects from apiserver 2 (never broken in this test) with the admin's kubectl, without
/// holding the control plane: the restart hooks need it while the test polls.
struct Reader(Kubectl);

impl Reader {
    fn new(plane: &ControlPlane) -> Self {
        Reader(Kubectl::new(plane.kubectl_bin(), plane.admin_kubeconfig()).with_server(plane.url(2)))
    }

    fn get(&self, kind: &str, name: &str) -> anyhow::Result<Option<Value>> {
        self.0.get(kind, NAMESPACE, name)
    }
}

/// The labels of an operation this subsystem drives (as `ichor config apply` creates it).
fn identity_labels() -> Value {
    json!({"app.kubernetes.io/managed-by": "ichor-identity"})
}

fn create_operation(plane: &Mutex<ControlPlane>, name: &str) -> anyhow::Result<()> {
    lock(plane).apply(&manifest(json!({
        "apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "TalosOperation",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": identity_labels()},
        "spec": {"cluster": "prod", "kind": "config"}})))?;
    Ok(())
}

/// Waits until the operation ends; its final object.
fn wait_end(reader: &Reader, name: &str, replica: &Replica) -> anyhow::Result<Value> {
    wait::until(&format!("operation {name} to end"), OPERATION_TIMEOUT, || {
        Ok(reader
            .get("talosoperation", name)
            .ok()
            .flatten()
            .filter(|op| matches!(op["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))))
    })
    .map_err(|e| e.context(replica.log_tail()))
}

fn applied_hash(reader: &Reader, machine: &str) -> anyhow::Result<Option<String>> {
    Ok(reader.get("talosmachine", machine)?.and_then(|m| {
        m["status"]["appliedDocumentHashes"]["KubeAuthenticationConfig"]
            .as_str()
            .map(str::to_owned)
    }))
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn the_controller_restarts_each_control_plane_in_turn_and_rolls_back_a_document_that_breaks_its_apiserver()
-> anyhow::Result<()> {
    let options = Options {
        apiservers: 3,
        distinct_loopback_addresses: true,
        audit: true,
        extra_args: vec!["--enable-aggregator-routing=true".to_owned()],
        ..Options::default()
    };
    let Some(started) = ControlPlane::start(options)? else {
        return Ok(());
    };
    let reader = Reader::new(&started);
    let plane = Arc::new(Mutex::new(started));
    let dir = tempfile::tempdir()?;

    // Talos: one apid routing to three nodes, each apply restarting that node's apiserver.
    let talos = FakeTalos::start(TalosOptions {
        nodes: NODES
            .iter()
            .map(|(_, a)| NodeOptions::new(a).with_config(INITIAL_CONFIG))
            .collect(),
        ..TalosOptions::default()
    })?;
    for (i, (_, address)) in NODES.iter().enumerate() {
        talos.on_apply_blocking(
            address,
            restart_apiserver_hook(Arc::clone(&plane), i, RESTART_TIMEOUT),
        );
    }

    // Ichor installed, a cluster whose render the apiserver refuses (its external issuer is the
    // service-account issuer), its machines, and the cluster's Talos credentials.
    let kubeconfig = {
        let p = lock(&plane);
        install::install_crds(&p)?;
        let mut prod = cluster("prod", 1, Auth::Ichor).value;
        prod["spec"]["authentication"]["external"] =
            json!([{"issuerURL": SERVICE_ACCOUNT_ISSUER, "audiences": ["kubernetes"]}]);
        p.apply(&manifest(prod))?;
        for (name, address) in NODES {
            p.apply(&manifest(control_plane(name, "prod", address, &[]).value))?;
        }
        install::install_chart(&p)?;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        p.apply(&manifest(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "prod-talosconfig", "namespace": NAMESPACE},
            "data": {"talosconfig": b64(talos.talosconfig()), "ca.crt": b64(p.ca_pem())}})))?;
        // The controller speaks to apiserver 2 (cp-3), which the failed rollout never touches.
        install::component_kubeconfig(&p, 2, CONTROLLER_SERVICE_ACCOUNT)?
    };
    let port = lock(&plane).port(0).to_string();
    let env = [
        ("ICHOR_CONTROLLER_ROLLOUT", "true"),
        ("ICHOR_CONTROLLER_ROLLOUT_STEP_TIMEOUT", STEP_TIMEOUT),
        ("ICHOR_CONTROLLER_ROLLOUT_RESTART_GRACE", "40s"),
        ("ICHOR_CONTROLLER_APISERVER_PORT", port.as_str()),
    ];
    let mut replica = Replica::start_with(dir.path(), "ichor-controller-a", &kubeconfig, &env)?;
    {
        let p = lock(&plane);
        wait::until("the trust ConfigMap", Duration::from_secs(60), || {
            p.get_json(2, "configmap", NAMESPACE, "ichor-oidc-trust")
        })
        .map_err(|e| e.context(replica.log_tail()))?;
        crate::webhooks::serve_from(&p, &replica)?;
        // The webhook answers once the replica has loaded the pair and the Service reaches it.
        wait::until(
            "the webhook reached through its Service",
            Duration::from_secs(60),
            || {
                let probe = manifest(cluster("probe", 3, Auth::Ichor).value);
                match p.kubectl_run(&["apply", "--dry-run=server", "-f", "-"], Some(&probe)) {
                    Ok(_) => Ok(Some(())),
                    Err(e) if e.to_string().contains("failed calling webhook") => Ok(None),
                    Err(e) => Err(e),
                }
            },
        )
        .map_err(|e| e.context(replica.log_tail()))?;
    }

    // 0. A cluster whose credentials the chart does not grant: its operation fails at once,
    // saying which value grants them, and no node is called.
    {
        let p = lock(&plane);
        p.apply(&manifest(cluster("other", 2, Auth::Ichor).value))?;
        p.apply(&manifest(
            control_plane("other-cp", "other", "127.0.0.9", &[]).value,
        ))?;
        p.apply(&manifest(json!({
            "apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "TalosOperation",
            "metadata": {"name": "config-other-1", "namespace": NAMESPACE, "labels": identity_labels()},
            "spec": {"cluster": "other", "kind": "config"}})))?;
        // A `config` operation of Ichor core (no identity label) on the cluster rolled below:
        // never written, never driven.
        p.apply(&manifest(json!({
            "apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "TalosOperation",
            "metadata": {"name": "config-core-1", "namespace": NAMESPACE},
            "spec": {"cluster": "prod", "kind": "config"}})))?;
    }
    let refused = wait_end(&reader, "config-other-1", &replica)?;
    assert_eq!(refused["status"]["phase"], "Failed", "{:#}", refused["status"]);
    let message = refused["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("add other to the chart's controller.rollout.clusters"),
        "{message}"
    );
    assert!(talos.calls().is_empty(), "no Talos call without credentials");

    // 1. The broken document: cp-1 never comes back, is rolled back, and nothing else is touched.
    create_operation(&plane, "config-prod-1")?;
    let failed = wait_end(&reader, "config-prod-1", &replica)?;
    replica.check_running()?;
    eprintln!("failed operation: {:#}", failed["status"]);
    assert_eq!(failed["status"]["phase"], "Failed");
    let nodes = failed["status"]["nodes"].as_array().cloned().unwrap_or_default();
    assert_eq!(nodes.len(), 3, "every control plane was planned");
    assert_eq!(nodes[0]["state"], "RolledBack", "{nodes:#?}");
    assert_eq!(nodes[1]["state"], "Pending");
    assert_eq!(nodes[2]["state"], "Pending");
    let message = failed["status"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("did not come back within 45s"), "{message}");
    assert!(
        message.contains("re-applied and the API server is ready again"),
        "{message}"
    );
    assert!(message.contains("not touched: cp-2, cp-3"), "{message}");
    let applies = talos.applies();
    let targets: Vec<&str> = applies.iter().map(|c| c.node.as_str()).collect();
    assert_eq!(
        targets,
        ["127.0.0.1", "127.0.0.1"],
        "the apply, then the rollback; no other node"
    );
    assert!(applies[0].data_text().contains(SERVICE_ACCOUNT_ISSUER));
    assert!(
        !applies[1].data_text().contains(SERVICE_ACCOUNT_ISSUER),
        "the previous document is back"
    );
    assert!(
        applies[1].data_text().contains("keep-me"),
        "the node's other documents are kept"
    );
    assert_eq!(
        lock(&plane).readyz(0)?.status,
        200,
        "cp-1's apiserver serves again"
    );
    assert_eq!(
        applied_hash(&reader, "cp-1")?,
        nodes[0]["previousDocument"]["sha256"].as_str().map(str::to_owned),
        "cp-1 reports the document it runs again"
    );

    // 2. The cluster fixed: a new operation restarts each apiserver in turn.
    lock(&plane).kubectl_run(
        &[
            "patch",
            "taloscluster",
            "prod",
            "-n",
            NAMESPACE,
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/spec/authentication/external"}]"#,
        ],
        None,
    )?;
    let started_at = Instant::now();
    create_operation(&plane, "config-prod-2")?;
    // The controller is killed once the first node is done: a new one resumes from the
    // operation's status (a new leader once the dead one's Lease expires).
    wait::until("cp-1 done", OPERATION_TIMEOUT, || {
        Ok(reader
            .get("talosoperation", "config-prod-2")
            .ok()
            .flatten()
            .filter(|op| op["status"]["nodes"][0]["state"] == "Done"))
    })
    .map_err(|e| e.context(replica.log_tail()))?;
    replica.kill();
    let replica = Replica::start_with(dir.path(), "ichor-controller-b", &kubeconfig, &env)?;
    let done = wait_end(&reader, "config-prod-2", &replica)?;
    let took = started_at.elapsed();
    eprintln!("succeeded operation in {took:?}: {:#}", done["status"]);
    assert_eq!(done["status"]["phase"], "Succeeded", "{:#}", done["status"]);
    let sha = done["status"]["renderedSha256"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let nodes = done["status"]["nodes"].as_array().cloned().unwrap_or_default();
    for (node, (name, _)) in nodes.iter().zip(NODES) {
        assert_eq!(node["machine"], name, "in name order");
        assert_eq!(node["state"], "Done");
        // Two nodes' restarts can pass unseen, and the controller then says so. cp-2 is the node
        // in flight when the controller is killed: when the first replica had applied it
        // already, its restart happens while no replica probes. cp-3's apiserver is the one the
        // controller speaks to: when its restart cuts the write that records the apply, the
        // retry finds the node already running the document and records the apply only after
        // the restart is over. Either way the next probes find it ready through the whole grace
        // (the controller cannot tell the restart from none); the restart itself is proven
        // below by the node's hook run.
        let unseen = matches!(name, "cp-2" | "cp-3")
            && node["message"]
                .as_str()
                .is_some_and(|m| m.contains("no restart was seen"));
        assert!(
            node["sawNotReady"] == true || unseen,
            "a real restart was seen going down: {node:#}"
        );
        let (Some(a), Some(b)) = (node["startedAt"].as_str(), node["finishedAt"].as_str()) else {
            anyhow::bail!("{name}: no times: {node:#}");
        };
        let (a, b): (jiff::Timestamp, jiff::Timestamp) = (a.parse()?, b.parse()?);
        eprintln!(
            "{name}: {:.1}s from its apply to its /readyz back",
            (b - a).total(jiff::Unit::Second)?
        );
        assert_eq!(applied_hash(&reader, name)?.as_deref(), Some(sha.as_str()));
    }
    // One control plane at a time: each apply comes after the previous node's apiserver was
    // ready again (its restart hook finished).
    // (A replica killed between recording a node `Applying` and its apply makes the next one
    // apply that node again: the same configuration, harmless.)
    let mut applies: Vec<_> = talos.applies().into_iter().skip(2).collect();
    applies.dedup_by(|b, a| a.node == b.node);
    let targets: Vec<&str> = applies.iter().map(|c| c.node.as_str()).collect();
    assert_eq!(targets, ["127.0.0.1", "127.0.0.2", "127.0.0.3"]);
    assert!(
        applies.iter().all(|c| c.mode == Some(Mode::NoReboot as i32)),
        "never a reboot"
    );
    assert!(applies.iter().all(|c| c.organizations == ["os:admin"]));
    let runs = talos.wait_for_hooks(2 + applies.len(), RESTART_TIMEOUT);
    // Every node's apiserver really restarted with the new file and came back.
    for (_, address) in NODES {
        assert!(
            runs.iter().any(|r| r.node == address && r.result.is_ok()),
            "{address}: no successful restart: {runs:#?}"
        );
    }
    for pair in applies.windows(2) {
        let previous = runs
            .iter()
            .filter(|r| r.node == pair[0].node)
            .map(|r| r.finished_at)
            .max()
            .ok_or_else(|| anyhow::anyhow!("no restart of {}", pair[0].node))?;
        // The hook notices readiness by polling every 100 ms, so it may record its end a moment
        // after the controller's own probe saw it.
        assert!(
            pair[1].at + Duration::from_secs(1) > previous,
            "{} was applied before {} was ready again",
            pair[1].node,
            pair[0].node
        );
    }
    // And by the controller's own record: each node started after the previous one was done.
    for pair in nodes.windows(2) {
        let started: jiff::Timestamp = pair[1]["startedAt"].as_str().unwrap_or_default().parse()?;
        let finished: jiff::Timestamp = pair[0]["finishedAt"].as_str().unwrap_or_default().parse()?;
        assert!(
            started >= finished,
            "{} started before {} was done",
            pair[1]["machine"],
            pair[0]["machine"]
        );
    }
    // The machines are Ready again, and the apiservers all serve.
    for (name, _) in NODES {
        let machine = wait::until(&format!("{name} Ready"), Duration::from_secs(60), || {
            Ok(reader
                .get("talosmachine", name)?
                .filter(|m| crate::replicas::condition(m, "Ready").as_deref() == Some("True")))
        })?;
        assert_ne!(
            machine["status"]["conditions"][0]["reason"], "APIServerRestartRequired",
            "{machine:#}"
        );
    }
    for i in 0..3 {
        assert_eq!(lock(&plane).readyz(i)?.status, 200, "apiserver {i} serves");
    }

    // Nothing else the chart does not grant was asked, and the rollout used its grants.
    let usage = install::chart_rbac_usage(&lock(&plane), CONTROLLER_SERVICE_ACCOUNT)?;
    // The one refusal is the cluster the chart does not list (step 0): the apiserver refused it.
    assert_eq!(
        usage.forbidden,
        ["get secrets ichor-system/other-talosconfig: "],
        "only the unlisted cluster's credentials were refused"
    );
    assert!(
        usage.outside.is_empty(),
        "allowed by no chart rule: {:#?}",
        usage.outside
    );
    // The credentials and the status writes; the re-read of an operation is for conflicts only.
    for (rule, _) in [
        crate::controller::ROLLOUT_RULES[0],
        crate::controller::ROLLOUT_RULES[2],
    ] {
        assert!(
            !usage.unused.iter().any(|u| u == rule),
            "{rule} unused: {:#?}",
            usage.unused
        );
    }
    // Ichor core's operation, there through both rollouts, was left alone.
    let core = reader
        .get("talosoperation", "config-core-1")?
        .ok_or_else(|| anyhow::anyhow!("config-core-1 is gone"))?;
    assert!(core.get("status").is_none_or(Value::is_null), "{core:#}");
    let mut replica = replica;
    replica.check_running()?;
    Ok(())
}
