//! The test kit's fake apid against the real Talos client: `ichor-talos-probe` (hack/talos/probe,
//! on `github.com/siderolabs/talos/pkg/machinery`, the client library `talosctl` is built on)
//! and our [`TalosClient`] make the same calls to the same fake node and must get the same
//! answers — the Version tag, the machine configuration's bytes through COSI, an apply accepted
//! in `NO_REBOOT` with the same details and warnings — and the same refusals, code and message.
//!
//! The node runs a configuration made by machinery's own generator (`talosctl gen config` for
//! the v1.14 contract), so what the fake serves must also load with Talos's configuration loader
//! (the Go client decodes the `MachineConfig` resource with it), and the document applied is
//! merged into it as the controller merges it.

use std::path::{Path, PathBuf};
use std::process::Command;

use ichor_talos::{
    client::{TalosClient, TalosError},
    machine_config::{self, Merge},
    talosconfig,
};
use ichor_testkit::{
    consumers::require_talos_probe,
    talos::{DEFAULT_VERSION, FakeTalos, Mode, NodeOptions, Options, Rpc},
};
use serde_json::{Value, json};

use super::TIMEOUT;

const NODE: &str = "127.0.0.1";
/// A node without a configuration (maintenance mode).
const EMPTY: &str = "127.0.0.2";
/// A node the endpoint does not know.
const UNKNOWN: &str = "127.0.0.9";
const KIND: &str = "KubeAuthenticationConfig";
const DOCUMENT: &str = "apiVersion: v1alpha1\nkind: KubeAuthenticationConfig\nconfiguration:\n  apiVersion: \
                        apiserver.config.k8s.io/v1beta1\n  kind: AuthenticationConfiguration\n  jwt:\n  - issuer:\n      \
                        url: https://ichor.example.com\n      audiences:\n      - ichor-kube\n    claimMappings:\n      \
                        username:\n        claim: sub\n        prefix: 'ichor:'\n  anonymous:\n    enabled: true\n    \
                        conditions:\n    - path: /livez\n    - path: /readyz\n    - path: /healthz\n";

/// What the probe answered.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    /// Exit status 0: its stdout.
    Ok(Vec<u8>),
    /// Exit status 3: the node refused the call with this gRPC code and message.
    Refused(String, String),
}

/// `ichor-talos-probe`.
struct Probe(PathBuf);

impl Probe {
    fn call(&self, talosconfig: &Path, node: &str, args: &[&str]) -> Answer {
        let out = Command::new(&self.0)
            .arg("--talosconfig")
            .arg(talosconfig)
            .args(["--node", node])
            .args(args)
            .output()
            .expect("ichor-talos-probe runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(0) => Answer::Ok(out.stdout),
            Some(3) => {
                let error = &serde_json::from_slice::<Value>(&out.stdout).expect("a JSON refusal")["error"];
                Answer::Refused(
                    error["code"].as_str().expect("a code").to_owned(),
                    error["message"].as_str().expect("a message").to_owned(),
                )
            }
            _ => panic!("ichor-talos-probe {args:?} on {node} failed: {stderr}"),
        }
    }

    fn ok(&self, talosconfig: &Path, node: &str, args: &[&str]) -> Vec<u8> {
        match self.call(talosconfig, node, args) {
            Answer::Ok(stdout) => stdout,
            refused => panic!("ichor-talos-probe {args:?} on {node}: {refused:?}"),
        }
    }

    /// A fresh control-plane configuration from machinery's generator.
    fn generate(&self) -> String {
        let out = Command::new(&self.0)
            .args(["generate", "--type", "controlplane"])
            .output()
            .expect("ichor-talos-probe runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("UTF-8")
    }
}

fn json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(bytes)))
}

async fn client(talosconfig: &str) -> TalosClient {
    let context = talosconfig::parse(talosconfig, "talosconfig", None).unwrap();
    TalosClient::connect(&context, &context.endpoints[0], TIMEOUT, TIMEOUT)
        .await
        .unwrap()
}

/// Our client's refusal as the probe prints it: the gRPC code's name and the server's message.
fn refused(err: TalosError) -> Answer {
    match err {
        TalosError::Rpc { code, message, .. } => Answer::Refused(format!("{code:?}"), message),
        other => panic!("not a refusal by the node: {other}"),
    }
}

#[tokio::test]
#[ignore = "needs ichor-talos-probe: hack/talos/build.sh"]
async fn talosctls_client_and_ours_get_the_same_answers_from_the_fake_node() {
    let Some(probe) = require_talos_probe().map(Probe) else {
        return;
    };
    let generated = probe.generate();
    let talos = FakeTalos::start(Options {
        nodes: vec![NodeOptions::new(NODE).with_config(generated.clone())],
        ..Options::default()
    })
    .unwrap();
    let admin = talos.talosconfig_path();
    let mut ours = client(talos.talosconfig()).await;

    let version = json(&probe.ok(admin, NODE, &["version"]));
    assert_eq!(version["tag"], ours.version(NODE).await.unwrap());
    assert_eq!(version["tag"], DEFAULT_VERSION);
    assert_eq!(version["platform"], json!({"name": "metal", "mode": "metal"}));
    assert_eq!(version["features"], json!({"rbac": true}));
    assert_eq!(version["messages"], 1);

    let read = probe.ok(admin, NODE, &["machineconfig"]);
    assert_eq!(read, generated.as_bytes(), "the bytes as submitted");
    assert_eq!(ours.machine_config(NODE).await.unwrap(), read);

    let (merged, merge) =
        machine_config::replace_document("generated", &generated, KIND, DOCUMENT, false).unwrap();
    assert_eq!(
        merge,
        Merge::Replaced,
        "talosctl gen config writes a default {KIND}"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("merged.yaml");
    std::fs::write(&file, &merged).unwrap();
    let applied = json(&probe.ok(
        admin,
        NODE,
        &["apply", "--mode", "no-reboot", file.to_str().unwrap()],
    ));
    assert_eq!(applied["mode"], "NO_REBOOT");
    assert_eq!(applied["messages"], 1);
    assert_eq!(talos.config(NODE).unwrap(), merged.as_bytes());
    assert_eq!(probe.ok(admin, NODE, &["machineconfig"]), merged.as_bytes());
    assert_eq!(ours.machine_config(NODE).await.unwrap(), merged.as_bytes());

    let outcome = ours
        .apply_no_reboot(NODE, generated.clone().into_bytes())
        .await
        .unwrap();
    assert_eq!(applied["modeDetails"], outcome.details);
    assert_eq!(applied["warnings"], json!(outcome.warnings));
    assert_eq!(probe.ok(admin, NODE, &["machineconfig"]), generated.as_bytes());

    // What each client sent: one `node` value (the fake refuses the plural `nodes`), the mode,
    // the bytes, the admin certificate.
    let applies = talos.applies();
    assert_eq!(applies.len(), 2);
    for (call, data) in applies.iter().zip([&merged, &generated]) {
        assert_eq!(call.node, NODE);
        assert_eq!(call.mode, Some(Mode::NoReboot as i32));
        assert_eq!(call.organizations, ["os:admin"]);
        assert_eq!(call.data, data.as_bytes());
    }
    let rpcs: Vec<Rpc> = talos.calls().iter().map(|c| c.rpc).collect();
    assert_eq!(
        rpcs,
        [
            Rpc::Version,
            Rpc::Version,
            Rpc::GetMachineConfig,
            Rpc::GetMachineConfig,
            Rpc::ApplyConfiguration,
            Rpc::GetMachineConfig,
            Rpc::GetMachineConfig,
            Rpc::ApplyConfiguration,
            Rpc::GetMachineConfig,
        ]
    );
}

#[tokio::test]
#[ignore = "needs ichor-talos-probe: hack/talos/build.sh"]
async fn both_clients_meet_the_same_refusals_code_and_message() {
    let Some(probe) = require_talos_probe().map(Probe) else {
        return;
    };
    let generated = probe.generate();
    let talos = FakeTalos::start(Options {
        nodes: vec![
            NodeOptions::new(NODE).with_config(generated.clone()),
            NodeOptions::new(EMPTY),
        ],
        ..Options::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let admin = talos.talosconfig_path();
    let reader_text = talos.talosconfig_for_role("os:reader").unwrap();
    let reader = dir.path().join("reader-talosconfig");
    std::fs::write(&reader, &reader_text).unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, &generated).unwrap();
    let patch = dir.path().join("patch.yaml");
    std::fs::write(&patch, DOCUMENT).unwrap();
    // `config:` for `configuration:`: a document Talos's loader refuses, in a whole configuration.
    let misspelled = DOCUMENT.replace("\nconfiguration:", "\nconfig:");
    let (malformed, _) =
        machine_config::replace_document("generated", &generated, KIND, &misspelled, false).unwrap();
    let malformed_file = dir.path().join("malformed.yaml");
    std::fs::write(&malformed_file, &malformed).unwrap();
    let validated = Command::new(&probe.0)
        .arg("validate")
        .arg(&malformed_file)
        .output()
        .unwrap();
    assert!(
        !validated.status.success()
            && String::from_utf8_lossy(&validated.stderr).contains("unknown keys found during decoding"),
        "Talos's loader refuses it: {}",
        String::from_utf8_lossy(&validated.stderr)
    );
    let path = |p: &Path| p.to_str().unwrap().to_owned();
    let mut ours_admin = client(talos.talosconfig()).await;
    let mut ours_reader = client(&reader_text).await;

    // os:reader: Version is allowed, the machine configuration (a sensitive resource) and an
    // apply are not.
    assert_eq!(
        json(&probe.ok(&reader, NODE, &["version"]))["tag"],
        ours_reader.version(NODE).await.unwrap()
    );
    let cases = [
        (
            "os:reader applies",
            probe.call(&reader, NODE, &["apply", "--mode", "no-reboot", &path(&config)]),
            ours_reader
                .apply_no_reboot(NODE, generated.clone().into())
                .await
                .map(|_| ()),
            "PermissionDenied",
        ),
        (
            "os:reader reads the machine configuration",
            probe.call(&reader, NODE, &["machineconfig"]),
            ours_reader.machine_config(NODE).await.map(|_| ()),
            "PermissionDenied",
        ),
        (
            "a node without a configuration",
            probe.call(admin, EMPTY, &["machineconfig"]),
            ours_admin.machine_config(EMPTY).await.map(|_| ()),
            "NotFound",
        ),
        (
            "a patch instead of a configuration",
            probe.call(admin, NODE, &["apply", "--mode", "no-reboot", &path(&patch)]),
            ours_admin
                .apply_no_reboot(NODE, DOCUMENT.into())
                .await
                .map(|_| ()),
            "InvalidArgument",
        ),
        (
            "a KubeAuthenticationConfig Talos's loader refuses",
            probe.call(
                admin,
                NODE,
                &["apply", "--mode", "no-reboot", &path(&malformed_file)],
            ),
            ours_admin
                .apply_no_reboot(NODE, malformed.clone().into())
                .await
                .map(|_| ()),
            "InvalidArgument",
        ),
        (
            "a node the endpoint does not know",
            probe.call(admin, UNKNOWN, &["version"]),
            ours_admin.version(UNKNOWN).await.map(|_| ()),
            "Unavailable",
        ),
    ];
    for (case, go, ours, code) in cases {
        let ours = refused(ours.expect_err(case));
        assert_eq!(go, ours, "{case}: talosctl's client and ours");
        assert!(
            matches!(&go, Answer::Refused(c, _) if c == code),
            "{case}: {go:?}"
        );
    }
    assert_eq!(
        talos.config(NODE).unwrap(),
        generated.as_bytes(),
        "nothing applied"
    );
}
