//! The Kubernetes applier against a kube client whose HTTP side is scripted (tower-test): every
//! request is checked (method, path, query, content type, body) and answered with the JSON a
//! real API server sends. What a real apiserver cannot be made to answer on demand stays here:
//! 409 conflicts and their re-reads, retries, objects gone mid-write, and the guards that keep
//! the controller off input kinds, and the webhook certificate's details. The ordinary writes (the
//! trust ConfigMap applied, a status through its subresource, an effect's Secret created, a
//! credentials key removed) are proven against a real apiserver in `tests/cluster`.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::{Request, Response};
use ichor_graph::{Action, Cause, EffectRequest, Event, Object, ObjectKey, Reason, World};
use ichor_reconcile::identity::effects::{
    GenerateKeyRequest, IssueCaRequest, IssueLeafRequest, KeyKind, RemoveCredentialsKeyRequest, SanName,
};
use ichor_reconcile::perform::{self, IssuedPair, KeyMaterial};
use ichor_reconcile::problem::ProblemKind;
use ichor_reconcilers::apply::webhook::webhook_sans;
use ichor_reconcilers::apply::{KubeApplier, RetryPolicy};
use ichor_renderers::trust::keys::KeysDocument;
use ichor_renderers::trust::tls::{CA_COMMON_NAME, CertFacts, San};
use jiff::Timestamp;
use kube::client::Body;
use serde_json::{Value, json};
use tower_test::mock::{self, Handle, SendResponse};

type Mock = Handle<Request<Body>, Response<Body>>;
type Reply = SendResponse<Response<Body>>;

const NS: &str = "ichor-system";
const NOW: &str = "2026-11-29T12:00:00Z";

fn now() -> Timestamp {
    NOW.parse().unwrap()
}

fn client() -> (kube::Client, Mock) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    (kube::Client::new(service, NS), handle)
}

/// Fixed key material (no RSA generation in these tests).
struct Fixed;

impl KeyMaterial for Fixed {
    fn rsa_pkcs8_pem(&mut self) -> Result<String, String> {
        Ok(ichor_reconcile::sim::TEST_RSA_PEM.to_owned())
    }
    fn hmac_secret(&mut self, _kid: &str) -> Result<[u8; 32], String> {
        Ok([42; 32])
    }
}

fn applier(client: kube::Client) -> KubeApplier {
    KubeApplier::new(client, NS, Box::new(Fixed))
        .with_retry(RetryPolicy {
            attempts: 5,
            backoff: Duration::from_millis(1),
        })
        .with_clock(now)
}

/// One request as the API server would see it.
#[derive(Debug)]
struct Seen {
    method: String,
    path: String,
    query: BTreeMap<String, String>,
    content_type: Option<String>,
    body: Value,
}

async fn next(handle: &mut Mock) -> (Seen, Reply) {
    let (request, reply) = tokio::time::timeout(Duration::from_secs(10), handle.next_request())
        .await
        .expect("a request within 10 s")
        .expect("a request, not the end of the client");
    let (parts, body) = request.into_parts();
    let bytes = body.collect_bytes().await.unwrap();
    let query = parts
        .uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_owned(), v.to_owned())
        })
        .collect();
    let seen = Seen {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        query,
        content_type: parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_owned()),
        body: if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap()
        },
    };
    (seen, reply)
}

fn reply(send: Reply, code: u16, body: &Value) {
    send.send_response(
        Response::builder()
            .status(code)
            .header("content-type", "application/json")
            .body(Body::from(serde_json::to_vec(body).unwrap()))
            .unwrap(),
    );
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code})
}

fn conflict(what: &str) -> Value {
    status(
        409,
        "Conflict",
        &format!(
            "Operation cannot be fulfilled on {what}: the object has been modified; please apply your changes to the latest version and try again"
        ),
    )
}

/// Asserts the client sends nothing more: the applier (and every client clone) must be dropped.
async fn assert_no_more_requests(mut handle: Mock) {
    let more = tokio::time::timeout(Duration::from_secs(10), handle.next_request())
        .await
        .expect("the client ends within 10 s");
    assert!(
        more.is_none(),
        "an unexpected request: {:?}",
        more.map(|(r, _)| r.uri().clone())
    );
}

fn ssa_query(seen: &Seen) {
    assert_eq!(
        seen.query.get("fieldManager").map(String::as_str),
        Some("ichor-controller"),
        "{seen:?}"
    );
    assert_eq!(
        seen.query.get("force").map(String::as_str),
        Some("true"),
        "{seen:?}"
    );
    assert_eq!(seen.content_type.as_deref(), Some("application/apply-patch+yaml"));
}

fn reason() -> Reason {
    Reason {
        node: Some("test".into()),
        instance: None,
        cause: Cause::Initial,
    }
}

fn observed(kind: &str, name: &str, rv: &str, value: Value) -> Object {
    let mut o = Object::new(kind, NS, name, value);
    o.resource_version = Some(rv.into());
    o
}

fn world(objects: Vec<Object>) -> World {
    let mut w = World::new();
    for o in objects {
        w.apply(Event::Applied(o));
    }
    w
}

fn trust_configmap() -> Object {
    Object::new(
        "ConfigMap",
        NS,
        "ichor-oidc-trust",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "ichor-oidc-trust", "namespace": NS,
                "labels": {"identity.ichor.maesh.dev/owner": "ichor-controller"}},
            "data": {"discoveryURL": "https://10.96.0.10:8444", "ca.crt": "PEM"}}),
    )
}

fn served_configmap(rv: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "ichor-oidc-trust", "namespace": NS, "resourceVersion": rv,
            "uid": "0b6c", "labels": {"identity.ichor.maesh.dev/owner": "ichor-controller"},
            "managedFields": [{"manager": "ichor-controller", "operation": "Apply"}]},
        "data": {"discoveryURL": "https://10.96.0.10:8444", "ca.crt": "PEM"}})
}

#[tokio::test]
async fn an_apply_conflict_is_retried_and_then_succeeds() {
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (seen, send) = next(&mut handle).await;
        ssa_query(&seen);
        reply(send, 409, &conflict("configmaps \"ichor-oidc-trust\""));
        let (again, send) = next(&mut handle).await;
        assert_eq!((again.method.as_str(), again.body == seen.body), ("PATCH", true));
        reply(send, 200, &served_configmap("102"));
        handle
    });
    let mut a = applier(client);
    let action = Action::Apply {
        object: trust_configmap(),
        reason: reason(),
    };
    let report = a.apply(&World::new(), &[action]).await;
    let handle = server.await.unwrap();
    drop(a);
    assert_no_more_requests(handle).await;
    assert!(report.problems.is_empty(), "{report:?}");
    assert_eq!(report.events.len(), 1);
}

fn user(rv: &str, conditions: Value) -> Value {
    json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
        "metadata": {"name": "admin", "namespace": NS, "resourceVersion": rv, "generation": 1},
        "spec": {"roles": ["admin"], "displayName": "Admin"},
        "status": {"conditions": conditions}})
}

fn cond(type_: &str, status: &str, reason: &str, time: Option<&str>) -> Value {
    let mut c = json!({"type": type_, "status": status, "reason": reason, "message": "m"});
    if let Some(t) = time {
        c["lastTransitionTime"] = json!(t);
    }
    c
}

fn status_path() -> &'static str {
    "/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/ichorusers/admin/status"
}

#[tokio::test]
async fn a_conflicting_status_write_is_stale_and_hands_back_the_object_as_read_again() {
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (seen, send) = next(&mut handle).await;
        assert_eq!(seen.path, status_path());
        assert_eq!(seen.body["metadata"]["resourceVersion"], "5");
        reply(send, 409, &conflict("ichorusers.ichor.maesh.dev \"admin\""));
        let (read, send) = next(&mut handle).await;
        assert_eq!(read.method, "GET");
        assert_eq!(
            read.path,
            "/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/ichorusers/admin"
        );
        // Someone else changed the Other condition meanwhile.
        reply(
            send,
            200,
            &user(
                "7",
                json!([cond("Other", "False", "B", Some("2026-11-29T11:00:00Z"))]),
            ),
        );
        handle
    });
    let old = json!([cond("Other", "True", "A", Some("2026-01-01T00:00:00Z"))]);
    let w = world(vec![observed("IchorUser", "admin", "5", user("5", old.clone()))]);
    let mut a = applier(client);
    let desired = Object::new(
        "IchorUser",
        NS,
        "admin",
        json!({"status": {"conditions": [old[0].clone(), cond("Ready", "True", "Ready", None)]}}),
    );
    let report = a
        .apply(
            &w,
            &[Action::Apply {
                object: desired,
                reason: reason(),
            }],
        )
        .await;
    let handle = server.await.unwrap();
    drop(a);
    assert_no_more_requests(handle).await;
    assert!(
        report.problems.is_empty() && report.applied.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.stale.len(), 1, "{report:?}");
    assert_eq!(report.stale[0].kind, ProblemKind::Conflict);
    let [Event::Applied(o)] = report.events.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(
        o.resource_version.as_deref(),
        Some("7"),
        "the object as read again"
    );
    assert_eq!(o.value["status"]["conditions"][0]["reason"], "B");
}

#[tokio::test]
async fn the_spec_of_an_input_kind_is_never_written() {
    let (client, handle) = client();
    let mut a = applier(client);
    let desired = Object::new(
        "IchorUser",
        NS,
        "admin",
        json!({"spec": {"roles": []}, "status": {}}),
    );
    let report = a
        .apply(
            &World::new(),
            &[Action::Apply {
                object: desired,
                reason: reason(),
            }],
        )
        .await;
    drop(a);
    assert_no_more_requests(handle).await;
    assert_eq!(report.problems.len(), 1, "{report:?}");
    assert!(
        report.problems[0]
            .message
            .contains("never writes the spec of an input kind")
    );
}

fn signing_secret(rv: &str) -> Object {
    let doc = KeysDocument::default().to_json();
    observed(
        "Secret",
        "ichor-oidc-signing",
        rv,
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "ichor-oidc-signing", "namespace": NS, "resourceVersion": rv,
                "annotations": {"kept": "yes"}},
            "type": "Opaque", "data": {"keys.json": STANDARD.encode(doc)}}),
    )
}

fn hmac_effect(based_on: Option<&str>) -> Action {
    let r = GenerateKeyRequest {
        kind: KeyKind::Hmac,
        kid: "h-20261129-1200".into(),
        created_at: now(),
        active_from: now(),
        reason: "first key".into(),
        based_on_resource_version: based_on.map(str::to_owned),
        document_changes: Vec::new(),
    };
    Action::Effect {
        request: EffectRequest::new(r.id(), &r).unwrap(),
        reason: reason(),
    }
}

fn keys_in(body: &Value) -> KeysDocument {
    let b64 = body["data"]["keys.json"].as_str().unwrap();
    KeysDocument::parse(&STANDARD.decode(b64).unwrap()).unwrap()
}

#[tokio::test]
async fn a_conflict_on_an_effect_secret_is_stale_never_overwritten_and_read_again() {
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (seen, send) = next(&mut handle).await;
        assert_eq!(seen.method, "PUT");
        assert_eq!(
            seen.path,
            "/api/v1/namespaces/ichor-system/secrets/ichor-oidc-signing"
        );
        assert_eq!(
            seen.body["metadata"]["resourceVersion"], "10",
            "the version the performer read"
        );
        assert_eq!(
            seen.body["metadata"]["annotations"]["kept"], "yes",
            "others' metadata is kept"
        );
        assert!(keys_in(&seen.body).hmac_key("h-20261129-1200").is_some());
        reply(send, 409, &conflict("secrets \"ichor-oidc-signing\""));
        let (read, send) = next(&mut handle).await;
        assert_eq!(
            (read.method.as_str(), read.path.as_str()),
            (
                "GET",
                "/api/v1/namespaces/ichor-system/secrets/ichor-oidc-signing"
            )
        );
        reply(send, 200, &signing_secret("11").value);
        handle
    });
    let w = world(vec![signing_secret("10")]);
    let mut a = applier(client);
    let report = a.apply(&w, &[hmac_effect(Some("10"))]).await;
    let handle = server.await.unwrap();
    drop(a);
    assert_no_more_requests(handle).await;
    assert!(
        report.problems.is_empty() && report.applied.is_empty(),
        "{report:?}"
    );
    let [Event::Applied(fresh)] = report.events.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(fresh.resource_version.as_deref(), Some("11"));
    assert_eq!(report.stale.len(), 1, "{report:?}");
    let problem = &report.stale[0];
    assert!(
        problem.message.contains("ichor-oidc-signing") && problem.message.contains("not written"),
        "{problem}"
    );
    assert!(
        !problem.message.contains(&STANDARD.encode([42u8; 32])),
        "no secret material in messages"
    );
}

fn credentials(rv: &str, users: &[&str]) -> Value {
    let data: serde_json::Map<String, Value> =
        users.iter().map(|u| ((*u).to_owned(), json!("e30="))).collect();
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "ichor-user-credentials", "namespace": NS, "resourceVersion": rv},
        "type": "Opaque", "data": data})
}

fn gc_effect() -> Action {
    let r = RemoveCredentialsKeyRequest {
        namespace: NS.into(),
        secret: "ichor-user-credentials".into(),
        key: "ghost".into(),
    };
    Action::Effect {
        request: EffectRequest::new(r.id(), &r).unwrap(),
        reason: reason(),
    }
}

const CREDENTIALS_PATH: &str = "/api/v1/namespaces/ichor-system/secrets/ichor-user-credentials";

/// A removal meeting a conflict, the credentials Secret as read again, then `user` for the
/// key's IchorUser; returns the report.
async fn gc_conflict(user_reply: (u16, Value)) -> ichor_reconcilers::apply::ApplyReport {
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (_, send) = next(&mut handle).await;
        reply(send, 409, &conflict("secrets \"ichor-user-credentials\""));
        let (read, send) = next(&mut handle).await;
        assert_eq!(
            (read.method.as_str(), read.path.as_str()),
            ("GET", CREDENTIALS_PATH)
        );
        reply(send, 200, &credentials("22", &["admin", "ghost"]));
        let (user, send) = next(&mut handle).await;
        assert_eq!(
            (user.method.as_str(), user.path.as_str()),
            (
                "GET",
                "/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/ichorusers/ghost"
            )
        );
        reply(send, user_reply.0, &user_reply.1);
        handle
    });
    let w = world(vec![observed(
        "Secret",
        "ichor-user-credentials",
        "20",
        credentials("20", &["admin", "ghost"]),
    )]);
    let mut a = applier(client);
    let report = a.apply(&w, &[gc_effect()]).await;
    let handle = server.await.unwrap();
    drop(a);
    assert_no_more_requests(handle).await;
    report
}

#[tokio::test]
async fn a_garbage_collection_conflict_reads_the_secret_and_the_user_again_and_leaves_the_decision_to_the_graph()
 {
    let report = gc_conflict((
        404,
        status(404, "NotFound", "ichorusers.ichor.maesh.dev \"ghost\" not found"),
    ))
    .await;
    assert!(
        report.problems.is_empty() && report.applied.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.stale.len(), 1, "{report:?}");
    let [Event::Applied(secret), Event::Deleted(user)] = report.events.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(secret.resource_version.as_deref(), Some("22"));
    assert_eq!(user, &ObjectKey::new("IchorUser", NS, "ghost"));
}

#[tokio::test]
async fn a_garbage_collection_conflict_hands_back_a_user_who_is_back() {
    let mut back = user("3", json!([]));
    back["metadata"]["name"] = json!("ghost");
    let report = gc_conflict((200, back)).await;
    assert_eq!(report.stale.len(), 1, "{report:?}");
    let [Event::Applied(_), Event::Applied(user)] = report.events.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!((&*user.kind, &*user.name), ("IchorUser", "ghost"));
}

#[tokio::test]
async fn deleting_an_owned_object_already_gone_is_success_and_carries_its_resource_version() {
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (seen, send) = next(&mut handle).await;
        assert_eq!(seen.method, "DELETE");
        assert_eq!(seen.path, "/api/v1/namespaces/ichor-system/configmaps/old-trust");
        assert_eq!(seen.body["preconditions"], json!({"resourceVersion": "3"}));
        reply(
            send,
            404,
            &status(404, "NotFound", "configmaps \"old-trust\" not found"),
        );
        handle
    });
    let key = ObjectKey::new("ConfigMap", NS, "old-trust");
    let w = world(vec![observed(
        "ConfigMap",
        "old-trust",
        "3",
        json!({"metadata": {"name": "old-trust"}}),
    )]);
    let mut a = applier(client);
    let report = a
        .apply(
            &w,
            &[Action::Delete {
                key: key.clone(),
                reason: reason(),
            }],
        )
        .await;
    let handle = server.await.unwrap();
    drop(a);
    assert_no_more_requests(handle).await;
    assert!(report.problems.is_empty(), "{report:?}");
    assert_eq!(report.events, [Event::Deleted(key)]);
}

#[tokio::test]
async fn an_input_object_is_never_deleted() {
    let (client, handle) = client();
    let mut a = applier(client);
    let key = ObjectKey::new("TalosMachine", NS, "cp-1");
    let report = a
        .apply(
            &World::new(),
            &[Action::Delete {
                key,
                reason: reason(),
            }],
        )
        .await;
    drop(a);
    assert_no_more_requests(handle).await;
    assert_eq!(report.problems.len(), 1, "{report:?}");
}

// ---- the webhook serving certificate and the caBundles ----

fn ca() -> IssuedPair {
    perform::issue_ca(
        &IssueCaRequest {
            common_name: CA_COMMON_NAME.into(),
            not_before: "2026-01-01T00:00:00Z".parse().unwrap(),
            not_after: "2036-01-01T00:00:00Z".parse().unwrap(),
            reason: "test".into(),
            replaces: None,
        },
        &mut Fixed,
    )
    .unwrap()
}

fn ca_secret(ca: &IssuedPair) -> Object {
    observed(
        "Secret",
        "ichor-oidc-ca",
        "3",
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "ichor-oidc-ca", "namespace": NS, "resourceVersion": "3"},
            "data": {"tls.crt": STANDARD.encode(&ca.cert_pem), "tls.key": STANDARD.encode(&ca.key_pem)}}),
    )
}

fn webhook_configuration(rv: &str, bundles: [&str; 2]) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "ichor-identity", "resourceVersion": rv},
        "webhooks": [
            {"name": "ichorusers.ichor.maesh.dev", "admissionReviewVersions": ["v1"], "sideEffects": "None",
             "clientConfig": {"caBundle": bundles[0],
                "service": {"name": "ichor-webhook", "namespace": NS, "path": "/validate/ichorusers", "port": 9443}}},
            {"name": "talosclusters.ichor.maesh.dev", "admissionReviewVersions": ["v1"], "sideEffects": "None",
             "clientConfig": {"caBundle": bundles[1],
                "service": {"name": "ichor-webhook", "namespace": NS, "path": "/validate/talosclusters", "port": 9443}}}]})
}

fn configuration_object(rv: &str, bundles: [&str; 2]) -> Object {
    let mut o = Object::new(
        "ValidatingWebhookConfiguration",
        "",
        "ichor-identity",
        webhook_configuration(rv, bundles),
    );
    o.resource_version = Some(rv.into());
    o
}

const CONFIGURATION_PATH: &str =
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/ichor-identity";

#[tokio::test]
async fn the_webhook_leaf_effect_writes_ichor_webhook_tls_signed_by_the_observed_ca() {
    let ca = ca();
    let expected_ca = ca.cert_pem.clone();
    let request = IssueLeafRequest {
        common_name: "ichor-webhook.ichor-system.svc".into(),
        sans: webhook_sans("ichor-webhook", NS)
            .into_iter()
            .map(SanName::Dns)
            .collect(),
        not_before: now(),
        not_after: "2027-11-29T12:00:00Z".parse().unwrap(),
        reason: "no serving certificate yet".into(),
        replaces: None,
    };
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (create, send) = next(&mut handle).await;
        assert_eq!(
            (create.method.as_str(), create.path.as_str()),
            ("POST", "/api/v1/namespaces/ichor-system/secrets")
        );
        assert_eq!(create.body["metadata"]["name"], "ichor-webhook-tls");
        assert_eq!(create.body["type"], "kubernetes.io/tls");
        let text = |k: &str| {
            String::from_utf8(STANDARD.decode(create.body["data"][k].as_str().unwrap()).unwrap()).unwrap()
        };
        assert_eq!(text("ca.crt"), expected_ca);
        let leaf = CertFacts::from_pem(&text("tls.crt"), "leaf").unwrap();
        assert!(leaf.is_issued_by(&CertFacts::from_pem(&expected_ca, "ca").unwrap()));
        let mut sans: Vec<San> = webhook_sans("ichor-webhook", NS)
            .into_iter()
            .map(San::Dns)
            .collect();
        sans.sort();
        assert_eq!(leaf.sans, sans);
        assert_eq!(leaf.not_after, "2027-11-29T12:00:00Z".parse().unwrap());
        let mut created = create.body.clone();
        created["metadata"]["resourceVersion"] = json!("1");
        reply(send, 201, &created);
        handle
    });
    let action = Action::Effect {
        request: EffectRequest::new("issue-webhook-leaf new", &request).unwrap(),
        reason: reason(),
    };
    let mut a = applier(client);
    let report = a.apply(&world(vec![ca_secret(&ca)]), &[action]).await;
    let handle = server.await.unwrap();
    drop(a);
    assert_no_more_requests(handle).await;
    assert!(
        report.problems.is_empty() && report.stale.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.applied, ["effect issue-webhook-leaf new (test: initial)"]);
    let [Event::Applied(secret)] = report.events.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(secret.resource_version.as_deref(), Some("1"));
}

fn bundle_action(bundle: &str) -> Action {
    let mut desired = configuration_object("44", [bundle, bundle]);
    desired.value = json!({"webhooks": desired.value["webhooks"].clone()});
    desired.resource_version = None;
    Action::Apply {
        object: desired,
        reason: reason(),
    }
}

#[tokio::test]
async fn only_the_differing_ca_bundles_are_patched_conditioned_on_the_observed_version() {
    let bundle = STANDARD.encode(ca().cert_pem);
    let (client, mut handle) = client();
    let expected = bundle.clone();
    let server = tokio::spawn(async move {
        let (patch, send) = next(&mut handle).await;
        assert_eq!(
            (patch.method.as_str(), patch.path.as_str()),
            ("PATCH", CONFIGURATION_PATH)
        );
        assert_eq!(
            patch.content_type.as_deref(),
            Some("application/strategic-merge-patch+json")
        );
        assert_eq!(
            patch.body,
            json!({"metadata": {"resourceVersion": "44"},
                "webhooks": [{"name": "talosclusters.ichor.maesh.dev", "clientConfig": {"caBundle": expected}}]}),
            "only the stale caBundle, conditioned on the resourceVersion"
        );
        reply(
            send,
            200,
            &webhook_configuration("45", [expected.as_str(), expected.as_str()]),
        );
        handle
    });
    let w = world(vec![configuration_object("44", [bundle.as_str(), "b2xk"])]);
    let mut a = applier(client);
    let report = a.apply(&w, &[bundle_action(&bundle)]).await;
    let handle = server.await.unwrap();
    drop(a);
    assert_no_more_requests(handle).await;
    assert!(
        report.problems.is_empty() && report.stale.is_empty(),
        "{report:?}"
    );
    let [Event::Applied(o)] = report.events.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(o.resource_version.as_deref(), Some("45"));
    assert_eq!(o.namespace.as_str(), "", "cluster-scoped");
}

#[tokio::test]
async fn a_ca_bundle_patch_meeting_a_conflict_is_stale_and_hands_back_the_configuration_as_read_again() {
    let bundle = STANDARD.encode(ca().cert_pem);
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (patch, send) = next(&mut handle).await;
        assert_eq!(patch.method, "PATCH");
        reply(
            send,
            409,
            &conflict("validatingwebhookconfigurations.admissionregistration.k8s.io \"ichor-identity\""),
        );
        let (read, send) = next(&mut handle).await;
        assert_eq!(
            (read.method.as_str(), read.path.as_str()),
            ("GET", CONFIGURATION_PATH)
        );
        reply(send, 200, &webhook_configuration("46", ["bmV3", "bmV3"]));
        handle
    });
    let w = world(vec![configuration_object("44", ["b2xk", "b2xk"])]);
    let mut a = applier(client);
    let report = a.apply(&w, &[bundle_action(&bundle)]).await;
    let handle = server.await.unwrap();
    drop(a);
    assert_no_more_requests(handle).await;
    assert!(
        report.problems.is_empty() && report.applied.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.stale.len(), 1, "{report:?}");
    let [Event::Applied(o)] = report.events.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(o.resource_version.as_deref(), Some("46"));
}

#[tokio::test]
async fn a_leaf_is_not_written_when_the_ca_it_is_signed_by_lost_its_write() {
    let ca = IssueCaRequest {
        common_name: CA_COMMON_NAME.into(),
        not_before: now(),
        not_after: "2036-11-29T12:00:00Z".parse().unwrap(),
        reason: "no CA".into(),
        replaces: None,
    };
    let leaf = IssueLeafRequest {
        common_name: "ichor-issuer".into(),
        sans: vec![SanName::Ip("10.96.0.10".parse().unwrap())],
        not_before: now(),
        not_after: "2027-11-29T12:00:00Z".parse().unwrap(),
        reason: "no leaf".into(),
        replaces: None,
    };
    let actions = [
        Action::Effect {
            request: EffectRequest::new("issue-ca new", &ca).unwrap(),
            reason: reason(),
        },
        Action::Effect {
            request: EffectRequest::new("issue-leaf 10.96.0.10 new", &leaf).unwrap(),
            reason: reason(),
        },
    ];
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (seen, send) = next(&mut handle).await;
        assert_eq!(
            (seen.method.as_str(), seen.body["metadata"]["name"].as_str()),
            ("POST", Some("ichor-oidc-ca"))
        );
        reply(
            send,
            409,
            &status(409, "AlreadyExists", "secrets \"ichor-oidc-ca\" already exists"),
        );
        let (read, send) = next(&mut handle).await;
        assert_eq!(
            (read.method.as_str(), read.path.as_str()),
            ("GET", "/api/v1/namespaces/ichor-system/secrets/ichor-oidc-ca")
        );
        reply(send, 200, &ca_secret(&self::ca()).value);
        handle
    });
    let mut a = applier(client);
    let report = a.apply(&World::new(), &actions).await;
    let handle = server.await.unwrap();
    drop(a);
    assert_no_more_requests(handle).await;
    assert!(report.applied.is_empty(), "{report:?}");
    let [Event::Applied(other)] = report.events.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(
        other.resource_version.as_deref(),
        Some("3"),
        "the other writer's CA, read again"
    );
    assert_eq!(report.stale.len(), 1, "{report:?}");
    assert!(report.stale[0].message.contains("ichor-oidc-ca"), "{report:?}");
    assert_eq!(report.problems.len(), 1, "{report:?}");
    assert!(
        report.problems[0].message.contains("ichor-oidc-tls: not written"),
        "{report:?}"
    );
    assert!(
        report
            .problems
            .iter()
            .chain(&report.stale)
            .all(|p| !p.message.contains("PRIVATE KEY"))
    );
}

#[tokio::test]
async fn a_machine_needing_an_apiserver_restart_gets_its_condition_through_the_status_subresource() {
    let machine = |rv: &str| {
        json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "TalosMachine",
            "metadata": {"name": "cp-1", "namespace": NS, "resourceVersion": rv},
            "spec": {"cluster": "prod", "role": "controlplane"}})
    };
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (seen, send) = next(&mut handle).await;
        assert_eq!(seen.method, "PATCH");
        assert_eq!(
            seen.path,
            "/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/talosmachines/cp-1/status"
        );
        ssa_query(&seen);
        assert_eq!(seen.body.get("spec"), None);
        assert_eq!(
            seen.body["status"]["conditions"],
            json!([cond("Ready", "False", "APIServerRestartRequired", Some(NOW))])
        );
        let mut written = machine("31");
        written["status"] = seen.body["status"].clone();
        reply(send, 200, &written);
        handle
    });
    let w = world(vec![observed("TalosMachine", "cp-1", "30", machine("30"))]);
    let mut a = applier(client);
    let desired = Object::new(
        "TalosMachine",
        NS,
        "cp-1",
        json!({"status": {"conditions": [cond("Ready", "False", "APIServerRestartRequired", None)]}}),
    );
    let report = a
        .apply(
            &w,
            &[Action::Apply {
                object: desired,
                reason: reason(),
            }],
        )
        .await;
    let handle = server.await.unwrap();
    drop(a);
    assert_no_more_requests(handle).await;
    assert!(report.problems.is_empty(), "{report:?}");
    assert_eq!(report.events.len(), 1);
}
