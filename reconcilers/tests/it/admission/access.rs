//! The kube implementations of what the rules ask the cluster — the `SubjectAccessReview`
//! ([`KubeAccessReviewer`]) and the user cache with its fresh read ([`KubeUserLister`]) —
//! against a scripted kube client, alone and feeding the rules.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{Method, Request, Response};
use http_body_util::{BodyExt as _, Full};
use ichor_reconcilers::admission::access::{ichor_attributes, subject_access_review};
use ichor_reconcilers::admission::fixtures::{
    self, FakeLister, FakeReviewer, NAMESPACE, ROOT, Who, operation, user, user_object,
};
use ichor_reconcilers::admission::{
    AccessReviewer, AdmissionError, AdmissionState, KubeAccessReviewer, KubeUserLister, UserCache,
    UserLister, controller_identity, operations, users,
};
use k8s_openapi::api::authentication::v1::UserInfo;
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::{Denied, assert_denied, outcome};

type Script = Arc<dyn Fn(Method, String, Value) -> Option<(u16, Value)> + Send + Sync>;

/// Every request a scripted client saw: method, path and query, JSON body.
type Seen = Arc<Mutex<Vec<(Method, String, Value)>>>;

/// A kube client whose HTTP side answers with `script(method, path?query, body)`; `None` never
/// answers (a hung apiserver). Every request is recorded.
fn scripted_client(script: Script) -> (kube::Client, Seen) {
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let service = tower::service_fn(move |request: Request<kube::client::Body>| {
        let script = script.clone();
        let log = log.clone();
        async move {
            let method = request.method().clone();
            let path = request
                .uri()
                .path_and_query()
                .map(ToString::to_string)
                .unwrap_or_default();
            let bytes = request.into_body().collect().await.unwrap().to_bytes();
            let body: Value = if bytes.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&bytes).unwrap()
            };
            log.lock()
                .unwrap()
                .push((method.clone(), path.clone(), body.clone()));
            match script(method, path, body) {
                Some((status, answer)) => Ok::<_, Infallible>(
                    Response::builder()
                        .status(status)
                        .header("content-type", "application/json")
                        .body(Full::new(Bytes::from(serde_json::to_vec(&answer).unwrap())))
                        .unwrap(),
                ),
                None => std::future::pending().await,
            }
        }
    });
    (kube::Client::new(service, "default"), seen)
}

/// A client that answers every request with `status` and `answer`.
fn answering(status: u16, answer: Value) -> kube::Client {
    scripted_client(Arc::new(move |_, _, _| Some((status, answer.clone())))).0
}

/// A client that never answers.
fn hung() -> kube::Client {
    scripted_client(Arc::new(|_, _, _| None)).0
}

/// A client that answers each `SubjectAccessReview` with `allowed` and `denied`.
fn reviewing(allowed: bool, denied: Option<bool>) -> (kube::Client, Seen) {
    scripted_client(Arc::new(move |_, _, body| {
        let mut answer = body;
        answer["status"] = json!({"allowed": allowed});
        if let Some(d) = denied {
            answer["status"]["denied"] = json!(d);
        }
        Some((201, answer))
    }))
}

fn alice() -> UserInfo {
    UserInfo {
        username: Some("ichor:alice".to_owned()),
        uid: Some("u-1".to_owned()),
        groups: Some(vec!["ichor:operator".to_owned()]),
        extra: Some(BTreeMap::from([("scopes".to_owned(), vec!["a".to_owned()])])),
    }
}

/// A `shutdown` operation created by root, decided with `reviewer`.
async fn start_shutdown(reviewer: Arc<dyn AccessReviewer>) -> Result<(), String> {
    let state = AdmissionState::new(
        reviewer,
        Arc::new(FakeLister::default()),
        controller_identity(NAMESPACE),
    );
    let new = operation("shutdown", None);
    let request = fixtures::request(operations::KIND, "CREATE", &ROOT, new, Value::Null).unwrap();
    outcome(operations::review(&state, &request).await)
}

// === The SubjectAccessReview ===

#[tokio::test]
async fn the_kube_reviewer_posts_a_subject_access_review_for_the_requests_user() {
    let (client, seen) = reviewing(true, None);
    let reviewer = KubeAccessReviewer::new(client);
    let attrs = ichor_attributes("start", "talosoperations", "etcd-restore", NAMESPACE, "op-1");
    assert!(reviewer.allowed(&alice(), &attrs).await.unwrap());
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    let (method, path, body) = &seen[0];
    assert_eq!(method, Method::POST);
    assert!(
        path.starts_with("/apis/authorization.k8s.io/v1/subjectaccessreviews"),
        "{path}"
    );
    assert_eq!(
        *body,
        serde_json::to_value(subject_access_review(&alice(), &attrs)).unwrap()
    );
    assert_eq!(body["spec"]["user"], "ichor:alice");
    assert_eq!(body["spec"]["uid"], "u-1");
    assert_eq!(body["spec"]["groups"], json!(["ichor:operator"]));
    assert_eq!(body["spec"]["extra"], json!({"scopes": ["a"]}));
    assert_eq!(
        body["spec"]["resourceAttributes"],
        json!({"group": "ichor.maesh.dev", "name": "op-1", "namespace": NAMESPACE, "resource": "talosoperations", "subresource": "etcd-restore", "verb": "start"})
    );
}

#[tokio::test]
async fn the_kube_reviewer_reads_denied_and_not_allowed_as_no() {
    for (allowed, denied) in [(false, None), (false, Some(true)), (true, Some(true))] {
        let attrs = ichor_attributes("update", "talosclusters", "authentication", NAMESPACE, "prod");
        let reviewer = KubeAccessReviewer::new(reviewing(allowed, denied).0);
        assert!(
            !reviewer.allowed(&alice(), &attrs).await.unwrap(),
            "{allowed} {denied:?}"
        );
    }
}

#[tokio::test]
async fn the_kube_reviewer_reports_an_apiserver_error() {
    let client = answering(
        403,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "subjectaccessreviews is forbidden", "reason": "Forbidden", "code": 403}),
    );
    let attrs = ichor_attributes("update", "talosclusters", "authentication", NAMESPACE, "prod");
    let error = KubeAccessReviewer::new(client)
        .allowed(&alice(), &attrs)
        .await
        .unwrap_err();
    assert!(matches!(error, AdmissionError::AccessReview(_)), "{error:?}");
    assert!(
        error
            .to_string()
            .starts_with("authorization could not be checked"),
        "{error}"
    );
}

#[tokio::test]
async fn a_hung_subject_access_review_times_out_and_the_webhook_refuses() {
    let reviewer = Arc::new(KubeAccessReviewer::with_timeout(
        hung(),
        Duration::from_millis(200),
    ));
    let attrs = ichor_attributes("start", "talosoperations", "shutdown", NAMESPACE, "op-1");
    let error = reviewer.allowed(&alice(), &attrs).await.unwrap_err();
    assert!(
        matches!(error, AdmissionError::AccessReviewTimeout(_)),
        "{error:?}"
    );
    assert_denied(
        start_shutdown(reviewer).await,
        &[Denied::Contains(
            "authorization could not be checked: the SubjectAccessReview did not answer within 200ms",
        )],
    );
}

#[tokio::test]
async fn a_granted_subject_access_review_through_kube_admits_the_request() {
    let reviewer = Arc::new(KubeAccessReviewer::new(reviewing(true, None).0));
    assert_eq!(start_shutdown(reviewer).await, Ok(()));
}

// === The user cache and the fresh read ===

/// A cache of the fixture namespace that completed its list with these users.
fn synced_cache(users: &[(&str, &[&str], bool)]) -> UserCache {
    let (cache, mut feed) = UserCache::new(NAMESPACE);
    feed.apply(&watcher::Event::Init);
    for (name, roles, disabled) in users {
        feed.apply(&watcher::Event::InitApply(user_object(name, roles, *disabled)));
    }
    feed.apply(&watcher::Event::InitDone);
    cache
}

fn not_found() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "ichorusers \"dee\" not found", "reason": "NotFound", "code": 404})
}

#[tokio::test]
async fn the_kube_lister_reads_one_user_fresh_from_the_apiserver() {
    let (client, seen) = scripted_client(Arc::new(|method, _, _| {
        assert_eq!(method, Method::GET);
        Some((
            200,
            serde_json::to_value(user_object("dee", &["admin"], true)).unwrap(),
        ))
    }));
    let lister = KubeUserLister::new(client, synced_cache(&[]));
    let dee = lister.read_user(NAMESPACE, "dee").await.unwrap().unwrap();
    assert!(dee.spec.disabled);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].1, "/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/ichorusers/dee",
        "a GET with no resourceVersion: a quorum read of the latest state"
    );
}

#[tokio::test]
async fn the_kube_lister_finds_a_requester_in_its_cache_and_reads_one_the_cache_lacks() {
    let (client, seen) = scripted_client(Arc::new(|_, _, _| {
        Some((
            200,
            serde_json::to_value(user_object("newcomer", &["operator"], false)).unwrap(),
        ))
    }));
    let lister = KubeUserLister::new(client, synced_cache(&[("ann", &["admin"], true)]));
    let ann = lister.requester(NAMESPACE, "ann").await.unwrap().unwrap();
    assert!(ann.spec.disabled, "the cache's copy");
    assert!(
        seen.lock().unwrap().is_empty(),
        "a cached requester needs no read"
    );
    let newcomer = lister.requester(NAMESPACE, "newcomer").await.unwrap().unwrap();
    assert_eq!(newcomer.spec.roles, ["operator"]);
    assert_eq!(
        seen.lock().unwrap()[0].1,
        "/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/ichorusers/newcomer"
    );
    // A cache that never synced refuses, with no read.
    let (unsynced, _feed) = UserCache::new(NAMESPACE);
    assert!(matches!(
        KubeUserLister::new(hung(), unsynced)
            .requester(NAMESPACE, "ann")
            .await,
        Err(AdmissionError::UsersNotSynced)
    ));
}

#[tokio::test]
async fn the_kube_lister_reads_a_requester_fresh_even_when_its_cache_holds_it() {
    let (client, seen) = scripted_client(Arc::new(|_, _, _| {
        Some((
            200,
            serde_json::to_value(user_object("bea", &["operator"], false)).unwrap(),
        ))
    }));
    let lister = KubeUserLister::new(client, synced_cache(&[("bea", &["admin"], false)]));
    let bea = lister.fresh_requester(NAMESPACE, "bea").await.unwrap().unwrap();
    assert_eq!(
        bea.spec.roles,
        ["operator"],
        "the apiserver's copy, not the cache's"
    );
    assert_eq!(
        seen.lock().unwrap()[0].1,
        "/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/ichorusers/bea"
    );
    let error = KubeUserLister::new(hung(), synced_cache(&[("bea", &["admin"], false)]))
        .with_timeout(Duration::from_millis(100))
        .fresh_requester(NAMESPACE, "bea")
        .await
        .unwrap_err();
    assert!(
        matches!(&error, AdmissionError::ReadRequester { name, reason } if name == "bea" && reason.contains("no answer within 100ms")),
        "{error:?}"
    );
}

#[tokio::test]
async fn the_kube_lister_reads_a_missing_user_as_none_and_fails_closed_on_errors() {
    let lister = KubeUserLister::new(answering(404, not_found()), synced_cache(&[]));
    assert!(lister.read_user(NAMESPACE, "dee").await.unwrap().is_none());

    let client = answering(
        500,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "etcdserver: request timed out", "code": 500}),
    );
    let error = KubeUserLister::new(client, synced_cache(&[]))
        .read_user(NAMESPACE, "dee")
        .await
        .unwrap_err();
    assert!(
        matches!(&error, AdmissionError::ReadUser { name, reason } if name == "dee" && reason.contains("etcdserver")),
        "{error:?}"
    );
    let error = KubeUserLister::new(hung(), synced_cache(&[]))
        .with_timeout(Duration::from_millis(100))
        .read_user(NAMESPACE, "dee")
        .await
        .unwrap_err();
    assert!(
        matches!(&error, AdmissionError::ReadUser { reason, .. } if reason.contains("no answer within 100ms")),
        "{error:?}"
    );
}

/// Ann, an enabled admin, deleted by root, decided through `lister`.
async fn delete_ann(lister: KubeUserLister) -> Result<(), String> {
    let state = AdmissionState::new(
        Arc::new(FakeReviewer::default()),
        Arc::new(lister),
        controller_identity(NAMESPACE),
    );
    let old = user("ann", &["admin"], false);
    // A requester held to the last-admin rule whose own user is not looked up (not `ichor:`).
    let deployer = Who {
        user: "system:serviceaccount:ichor-system:deployer",
        groups: &["system:serviceaccounts", "system:authenticated"],
    };
    let request = fixtures::request(users::KIND, "DELETE", &deployer, Value::Null, old).unwrap();
    outcome(users::review(&state, &request).await)
}

#[tokio::test]
async fn a_demotion_the_cache_has_not_seen_yet_is_caught_by_the_fresh_read() {
    // The cache still holds dee as an enabled admin; the apiserver has her disabled already
    // (a concurrent demotion a moment ago): deleting ann would leave no enabled admin.
    let cache = synced_cache(&[("ann", &["admin"], false), ("dee", &["admin"], false)]);
    let (client, seen) = scripted_client(Arc::new(|_, path, _| {
        assert!(path.ends_with("/ichorusers/dee"), "{path}");
        Some((
            200,
            serde_json::to_value(user_object("dee", &["admin"], true)).unwrap(),
        ))
    }));
    assert_denied(
        delete_ann(KubeUserLister::new(client, cache.clone())).await,
        &[Denied::Contains("last enabled admin \"ann\"")],
    );
    assert_eq!(seen.lock().unwrap().len(), 1, "one read of the one candidate");

    // Gone meanwhile: refused as well.
    assert_denied(
        delete_ann(KubeUserLister::new(answering(404, not_found()), cache.clone())).await,
        &[Denied::Contains("last enabled admin \"ann\"")],
    );
    // Still an enabled admin: allowed.
    let still = serde_json::to_value(user_object("dee", &["admin"], false)).unwrap();
    assert_eq!(
        delete_ann(KubeUserLister::new(answering(200, still), cache)).await,
        Ok(())
    );
}

#[tokio::test]
async fn the_kube_lister_refuses_until_its_cache_synced_and_for_another_namespace() {
    let (cache, _feed) = UserCache::new(NAMESPACE);
    let lister = KubeUserLister::new(hung(), cache);
    assert!(matches!(
        lister.cached_users(NAMESPACE),
        Err(AdmissionError::UsersNotSynced)
    ));
    assert_denied(
        delete_ann(lister).await,
        &[
            Denied::Contains("IchorUser objects are not known yet"),
            Denied::Contains("refused until it can be checked"),
        ],
    );
    let lister = KubeUserLister::new(hung(), synced_cache(&[]));
    assert!(matches!(
        lister.cached_users("team-a"),
        Err(AdmissionError::UsersNotWatched(ns)) if ns == "team-a"
    ));
}
