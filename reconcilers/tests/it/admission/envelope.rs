//! The webhooks' HTTP side, on the router and once over real HTTPS: the `AdmissionReview` v1
//! answer (the request's uid, no `status` on an allow, 403 `Forbidden` on a denial), bad bodies
//! (400 with the reason), the 3 MiB limit (413), the kind and subresource each path admits,
//! `/healthz` and the decision observer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt as _;
use ichor_controller::admission::fixtures::{
    FakeLister, FakeReviewer, LoopbackServer, NAMESPACE, OPERATOR, ROOT, ServingPair, VIEWER, WEBHOOK_HOST,
    Who, cluster, operation, review, user,
};
use ichor_controller::admission::{
    AdmissionObserver, AdmissionState, ICHORUSERS_PATH, ServerOptions, TALOSCLUSTERS_PATH,
    TALOSOPERATIONS_PATH, controller_identity, router,
};
use serde_json::{Value, json};
use tower::ServiceExt as _;

use super::{Denied, Fakes, assert_denied};

fn router_of(fakes: Fakes) -> axum::Router {
    router(Arc::new(fakes.state))
}

async fn post(router: &axum::Router, path: &str, body: impl Into<Body>) -> (StatusCode, Bytes) {
    let request = Request::builder()
        .method(Method::POST)
        .uri(path)
        .header("content-type", "application/json")
        .body(body.into())
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    (status, response.into_body().collect().await.unwrap().to_bytes())
}

/// Posts a review and returns `Ok(())` when allowed or `Err(message)` when denied, after checking
/// the response envelope (v1, same uid, no status on an allow, 403 on a denial).
async fn admit(router: &axum::Router, path: &str, doc: &Value) -> Result<(), String> {
    let (status, body) = post(router, path, serde_json::to_vec(doc).unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let answer: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(answer["response"]["uid"], doc["request"]["uid"]);
    if answer["response"]["allowed"] == json!(true) {
        assert!(answer["response"].get("status").is_none(), "{answer}");
        Ok(())
    } else {
        assert_eq!(answer["response"]["allowed"], json!(false));
        assert_eq!(answer["response"]["status"]["code"], json!(403), "{answer}");
        assert_eq!(answer["response"]["status"]["reason"], "Forbidden");
        assert_eq!(answer["response"]["status"]["status"], "Failure");
        Err(answer["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .to_owned())
    }
}

/// `who` creating user `ann` with `roles`.
fn create_ann(who: &Who<'_>, roles: &[&str]) -> Value {
    review("IchorUser", "CREATE", who, user("ann", roles, false), Value::Null)
}

#[tokio::test]
async fn each_path_answers_a_v1_review_with_the_uid_and_403_on_a_denial() {
    let router = router_of(Fakes::granting(&[("start", "talosoperations/shutdown")]));
    let create_cluster = |spec: Value| review("TalosCluster", "CREATE", &ROOT, cluster(spec), Value::Null);
    let start = |kind: &str| {
        let new = operation(kind, None);
        review("TalosOperation", "CREATE", &ROOT, new, Value::Null)
    };
    let too_old = json!({"versionContract": "v1.13", "authentication": {"ichor": {"enabled": true}}});
    let cases = [
        (ICHORUSERS_PATH, create_ann(&VIEWER, &["viewer"]), true),
        (ICHORUSERS_PATH, create_ann(&VIEWER, &["admin"]), false),
        (TALOSCLUSTERS_PATH, create_cluster(json!({})), true),
        (TALOSCLUSTERS_PATH, create_cluster(too_old), false),
        (TALOSOPERATIONS_PATH, start("shutdown"), true),
        (TALOSOPERATIONS_PATH, start("ca-rotation"), false),
    ];
    for (path, doc, allowed) in cases {
        assert_eq!(admit(&router, path, &doc).await.is_ok(), allowed, "{path} {doc}");
    }
}

#[tokio::test]
async fn malformed_bodies_are_answered_with_400_and_the_reason() {
    let router = router_of(Fakes::none());
    let doc = || create_ann(&ROOT, &[]);
    let mut v1beta1 = doc();
    v1beta1["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let mut no_uid = doc();
    no_uid["request"]["uid"] = json!("");
    let mut wrong_type = doc();
    wrong_type["request"]["userInfo"]["groups"] = json!("ichor:admin");
    let cases: [(Vec<u8>, Denied<'_>); 5] = [
        (
            b"{not json".to_vec(),
            Denied::StartsWith("the body is not a valid AdmissionReview"),
        ),
        (
            serde_json::to_vec(&v1beta1).unwrap(),
            Denied::Contains("not an admission.k8s.io/v1 AdmissionReview"),
        ),
        (
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec(),
            Denied::Contains("has no request"),
        ),
        (
            serde_json::to_vec(&no_uid).unwrap(),
            Denied::StartsWith("request.uid: required"),
        ),
        (
            serde_json::to_vec(&wrong_type).unwrap(),
            Denied::Contains("request.userInfo.groups"),
        ),
    ];
    for (body, reason) in cases {
        let (status, text) = post(&router, ICHORUSERS_PATH, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_denied(Err(String::from_utf8_lossy(&text).into_owned()), &[reason]);
    }
}

#[tokio::test]
async fn a_body_over_3_mib_is_refused_with_413() {
    let router = router_of(Fakes::none());
    let mut doc = create_ann(&ROOT, &[]);
    doc["request"]["object"]["metadata"]["annotations"] = json!({"big": "x".repeat(3 * 1024 * 1024)});
    let (status, _) = post(&router, ICHORUSERS_PATH, serde_json::to_vec(&doc).unwrap()).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    // Just under the limit is read.
    doc["request"]["object"]["metadata"]["annotations"] = json!({"big": "x".repeat(2 * 1024 * 1024)});
    assert_eq!(admit(&router, ICHORUSERS_PATH, &doc).await, Ok(()));
}

#[tokio::test]
async fn a_kind_the_path_does_not_admit_is_refused() {
    let router = router_of(Fakes::none());
    let mut pod = create_ann(&ROOT, &[]);
    pod["request"]["kind"] = json!({"group": "", "version": "v1", "kind": "Pod"});
    assert_eq!(
        admit(&router, ICHORUSERS_PATH, &pod).await,
        Err(
            "request.kind: /Pod is not admitted by this webhook, which admits only ichor.maesh.dev/IchorUser"
                .to_owned()
        )
    );
    assert_denied(
        admit(&router, TALOSCLUSTERS_PATH, &create_ann(&ROOT, &[])).await,
        &[Denied::StartsWith("request.kind:")],
    );
    let mut status = review(
        "IchorUser",
        "UPDATE",
        &ROOT,
        user("ann", &[], false),
        user("ann", &[], false),
    );
    status["request"]["subResource"] = json!("status");
    assert_denied(
        admit(&router, ICHORUSERS_PATH, &status).await,
        &[Denied::StartsWith("request.subResource:")],
    );
}

#[derive(Default)]
struct CountingObserver {
    decisions: Mutex<Vec<(&'static str, bool)>>,
}

impl AdmissionObserver for CountingObserver {
    fn decided(&self, webhook: &'static str, allowed: bool, _elapsed: Duration) {
        self.decisions.lock().unwrap().push((webhook, allowed));
    }
}

#[tokio::test]
async fn healthz_answers_ok_and_the_observer_sees_every_decision() {
    let observer = Arc::new(CountingObserver::default());
    let state = Fakes::none().state.with_observer(observer.clone());
    let router = router(Arc::new(state));
    let response = router
        .clone()
        .oneshot(Request::builder().uri("/healthz").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let (bo, shutdown) = (user("bo", &["viewer"], false), operation("shutdown", None));
    let ok = review("IchorUser", "CREATE", &VIEWER, bo, Value::Null);
    let refused = review("TalosOperation", "CREATE", &VIEWER, shutdown, Value::Null);
    assert_eq!(admit(&router, ICHORUSERS_PATH, &ok).await, Ok(()));
    assert!(admit(&router, TALOSOPERATIONS_PATH, &refused).await.is_err());
    assert_eq!(
        *observer.decisions.lock().unwrap(),
        vec![("ichorusers", true), ("talosoperations", false)]
    );
}

#[tokio::test]
async fn serves_over_https_once_the_certificate_appears() {
    let dir = tempfile::tempdir().unwrap();
    let state = AdmissionState::new(
        Arc::new(FakeReviewer::default()),
        Arc::new(FakeLister::default()),
        controller_identity(NAMESPACE),
    );
    let mut options = ServerOptions::default();
    options.watch.poll_interval = Duration::from_millis(100);
    options.serve.shutdown_grace = Duration::from_secs(1);
    let server = LoopbackServer::start(dir.path().to_path_buf(), Arc::new(state), options)
        .await
        .unwrap();

    let pair = ServingPair::self_signed(WEBHOOK_HOST).unwrap();
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(pair.cert_pem.as_bytes()).unwrap())
        .resolve(WEBHOOK_HOST, server.addr())
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let url = server.url(WEBHOOK_HOST, ICHORUSERS_PATH);
    let ann = user("ann", &["admin"], false);
    let doc = review("IchorUser", "CREATE", &OPERATOR, ann, Value::Null);

    // No pair yet: the handshake fails.
    assert!(client.post(&url).json(&doc).send().await.is_err());

    pair.write_to(dir.path()).unwrap();
    let mut answer = None;
    for _ in 0..50 {
        if let Ok(response) = client.post(&url).json(&doc).send().await {
            answer = Some(response.json::<Value>().await.unwrap());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let answer = answer.expect("the server never served the certificate written after start");
    assert_eq!(answer["response"]["uid"], doc["request"]["uid"]);
    assert_eq!(answer["response"]["allowed"], json!(false));
    assert!(
        answer["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("\"admin\"")
    );

    assert!(
        tokio::time::timeout(Duration::from_secs(5), server.stop())
            .await
            .unwrap()
            .unwrap()
            .is_ok()
    );
}
