//! A talosconfig Secret that holds other clusters' contexts too: the command an operator pastes
//! most easily (`kubectl create secret --from-file=talosconfig=~/.talos/config`) stores every
//! cluster's `os:admin` keys in this cluster, where whoever reads the Secret (or a compromised
//! controller) would hold all of them. The controller refuses such a Secret at the first step:
//! the operation fails naming the Secret and the command that stores one context, and no Talos
//! call is made with it.

use serde_json::{Value, json};

use crate::apply::rollout::{
    OPERATION, apply_effect, expect_credentials_read, expect_status_patch, operation, talos, written,
};
use crate::apply::{NS, apply_scripted, client};

/// The fake apid's talosconfig with a second context (another cluster's keys) beside its own.
fn with_another_clusters_context(talosconfig: &str) -> String {
    let mut config: serde_yaml::Value = serde_yaml::from_str(talosconfig).unwrap();
    let contexts = config["contexts"].as_mapping_mut().unwrap();
    let own = contexts.values().next().unwrap().clone();
    contexts.insert("staging".into(), own);
    serde_yaml::to_string(&config).unwrap()
}

#[tokio::test]
async fn a_talosconfig_holding_other_clusters_keys_is_refused_before_any_talos_call() {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let talos = talos();
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "prod-talosconfig", "namespace": NS, "resourceVersion": "7"},
        "data": {"talosconfig": b64(&with_another_clusters_context(talos.talosconfig())),
            "ca.crt": b64(&ichor_controller_core::sim::fixtures::ca().unwrap().cert_pem)}});
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        expect_credentials_read(&mut handle, &secret).await;
        let (failed, send) = expect_status_patch(&mut handle, "talosoperations", OPERATION).await;
        let node: Value = failed.body["status"]["nodes"][0].clone();
        assert_eq!(node["state"], "Failed", "{node:#}");
        let message = node["message"].as_str().unwrap_or_default().to_owned();
        assert!(
            message.contains("Secret ichor-system/prod-talosconfig")
                && message.contains("2 talosconfig contexts")
                && message.contains("ichor init --cluster prod --talosconfig FILE --kube-ca FILE"),
            "{message}"
        );
        reply_written(send, &failed.body);
        handle
    });
    let w = crate::apply::world(vec![operation("1", json!({"state": "Pending"}))]);
    let report = apply_scripted(client, server, &w, &[apply_effect(None, "1")]).await;
    assert!(
        report.problems.is_empty(),
        "the refusal is recorded, not retried: {report:?}"
    );
    assert_eq!(report.applied.len(), 1, "{report:?}");
    assert!(
        talos.calls().is_empty(),
        "no Talos call with a Secret that holds other clusters' keys: {:?}",
        talos.calls()
    );
}

fn reply_written(send: crate::apply::Reply, body: &Value) {
    crate::apply::reply(send, 200, &written(body, "2"));
}
