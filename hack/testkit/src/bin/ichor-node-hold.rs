//! Starts a test kit node, runs one pod of the image archive given as its argument, prints
//! `ready <node directory> <namespace>` and holds the node until it is killed. The node test
//! kills it with SIGKILL, as a test killed before its drop ran, to check that
//! `hack/node/clean.sh` undoes everything the node changed on the machine.
//! Usage: ichor-node-hold IMAGE.tar
#![forbid(unsafe_code)]

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use ichor_testkit::node::{Node, NodeOptions};

const POD: &str = r#"apiVersion: v1
kind: Pod
metadata: {name: held, namespace: default}
spec:
  securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: web
    image: ichor.local/node-test-http:1
    imagePullPolicy: Never
    securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
"#;

fn main() -> anyhow::Result<()> {
    let image = PathBuf::from(
        std::env::args()
            .nth(1)
            .context("usage: ichor-node-hold IMAGE.tar")?,
    );
    let node = Node::start(NodeOptions {
        images: vec![image],
        ..NodeOptions::default()
    })?
    .context("the node's binaries are missing (hack/test.sh builds them)")?;
    node.control_plane().apply(POD)?;
    node.kubectl(&[
        "wait",
        "--for=condition=Ready",
        "pod/held",
        "-n",
        "default",
        "--timeout=120s",
    ])?;
    let mut out = std::io::stdout();
    writeln!(out, "ready {} {}", node.dir().display(), node.namespace())?;
    out.flush()?;
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}
