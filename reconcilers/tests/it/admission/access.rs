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
use ichor_controller::admission::access::{ichor_attributes, subject_access_review};
use ichor_controller::admission::fixtures::{
    self, FakeLister, FakeReviewer, NAMESPACE, ROOT, Who, operation, user, user_object,
};
use ichor_controller::admission::{
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

// === The credentials entry: the user's own Secret, then the legacy one ===

const OWN_PATH: &str = "/api/v1/namespaces/ichor-credentials/secrets/ichor-user-dee";
const LEGACY_PATH: &str = "/api/v1/namespaces/ichor-system/secrets/ichor-user-credentials";

fn entry_b64(name: &str) -> String {
    use base64::Engine as _;
    let entry = ichor_renderers::auth::credentials::CredentialsEntry::new(
        ichor_renderers::auth::hash::DUMMY_PHC.to_owned(),
        jiff::Timestamp::now(),
        false,
    );
    base64::engine::general_purpose::STANDARD.encode(entry.to_json(name).unwrap())
}

fn secret_not_found(name: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": format!("secrets \"{name}\" not found"), "reason": "NotFound", "code": 404})
}

fn paths(seen: &Seen) -> Vec<String> {
    seen.lock().unwrap().iter().map(|(_, p, _)| p.clone()).collect()
}

#[tokio::test]
async fn the_kube_lister_reads_a_users_own_credentials_secret_before_the_legacy_one() {
    let (client, seen) = scripted_client(Arc::new(|method, path, _| {
        assert_eq!(method, Method::GET);
        assert_eq!(
            path, OWN_PATH,
            "the legacy Secret is not read when the own one answers"
        );
        Some((
            200,
            json!({"apiVersion": "v1", "kind": "Secret", "type": "ichor.maesh.dev/user-credentials",
                "metadata": {"name": "ichor-user-dee", "namespace": "ichor-credentials"},
                "data": {"entry": entry_b64("dee")}}),
        ))
    }));
    let lister = KubeUserLister::new(client, synced_cache(&[]));
    let found = lister.read_credentials(NAMESPACE, "dee").await.unwrap();
    assert!(
        found.is_some(),
        "an entry in the own Secret is stored credentials"
    );
    assert_eq!(paths(&seen), [OWN_PATH]);
}

#[tokio::test]
async fn without_an_own_secret_the_kube_lister_reads_the_legacy_key() {
    for (legacy_keys, stored) in [
        (json!({"dee": entry_b64("dee")}), true),
        (json!({"eve": entry_b64("eve")}), false),
    ] {
        let answer = legacy_keys.clone();
        let (client, seen) = scripted_client(Arc::new(move |_, path, _| match path.as_str() {
            OWN_PATH => Some((404, secret_not_found("ichor-user-dee"))),
            LEGACY_PATH => Some((
                200,
                json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": "ichor-user-credentials", "namespace": NAMESPACE},
                    "data": answer}),
            )),
            other => panic!("unexpected read of {other}"),
        }));
        let lister = KubeUserLister::new(client, synced_cache(&[]));
        let found = lister.read_credentials(NAMESPACE, "dee").await.unwrap();
        assert_eq!(found.is_some(), stored, "{legacy_keys}");
        // Found in the legacy Secret: two reads; not there either: the own Secret once more (a
        // move creates it before it removes the legacy key).
        if stored {
            assert_eq!(paths(&seen), [OWN_PATH, LEGACY_PATH]);
        } else {
            assert_eq!(paths(&seen), [OWN_PATH, LEGACY_PATH, OWN_PATH]);
        }
    }
}

#[tokio::test]
async fn a_key_moved_between_the_reads_is_found_in_the_own_secret_on_the_second_read() {
    let own_reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let reads = Arc::clone(&own_reads);
    let (client, seen) = scripted_client(Arc::new(move |_, path, _| match path.as_str() {
        // The first read finds no own Secret; the move then creates it and removes the key.
        OWN_PATH if reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 => {
            Some((404, secret_not_found("ichor-user-dee")))
        }
        OWN_PATH => Some((
            200,
            json!({"apiVersion": "v1", "kind": "Secret", "type": "ichor.maesh.dev/user-credentials",
                "metadata": {"name": "ichor-user-dee", "namespace": "ichor-credentials"},
                "data": {"entry": entry_b64("dee")}}),
        )),
        LEGACY_PATH => Some((
            200,
            json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": "ichor-user-credentials", "namespace": NAMESPACE},
                "data": {}}),
        )),
        other => panic!("unexpected read of {other}"),
    }));
    let lister = KubeUserLister::new(client, synced_cache(&[]));
    let found = lister.read_credentials(NAMESPACE, "dee").await.unwrap();
    assert!(found.is_some(), "the moved entry is stored credentials");
    assert_eq!(paths(&seen), [OWN_PATH, LEGACY_PATH, OWN_PATH]);
}

#[tokio::test]
async fn an_unparsable_stored_entry_refuses_without_quoting_it() {
    use base64::Engine as _;
    let (client, _seen) = scripted_client(Arc::new(|_, path, _| match path.as_str() {
        OWN_PATH => Some((
            200,
            json!({"apiVersion": "v1", "kind": "Secret", "type": "ichor.maesh.dev/user-credentials",
                "metadata": {"name": "ichor-user-dee", "namespace": "ichor-credentials"},
                // {"v":1,"hash":"s3cr3t-looking-value"}: a hash no parser accepts.
                "data": {"entry": base64::engine::general_purpose::STANDARD
                    .encode(br#"{"v":1,"hash":"s3cr3t-looking-value","unknown":"s3cr3t"}"#)}}),
        )),
        other => panic!("unexpected read of {other}"),
    }));
    let lister = KubeUserLister::new(client, synced_cache(&[]));
    let refused = lister
        .read_credentials(NAMESPACE, "dee")
        .await
        .expect_err("an unreadable entry is not taken for none");
    let text = refused.to_string();
    assert!(text.contains("cannot be read"), "{text}");
    assert!(!text.contains("s3cr3t"), "the denial quotes the entry: {text}");
}

#[tokio::test]
async fn a_refused_read_of_the_own_secret_fails_closed() {
    // No Role in the credentials namespace (or no namespace and so no Role): 403, never "none".
    let (client, seen) = scripted_client(Arc::new(|_, _, _| {
        Some((
            403,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
                "message": "secrets \"ichor-user-dee\" is forbidden", "code": 403}),
        ))
    }));
    let error = KubeUserLister::new(client, synced_cache(&[]))
        .read_credentials(NAMESPACE, "dee")
        .await
        .unwrap_err();
    assert!(
        matches!(&error, AdmissionError::ReadCredentials { name, reason }
            if name == "dee" && reason.contains("ichor-credentials/ichor-user-dee") && reason.contains("forbidden")),
        "{error:?}"
    );
    assert_eq!(paths(&seen), [OWN_PATH], "no fallback to the legacy Secret");
    // An own Secret without its entry is no answer either.
    let client = answering(
        200,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ichor-user-dee"}, "data": {}}),
    );
    let error = KubeUserLister::new(client, synced_cache(&[]))
        .read_credentials(NAMESPACE, "dee")
        .await
        .unwrap_err();
    assert!(
        matches!(&error, AdmissionError::ReadCredentials { reason, .. } if reason.contains("holds no \"entry\"")),
        "{error:?}"
    );
}

#[tokio::test]
async fn creating_a_user_over_its_own_stored_secret_is_refused() {
    for own_stored in [true, false] {
        let (client, _seen) = scripted_client(Arc::new(move |_, path, _| {
            if path.ends_with("/ichorusers/root") {
                // The requester, read fresh: an enabled admin.
                Some((
                    200,
                    serde_json::to_value(user_object("root", &["admin"], false)).unwrap(),
                ))
            } else if path == OWN_PATH && own_stored {
                Some((
                    200,
                    json!({"apiVersion": "v1", "kind": "Secret",
                        "metadata": {"name": "ichor-user-dee", "namespace": "ichor-credentials"},
                        "data": {"entry": entry_b64("dee")}}),
                ))
            } else {
                Some((404, secret_not_found("x")))
            }
        }));
        let state = AdmissionState::new(
            Arc::new(FakeReviewer::default()),
            Arc::new(KubeUserLister::new(
                client,
                synced_cache(&[("root", &["admin"], false)]),
            )),
            controller_identity(NAMESPACE),
        );
        let request = fixtures::request(
            users::KIND,
            "CREATE",
            &ROOT,
            user("dee", &["viewer"], false),
            Value::Null,
        )
        .unwrap();
        let verdict = outcome(users::review(&state, &request).await);
        if own_stored {
            let refusal = verdict.unwrap_err();
            assert!(
                refusal.starts_with(
                    "metadata.name: the credentials of an earlier user \"dee\" are still stored"
                ),
                "{refusal}"
            );
        } else {
            assert_eq!(verdict, Ok(()));
        }
    }
}
