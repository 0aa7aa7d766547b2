//! Rollout effects whose status write is lost after the node took the call: on a self-hosted
//! control plane `ApplyConfiguration` restarts the very API server the controller writes the
//! step's status to, so the write after it can fail. The retry must record the step, not send
//! the call again (a second apiserver restart). The node is the test kit's apid; the API server
//! is scripted, because a write lost at that exact moment is a fault a real one cannot be made
//! to produce on demand.

use ichor_controller_core::identity::rollout::{ApplyRequest, RollbackRequest};
use ichor_renderers::authn::talos::KubeAuthenticationConfig;
use ichor_renderers::crd::PreviousDocument;
use ichor_testkit::talos::{FakeTalos, NodeOptions, Options as TalosOptions};

use super::*;

pub(crate) const OPERATION: &str = "config-prod-1";
pub(crate) const MACHINE: &str = "prod-cp-1";
const ADDRESS: &str = "127.0.0.1";
/// The machine configuration before the step: Talos's default document (no `jwt`).
const BEFORE: &str = "version: v1alpha1\nmachine:\n  type: controlplane\n---\napiVersion: v1alpha1\n\
kind: KubeAuthenticationConfig\nconfiguration:\n  apiVersion: apiserver.config.k8s.io/v1beta1\n  \
kind: AuthenticationConfiguration\n  jwt: []\n";
/// The document the step rolls (its canonical form differs from the one in [`BEFORE`]).
const RENDERED: &str = "apiVersion: v1alpha1\nkind: KubeAuthenticationConfig\nconfiguration:\n  \
apiVersion: apiserver.config.k8s.io/v1beta1\n  kind: AuthenticationConfiguration\n  jwt: []\n  \
anonymous:\n    enabled: true\n";

fn rendered() -> (String, String) {
    let doc: KubeAuthenticationConfig = serde_yaml::from_str(RENDERED).unwrap();
    (doc.to_yaml().unwrap(), doc.sha256_hex().unwrap())
}

pub(crate) fn talos() -> FakeTalos {
    FakeTalos::start(TalosOptions {
        nodes: vec![NodeOptions::new(ADDRESS).with_config(BEFORE)],
        ..TalosOptions::default()
    })
    .unwrap()
}

fn credentials(talos: &FakeTalos) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "prod-talosconfig", "namespace": NS, "resourceVersion": "7"},
        "data": {"talosconfig": STANDARD.encode(talos.talosconfig()),
            "ca.crt": STANDARD.encode(ca().cert_pem)}})
}

/// The operation at resourceVersion `rv` with its one node as `node`.
pub(crate) fn operation(rv: &str, node: Value) -> Object {
    let mut node = node;
    node["machine"] = json!(MACHINE);
    node["address"] = json!(ADDRESS);
    observed(
        "TalosOperation",
        OPERATION,
        rv,
        json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "TalosOperation",
            "metadata": {"name": OPERATION, "namespace": NS, "resourceVersion": rv},
            "spec": {"cluster": "prod", "kind": "config"},
            "status": {"phase": "Running", "currentStep": 0, "nodes": [node]}}),
    )
}

pub(crate) fn apply_effect(previous: Option<PreviousDocument>, rv: &str) -> Action {
    let (document, sha256) = rendered();
    let r = ApplyRequest {
        namespace: NS.into(),
        operation: OPERATION.into(),
        cluster: "prod".into(),
        step: 0,
        machine: MACHINE.into(),
        address: ADDRESS.into(),
        document,
        sha256,
        adopting: false,
        previous,
        based_on_resource_version: Some(rv.into()),
    };
    Action::Effect {
        request: EffectRequest::new(r.id(), &r).unwrap(),
        reason: reason(),
    }
}

/// The object the API server answers a status patch with: the body at resourceVersion `rv`.
pub(crate) fn written(body: &Value, rv: &str) -> Value {
    let mut o = body.clone();
    o["metadata"]["resourceVersion"] = json!(rv);
    o
}

pub(crate) async fn expect_credentials_read(handle: &mut Mock, talos_secret: &Value) {
    let (seen, send) = next(handle).await;
    assert_eq!(
        (seen.method.as_str(), seen.path.as_str()),
        ("GET", "/api/v1/namespaces/ichor-system/secrets/prod-talosconfig")
    );
    reply(send, 200, talos_secret);
}

pub(crate) async fn expect_status_patch(handle: &mut Mock, plural: &str, name: &str) -> (Seen, Reply) {
    let (seen, send) = next(handle).await;
    assert_eq!(seen.method, "PATCH", "{seen:?}");
    assert_eq!(
        seen.path,
        format!("/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/{plural}/{name}/status")
    );
    (seen, send)
}

#[tokio::test]
async fn an_apply_the_node_took_before_its_status_write_was_lost_is_not_sent_again() {
    let talos = talos();
    let secret = credentials(&talos);
    let (_, sha) = rendered();

    // The first attempt: Applying recorded, the node takes the document, its hash is written,
    // then the API server goes away before the WaitingReady write.
    let (kube, mut handle) = client();
    let secret1 = secret.clone();
    let server = tokio::spawn(async move {
        expect_credentials_read(&mut handle, &secret1).await;
        let (applying, send) = expect_status_patch(&mut handle, "talosoperations", OPERATION).await;
        assert_eq!(applying.body["status"]["nodes"][0]["state"], "Applying");
        assert_eq!(applying.body["metadata"]["resourceVersion"], "1");
        reply(send, 200, &written(&applying.body, "2"));
        let (hash, send) = expect_status_patch(&mut handle, "talosmachines", MACHINE).await;
        reply(send, 200, &written(&hash.body, "4"));
        let (_, send) = expect_status_patch(&mut handle, "talosoperations", OPERATION).await;
        send.send_error("connection reset: the API server is restarting");
        (handle, applying.body)
    });
    let w = world(vec![operation("1", json!({"state": "Pending"}))]);
    let mut a = applier(kube);
    let report = a.apply(&w, &[apply_effect(None, "1")]).await;
    let (handle, applying) = server.await.unwrap();
    drop(a);
    assert_no_more_requests(handle).await;
    assert!(report.applied.is_empty(), "{report:?}");
    assert_eq!(report.problems.len(), 1, "{report:?}");
    assert!(
        report.problems[0]
            .message
            .contains("status write of TalosOperation"),
        "{report:?}"
    );
    assert_eq!(talos.applies().len(), 1, "the node took the document once");
    let previous: PreviousDocument =
        serde_json::from_value(applying["status"]["nodes"][0]["previousDocument"].clone()).unwrap();
    assert!(
        previous.yaml.as_deref().is_some_and(|y| y.contains("jwt: []")),
        "{previous:?}"
    );

    // The retry, decided from the Applying status the first attempt wrote: the node already runs
    // the rendered document, so the step is recorded and nothing is sent to it.
    let (kube, mut handle) = client();
    let sha_seen = sha.clone();
    let recorded = applying["status"]["nodes"][0]["previousDocument"].clone();
    let server = tokio::spawn(async move {
        expect_credentials_read(&mut handle, &secret).await;
        let (hash, send) = expect_status_patch(&mut handle, "talosmachines", MACHINE).await;
        assert_eq!(
            hash.body["status"]["appliedDocumentHashes"]["KubeAuthenticationConfig"],
            json!(sha_seen)
        );
        reply(send, 200, &written(&hash.body, "5"));
        let (waiting, send) = expect_status_patch(&mut handle, "talosoperations", OPERATION).await;
        assert_eq!(waiting.body["metadata"]["resourceVersion"], "2");
        let node = &waiting.body["status"]["nodes"][0];
        assert_eq!(node["state"], "WaitingReady", "{node:#}");
        assert!(
            node["message"]
                .as_str()
                .unwrap_or_default()
                .contains("not applied again"),
            "{node:#}"
        );
        assert_eq!(
            node["previousDocument"], recorded,
            "the recorded previous document is kept"
        );
        reply(send, 200, &written(&waiting.body, "6"));
        handle
    });
    let mut node = applying["status"]["nodes"][0].clone();
    node["state"] = json!("Applying");
    let w = world(vec![operation("2", node)]);
    let report = apply_scripted(kube, server, &w, &[apply_effect(Some(previous), "2")]).await;
    assert!(report.problems.is_empty(), "{report:?}");
    assert_eq!(report.applied.len(), 1, "{report:?}");
    assert_eq!(
        talos.applies().len(),
        1,
        "no second ApplyConfiguration: the API server is not restarted again"
    );
}

#[tokio::test]
async fn a_rollback_the_node_took_before_its_status_write_was_lost_is_not_sent_again() {
    // The node already runs its previous document again (the first rollback call went through).
    let talos = talos();
    let secret = credentials(&talos);
    let previous_yaml = ichor_talos::machine_config::extract_document(BEFORE, "KubeAuthenticationConfig")
        .unwrap()
        .unwrap();
    let previous_sha = serde_yaml::from_str::<KubeAuthenticationConfig>(&previous_yaml)
        .unwrap()
        .sha256_hex()
        .unwrap();
    let previous = PreviousDocument {
        yaml: Some(previous_yaml),
        sha256: Some(previous_sha.clone()),
    };
    let r = RollbackRequest {
        namespace: NS.into(),
        operation: OPERATION.into(),
        cluster: "prod".into(),
        step: 0,
        machine: MACHINE.into(),
        address: ADDRESS.into(),
        previous: previous.clone(),
        reason: "cp-1 did not come back within 45s".into(),
        based_on_resource_version: Some("3".into()),
    };
    let action = Action::Effect {
        request: EffectRequest::new(r.id(), &r).unwrap(),
        reason: reason(),
    };
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        expect_credentials_read(&mut handle, &secret).await;
        let (hash, send) = expect_status_patch(&mut handle, "talosmachines", MACHINE).await;
        assert_eq!(
            hash.body["status"]["appliedDocumentHashes"]["KubeAuthenticationConfig"],
            json!(previous_sha)
        );
        reply(send, 200, &written(&hash.body, "5"));
        let (rolling, send) = expect_status_patch(&mut handle, "talosoperations", OPERATION).await;
        assert_eq!(rolling.body["status"]["nodes"][0]["state"], "RollingBack");
        reply(send, 200, &written(&rolling.body, "6"));
        handle
    });
    let node = json!({"state": "WaitingReady", "previousDocument": previous});
    let w = world(vec![operation("3", node)]);
    let report = apply_scripted(client, server, &w, &[action]).await;
    assert!(report.problems.is_empty(), "{report:?}");
    assert_eq!(report.applied.len(), 1, "{report:?}");
    assert!(
        talos.applies().is_empty(),
        "no ApplyConfiguration to a node already back on its previous document"
    );
}
