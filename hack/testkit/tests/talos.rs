//! The fake Talos API's on-apply hook against a real control plane: an apply to the node at
//! 127.0.0.2 restarts the kube-apiserver on that address (and only that one) with the
//! authentication file Talos renders from the applied `KubeAuthenticationConfig`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ichor_talos::{client::TalosClient, talosconfig};
use ichor_testkit::control_plane::{ControlPlane, Options};
use ichor_testkit::talos::{FakeTalos, authentication_config_file, restart_apiserver_hook};

const MAIN: &str = "version: v1alpha1\nmachine:\n  type: controlplane\n";
const AUTH: &str = "apiVersion: v1alpha1\nkind: KubeAuthenticationConfig\nconfiguration:\n  jwt: []\n  \
                    anonymous:\n    enabled: true\n    conditions:\n    - path: /readyz\n    - path: /livez\n";

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn an_apply_restarts_the_apiserver_of_that_node_with_the_applied_authentication_file() {
    let Some(plane) = ControlPlane::start(Options {
        apiservers: 2,
        distinct_loopback_addresses: true,
        ..Options::default()
    })
    .unwrap() else {
        return;
    };
    let pids = [plane.pid(0), plane.pid(1)];
    let plane = Arc::new(Mutex::new(plane));
    let talos = FakeTalos::with_nodes(&["127.0.0.1", "127.0.0.2"], Some(MAIN)).unwrap();
    for (i, node) in ["127.0.0.1", "127.0.0.2"].iter().enumerate() {
        talos.on_apply_blocking(
            node,
            restart_apiserver_hook(plane.clone(), i, Duration::from_secs(120)),
        );
    }

    let config = format!("{MAIN}---\n{AUTH}");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let context = talosconfig::parse(talos.talosconfig(), "talosconfig", None).unwrap();
        let timeout = Duration::from_secs(10);
        let mut client = TalosClient::connect(&context, &context.endpoints[0], timeout, timeout)
            .await
            .unwrap();
        client
            .apply_no_reboot("127.0.0.2", config.clone().into_bytes())
            .await
            .unwrap();
    });

    let runs = talos.wait_for_hooks(1, Duration::from_secs(180));
    assert_eq!(runs.len(), 1, "the hook finished");
    assert_eq!(runs[0].node, "127.0.0.2");
    assert_eq!(runs[0].result, Ok(()));
    let plane = plane.lock().unwrap();
    assert_eq!(plane.pid(0), pids[0], "the other apiserver was not restarted");
    assert_ne!(plane.pid(1), pids[1], "the node's apiserver was restarted");
    let written = std::fs::read_to_string(plane.authentication_config_file(1)).unwrap();
    assert_eq!(
        Some(written.as_str()),
        authentication_config_file(config.as_bytes()).unwrap().as_deref()
    );
    assert!(written.contains("kind: AuthenticationConfiguration"), "{written}");
    assert_eq!(
        plane.readyz(1).unwrap().status,
        200,
        "back and ready on 127.0.0.2"
    );
}
