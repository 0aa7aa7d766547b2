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
use ichor_controller::apply::webhook::webhook_sans;
use ichor_controller::apply::{KubeApplier, RetryPolicy};
use ichor_controller_core::identity::effects::{
    GenerateKeyRequest, IssueCaRequest, IssueLeafRequest, KeyKind, PerUserSecretRef,
    RemoveCredentialsKeyRequest, SanName,
};
use ichor_controller_core::perform::{IssuedPair, KeyMaterial, KeyMaterialError};
use ichor_controller_core::problem::ProblemKind;
use ichor_graph::{Action, Cause, EffectRequest, Event, Object, ObjectKey, Reason, World};
use ichor_renderers::trust::keys::KeysDocument;
use ichor_renderers::trust::tls::{CA_COMMON_NAME, CertFacts, San};
use jiff::Timestamp;
use kube::client::Body;
use serde_json::{Value, json};
use tower_test::mock::{self, Handle, SendResponse};

mod effects;
mod objects;
pub(crate) mod rollout;
mod webhook;

pub(crate) type Mock = Handle<Request<Body>, Response<Body>>;
pub(crate) type Reply = SendResponse<Response<Body>>;

pub(crate) const NS: &str = "ichor-system";
const NOW: &str = "2026-11-29T12:00:00Z";

fn now() -> Timestamp {
    NOW.parse().unwrap()
}

pub(crate) fn client() -> (kube::Client, Mock) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    (kube::Client::new(service, NS), handle)
}

/// Fixed key material (no RSA generation in these tests).
struct Fixed;

impl KeyMaterial for Fixed {
    fn rsa_pkcs8_pem(&mut self) -> Result<String, KeyMaterialError> {
        Ok(ichor_controller_core::sim::TEST_RSA_PEM.to_owned())
    }
    fn hmac_secret(&mut self, _kid: &str) -> Result<[u8; 32], KeyMaterialError> {
        Ok([42; 32])
    }
}

pub(crate) fn applier(client: kube::Client) -> KubeApplier {
    KubeApplier::new(client, NS, Box::new(Fixed))
        .with_retry(RetryPolicy {
            attempts: 5,
            backoff: Duration::from_millis(1),
        })
        .with_clock(now)
}

/// One request as the API server would see it.
#[derive(Debug)]
pub(crate) struct Seen {
    pub(crate) method: String,
    pub(crate) path: String,
    query: BTreeMap<String, String>,
    content_type: Option<String>,
    /// The Accept header (a metadata-only read asks for `PartialObjectMetadata`).
    pub(crate) accept: Option<String>,
    pub(crate) body: Value,
}

pub(crate) async fn next(handle: &mut Mock) -> (Seen, Reply) {
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
        accept: parts
            .headers
            .get(http::header::ACCEPT)
            .map(|v| v.to_str().unwrap().to_owned()),
        body: if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap()
        },
    };
    (seen, reply)
}

pub(crate) fn reply(send: Reply, code: u16, body: &Value) {
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

/// Applies `actions` over `world` through an applier on `client`, then waits for the scripted
/// `server` and checks the client sent nothing more.
pub(crate) async fn apply_scripted(
    client: kube::Client,
    server: tokio::task::JoinHandle<Mock>,
    world: &World,
    actions: &[Action],
) -> ichor_controller::apply::ApplyReport {
    let mut a = applier(client);
    let report = a.apply(world, actions).await;
    let handle = server.await.unwrap();
    drop(a);
    assert_no_more_requests(handle).await;
    report
}

/// Asserts the client sends nothing more: the applier (and every client clone) must be dropped.
pub(crate) async fn assert_no_more_requests(mut handle: Mock) {
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

pub(crate) fn reason() -> Reason {
    Reason {
        node: Some("test".into()),
        instance: None,
        cause: Cause::Initial,
    }
}

pub(crate) fn observed(kind: &str, name: &str, rv: &str, value: Value) -> Object {
    let mut o = Object::new(kind, NS, name, value);
    o.resource_version = Some(rv.into());
    o
}

pub(crate) fn world(objects: Vec<Object>) -> World {
    let mut w = World::new();
    for o in objects {
        w.apply(Event::Applied(o));
    }
    w
}

fn user(rv: &str, conditions: Value) -> Value {
    json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
        "metadata": {"name": "admin", "namespace": NS, "resourceVersion": rv, "generation": 1},
        "spec": {"roles": ["admin"], "displayName": "Admin"},
        "status": {"conditions": conditions}})
}

pub(crate) fn ca() -> IssuedPair {
    ichor_controller_core::sim::fixtures::ca().unwrap()
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
