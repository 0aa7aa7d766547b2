//! The client against the test kit's fake Talos API over real gRPC and mutual TLS: `Version`,
//! reading a node's machine configuration through COSI `State.Get`, an apply that replaces it and
//! runs the node's hook, the role check, an injected failure, and the record of every call; and
//! ([`real_client`]) the fake and our client against talosctl's own client library.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod attacks;
mod real_client;

use std::time::Duration;

use ichor_talos::{
    client::{TalosClient, TalosError},
    talosconfig,
};
use ichor_testkit::talos::{Code, FakeTalos, Mode, NodeOptions, Options, Rpc};

const BEFORE: &str = "# as written\nversion: v1alpha1\nmachine:\n  type: controlplane\n";
const AFTER: &str = "version: v1alpha1\nmachine:\n  type: controlplane\n---\napiVersion: v1alpha1\nkind: KubeAuthenticationConfig\nconfiguration:\n  jwt: []\n";
const TIMEOUT: Duration = Duration::from_secs(10);

async fn client(talosconfig: &str) -> TalosClient {
    let context = talosconfig::parse(talosconfig, "talosconfig", None).unwrap();
    TalosClient::connect(&context, &context.endpoints[0], TIMEOUT, TIMEOUT)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_machine_configuration_is_read_replaced_by_an_apply_and_the_hook_sees_it() {
    let talos = FakeTalos::start(Options {
        nodes: vec![
            NodeOptions::new("127.0.0.1").with_config(BEFORE),
            NodeOptions::new("127.0.0.2"),
        ],
        ..Options::default()
    })
    .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    talos.on_apply("127.0.0.1", move |applied| {
        let tx = tx.clone();
        async move { tx.send(applied).map_err(|e| e.to_string()) }
    });
    let mut c = client(talos.talosconfig()).await;

    assert_eq!(c.version("127.0.0.1").await.unwrap(), "v1.14.3");
    assert_eq!(c.machine_config("127.0.0.1").await.unwrap(), BEFORE.as_bytes());

    let err = c.machine_config("127.0.0.2").await.unwrap_err();
    assert!(
        matches!(
            err,
            TalosError::Rpc {
                code: Code::NotFound,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("maintenance mode"), "{err}");

    let outcome = c
        .apply_no_reboot("127.0.0.1", AFTER.as_bytes().to_vec())
        .await
        .unwrap();
    assert_eq!(outcome.details, "Applied configuration without a reboot");
    assert_eq!(c.machine_config("127.0.0.1").await.unwrap(), AFTER.as_bytes());
    let applied = tokio::time::timeout(TIMEOUT, rx.recv()).await.unwrap().unwrap();
    assert_eq!(
        (applied.node.as_str(), applied.config.as_slice()),
        ("127.0.0.1", AFTER.as_bytes())
    );

    let calls = talos.calls();
    let seen: Vec<(&str, Rpc)> = calls.iter().map(|c| (c.node.as_str(), c.rpc)).collect();
    assert_eq!(
        seen,
        [
            ("127.0.0.1", Rpc::Version),
            ("127.0.0.1", Rpc::GetMachineConfig),
            ("127.0.0.2", Rpc::GetMachineConfig),
            ("127.0.0.1", Rpc::ApplyConfiguration),
            ("127.0.0.1", Rpc::GetMachineConfig),
        ]
    );
    assert_eq!(calls[3].mode, Some(Mode::NoReboot as i32));
    assert_eq!(calls[3].organizations, ["os:admin"]);
    assert_eq!(talos.config("127.0.0.1").unwrap(), AFTER.as_bytes());
}

#[tokio::test]
async fn refusals_the_role_a_patch_an_unknown_node_and_injected_failures() {
    let talos = FakeTalos::with_nodes(&["127.0.0.1"], Some(BEFORE)).unwrap();
    let mut admin = client(talos.talosconfig()).await;

    let patch = b"apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: x\n".to_vec();
    let err = admin.apply_no_reboot("127.0.0.1", patch).await.unwrap_err();
    assert!(
        matches!(
            err,
            TalosError::Rpc {
                code: Code::InvalidArgument,
                ..
            }
        ),
        "{err}"
    );

    let err = admin.version("127.0.0.9").await.unwrap_err();
    assert!(
        matches!(
            err,
            TalosError::Rpc {
                code: Code::Unavailable,
                ..
            }
        ),
        "{err}"
    );

    talos.fail(
        "127.0.0.1",
        Rpc::ApplyConfiguration,
        Code::FailedPrecondition,
        "busy",
        Some(1),
    );
    let err = admin
        .apply_no_reboot("127.0.0.1", AFTER.into())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("FailedPrecondition: busy"), "{err}");
    admin.apply_no_reboot("127.0.0.1", AFTER.into()).await.unwrap();

    talos.fail("127.0.0.1", Rpc::GetMachineConfig, Code::Internal, "broken", None);
    assert!(admin.machine_config("127.0.0.1").await.is_err());
    assert!(admin.machine_config("127.0.0.1").await.is_err(), "until cleared");
    talos.clear_failures();
    assert_eq!(admin.machine_config("127.0.0.1").await.unwrap(), AFTER.as_bytes());

    let mut reader = client(&talos.talosconfig_for_role("os:reader").unwrap()).await;
    let err = reader
        .apply_no_reboot("127.0.0.1", BEFORE.into())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("PermissionDenied: not authorized"),
        "{err}"
    );
    let err = reader.machine_config("127.0.0.1").await.unwrap_err();
    assert!(
        err.to_string().contains("PermissionDenied: not authorized")
            && err
                .to_string()
                .contains("needs a talosconfig whose certificate has the role os:admin"),
        "the machine configuration is a sensitive resource: {err}"
    );
    let last = talos.applies().pop().unwrap();
    assert_eq!(last.organizations, ["os:reader"]);
    assert_eq!(last.data_text(), BEFORE);
    assert_eq!(
        talos.config("127.0.0.1").unwrap(),
        AFTER.as_bytes(),
        "a refused apply changes nothing"
    );
}
