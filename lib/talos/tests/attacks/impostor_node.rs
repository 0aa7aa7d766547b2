//! An operator (or anyone who can write a `TalosMachine`) points `spec.address` — or a
//! talosconfig endpoint — at a machine of their own, hoping the controller or `ichor config
//! apply` sends it the cluster's machine configuration (its secrets) or takes its answers for
//! the node's. The impostor runs a Talos API whose certificate is not signed by the cluster's
//! Talos CA. The client must refuse it during the TLS handshake, before any call, by its own
//! check of the server certificate against the talosconfig's CA — not because the impostor
//! refused the client.

use std::time::Duration;

use ichor_talos::client::{TalosClient, TalosError};
use ichor_talos::talosconfig::{self, Endpoint};
use ichor_testkit::talos::FakeTalos;

const TIMEOUT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_node_whose_certificate_is_not_signed_by_the_talosconfigs_ca_is_refused_before_any_call() {
    let cluster = FakeTalos::with_nodes(&["127.0.0.1"], Some("version: v1alpha1\n")).unwrap();
    let impostor = FakeTalos::with_nodes(&["127.0.0.1"], Some("version: v1alpha1\n")).unwrap();
    let context = talosconfig::parse(cluster.talosconfig(), "talosconfig", None).unwrap();

    // The cluster's own node: the same talosconfig connects and answers.
    let mut genuine = TalosClient::connect(&context, &context.endpoints[0], TIMEOUT, TIMEOUT)
        .await
        .unwrap();
    assert_eq!(genuine.version("127.0.0.1").await.unwrap(), "v1.14.3");

    // The impostor's address, as a TalosMachine's spec.address (or an endpoint) would name it.
    let at_impostor = Endpoint {
        host: "127.0.0.1".to_owned(),
        port: impostor.endpoint().port(),
    };
    let err = TalosClient::connect(&context, &at_impostor, TIMEOUT, TIMEOUT)
        .await
        .expect_err("the impostor's certificate was accepted");
    let TalosError::Connect { reason, .. } = &err else {
        panic!("not a connection refusal: {err}")
    };
    // The client's own verdict on the server certificate. Every Talos CA is named `O=talos`, so
    // rustls finds the talosconfig's CA by name and the impostor's signature does not verify.
    assert!(
        reason.contains("invalid peer certificate")
            && (reason.contains("BadSignature") || reason.contains("UnknownIssuer")),
        "{reason}"
    );
    assert!(impostor.calls().is_empty(), "the impostor received a call");
}
