//! The Kubernetes access-review backend against a scripted kube-apiserver: the exact
//! `SubjectAccessReview` sent, and how the answer (allowed, denied, error) is read.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::{
    convert::Infallible,
    sync::{Arc, Mutex},
};

use http_body_util::BodyExt as _;
use ichor_issuer::api::{AccessReview, Caller, KubeAccessReview, access};
use kube::client::Body;

type Seen = Arc<Mutex<Vec<(String, String, serde_json::Value)>>>;

/// A client whose every request is answered with `status` and `answer`, recording what it got.
fn scripted(status: u16, answer: serde_json::Value) -> (kube::Client, Seen) {
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    let service = tower::service_fn(move |request: http::Request<Body>| {
        let log = Arc::clone(&log);
        let answer = answer.clone();
        async move {
            let method = request.method().to_string();
            let path = request.uri().path().to_owned();
            let bytes = request.into_body().collect().await.unwrap().to_bytes();
            let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            log.lock().unwrap().push((method, path, body));
            let response = http::Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(&answer).unwrap()))
                .unwrap();
            Ok::<_, Infallible>(response)
        }
    });
    (kube::Client::new(service, "ichor-system"), seen)
}

fn review_answer(allowed: bool) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {},
        "status": {"allowed": allowed}
    })
}

fn alice() -> Caller {
    Caller::ichor("alice", &["admin"])
}

#[tokio::test]
async fn sends_a_subject_access_review_for_the_ichor_user_and_its_role_groups() {
    let (client, seen) = scripted(201, review_answer(true));
    let review = KubeAccessReview::new(client);
    let allowed = review
        .allowed(&alice().subject(), &access::password("bob"))
        .await
        .unwrap();
    assert!(allowed);
    let seen = seen.lock().unwrap();
    let (method, path, body) = &seen[0];
    assert_eq!(method, "POST");
    assert_eq!(path, "/apis/authorization.k8s.io/v1/subjectaccessreviews");
    assert_eq!(
        body["spec"],
        serde_json::json!({
            "user": "ichor:alice",
            "groups": ["ichor:admin", "system:authenticated"],
            "resourceAttributes": {
                "verb": "update",
                "group": "ichor.maesh.dev",
                "resource": "ichorusers",
                "subresource": "password",
                "namespace": "ichor-system",
                "name": "bob"
            }
        })
    );
}

#[tokio::test]
async fn a_denial_is_false_and_a_server_error_is_an_error_never_an_allow() {
    let (client, _) = scripted(201, review_answer(false));
    let denied = KubeAccessReview::new(client)
        .allowed(&alice().subject(), &access::ichorusers("list", ""))
        .await
        .unwrap();
    assert!(!denied);
    let (client, _) = scripted(
        403,
        serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": "forbidden", "reason": "Forbidden", "code": 403}),
    );
    let err = KubeAccessReview::new(client)
        .allowed(&alice().subject(), &access::ichorusers("list", ""))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("could not be answered"), "{err}");
}
