//! The cluster-mode store against a fake Kubernetes API that speaks the real HTTP/JSON wire
//! format: Secret and `IchorUser` objects, `Status` objects for 404, 409 and 422, JSON merge patch
//! (RFC 7386) with the `metadata.resourceVersion` precondition the API server applies, and JSON
//! Patch (RFC 6902) `test`/`replace`/`remove`, applied all or nothing, a failed operation
//! answered 422 as the API server does.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use base64::Engine as _;
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use ichor_issuer::store::{Change, StoreError, UserStore, Version, kube::KubeStore, modify_credentials};
use ichor_renderers::auth::credentials::CredentialsEntry;
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

const SECRET_PATH: &str = "/api/v1/namespaces/ichor-system/secrets/ichor-user-credentials";
const USERS_PATH: &str = "/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/ichorusers";
const HASH: &str = "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$SECRETHASHVALUE";
const FAMILY: &str = "fam1";

fn entry() -> CredentialsEntry {
    let now: Timestamp = "2026-11-05T10:00:00Z".parse().unwrap();
    CredentialsEntry::new(HASH.to_owned(), now, false)
        .start_family(
            FAMILY,
            "ichor-cli",
            "ichor-kube",
            now,
            SignedDuration::from_hours(12),
        )
        .unwrap()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// One request as the API server saw it.
#[derive(Clone, Debug)]
struct Seen {
    method: Method,
    path: String,
    query: String,
    content_type: Option<String>,
    body: Option<Value>,
}

/// How the fake answers, beyond behaving like an API server.
#[derive(Default)]
enum Mode {
    #[default]
    Normal,
    /// The connection fails (as a refused connection does).
    Unreachable,
    /// Every request gets this status with a plain-text body, as a proxy answers.
    Status(StatusCode),
}

type Hook = Box<dyn FnMut(&mut State) + Send>;

#[derive(Default)]
struct State {
    resource_version: u64,
    /// The Secret's `data`, absent when the Secret does not exist.
    secret: Option<serde_json::Map<String, Value>>,
    users: BTreeMap<String, Value>,
    seen: Vec<Seen>,
    mode: Mode,
    /// Run once before the next PATCH is applied: another replica writing in between.
    before_patch: Option<Hook>,
    /// The answer to the next PATCH instead of applying it.
    patch_answer: Option<(StatusCode, Value)>,
}

impl State {
    fn with_secret(data: &[(&str, &CredentialsEntry)]) -> Self {
        let mut map = serde_json::Map::new();
        for (user, entry) in data {
            map.insert(
                (*user).to_owned(),
                Value::String(b64(entry.to_json(user).unwrap().as_bytes())),
            );
        }
        Self {
            resource_version: 100,
            secret: Some(map),
            ..Self::default()
        }
    }

    fn secret_json(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "ichor-user-credentials",
                "namespace": "ichor-system",
                "uid": "0b1c2d3e-0000-4000-8000-000000000001",
                "resourceVersion": self.resource_version.to_string(),
                "creationTimestamp": "2026-11-01T00:00:00Z"
            },
            "type": "Opaque",
            "data": self.secret.clone().unwrap_or_default(),
        })
    }

    fn entry(&self, user: &str) -> Option<CredentialsEntry> {
        let value = self.secret.as_ref()?.get(user)?.as_str()?;
        let bytes = base64::engine::general_purpose::STANDARD.decode(value).unwrap();
        Some(CredentialsEntry::parse(user, &bytes).unwrap())
    }

    fn add_user(&mut self, name: &str, roles: &[&str], disabled: bool) {
        self.users.insert(
            name.to_owned(),
            json!({
                "apiVersion": "ichor.maesh.dev/v1alpha1",
                "kind": "IchorUser",
                "metadata": {"name": name, "namespace": "ichor-system", "resourceVersion": "7",
                             "uid": format!("uid-{name}")},
                "spec": {"displayName": format!("{name} display"), "roles": roles, "disabled": disabled},
            }),
        );
    }
}

fn status(code: StatusCode, reason: &str, message: &str) -> (StatusCode, Value) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason,
               "details": {"name": "ichor-user-credentials", "kind": "secrets"}, "code": code.as_u16()}),
    )
}

/// RFC 7386 JSON merge patch.
fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    let Value::Object(target) = target else {
        unreachable!()
    };
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// RFC 6902 JSON Patch (`test`, `replace`, `remove`, `add` on object members), all or nothing:
/// `target` is changed only when every operation applies.
fn json_patch(target: &mut Value, patch: &Value) -> Result<(), String> {
    let mut patched = target.clone();
    for op in patch.as_array().ok_or("the patch is not an array")? {
        let path = op["path"].as_str().ok_or("an operation without a path")?;
        let (parent, key) = path.rsplit_once('/').ok_or("a path without a slash")?;
        let key = key.replace("~1", "/").replace("~0", "~");
        let container = patched
            .pointer_mut(parent)
            .and_then(Value::as_object_mut)
            .ok_or_else(|| format!("doc is missing path: {parent:?}"))?;
        match op["op"].as_str() {
            Some("test") => {
                if container.get(&key) != Some(&op["value"]) {
                    return Err(format!("testing value {path} failed: test failed"));
                }
            }
            Some("replace") => {
                let slot = container
                    .get_mut(&key)
                    .ok_or_else(|| format!("replace operation does not apply: doc is missing key: {path}"))?;
                *slot = op["value"].clone();
            }
            Some("remove") => {
                container
                    .remove(&key)
                    .ok_or_else(|| format!("remove operation does not apply: doc is missing key: {path}"))?;
            }
            Some("add") => {
                container.insert(key, op["value"].clone());
            }
            other => return Err(format!("unexpected operation {other:?}")),
        }
    }
    *target = patched;
    Ok(())
}

fn answer(state: &mut State, seen: &Seen) -> (StatusCode, Value) {
    if seen.path == SECRET_PATH {
        if state.secret.is_none() {
            return status(
                StatusCode::NOT_FOUND,
                "NotFound",
                "secrets \"ichor-user-credentials\" not found",
            );
        }
        if seen.method == Method::GET {
            return (StatusCode::OK, state.secret_json());
        }
        assert_eq!(seen.method, Method::PATCH);
        if let Some(mut hook) = state.before_patch.take() {
            hook(state);
        }
        if let Some(answer) = state.patch_answer.take() {
            return answer;
        }
        let patch = seen.body.clone().unwrap();
        if seen.content_type.as_deref() == Some("application/json-patch+json") {
            let mut object = state.secret_json();
            if let Err(reason) = json_patch(&mut object, &patch) {
                // What the API server answers for a failed JSON Patch operation
                // (NewGenericServerResponse with 422): reason Invalid, a cause without a field.
                return (
                    StatusCode::UNPROCESSABLE_ENTITY,
                    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": format!("the server rejected our request due to an error in our request"),
                           "reason": "Invalid",
                           "details": {"causes": [{"reason": "UnexpectedServerResponse", "message": reason}]},
                           "code": 422}),
                );
            }
            state.secret = object["data"]
                .as_object()
                .cloned()
                .or_else(|| Some(serde_json::Map::new()));
            state.resource_version += 1;
            return (StatusCode::OK, state.secret_json());
        }
        assert_eq!(seen.content_type.as_deref(), Some("application/merge-patch+json"));
        let precondition = patch["metadata"]["resourceVersion"].as_str().map(str::to_owned);
        if precondition.is_some_and(|rv| rv != state.resource_version.to_string()) {
            return status(
                StatusCode::CONFLICT,
                "Conflict",
                "Operation cannot be fulfilled on secrets \"ichor-user-credentials\": the object has been \
                 modified; please apply your changes to the latest version and try again",
            );
        }
        let mut object = state.secret_json();
        merge(&mut object, &patch);
        state.secret = object["data"]
            .as_object()
            .cloned()
            .or_else(|| Some(serde_json::Map::new()));
        state.resource_version += 1;
        return (StatusCode::OK, state.secret_json());
    }
    if seen.path == USERS_PATH && seen.method == Method::GET {
        let items: Vec<Value> = state.users.values().cloned().collect();
        return (
            StatusCode::OK,
            json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUserList",
                   "metadata": {"resourceVersion": "9"}, "items": items}),
        );
    }
    if let Some(name) = seen.path.strip_prefix(&format!("{USERS_PATH}/")) {
        return match state.users.get(name) {
            Some(user) => (StatusCode::OK, user.clone()),
            None => status(
                StatusCode::NOT_FOUND,
                "NotFound",
                &format!("ichorusers.ichor.maesh.dev \"{name}\" not found"),
            ),
        };
    }
    panic!("unexpected request {seen:?}");
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A `KubeStore` whose client talks to the fake.
fn store(state: &Arc<Mutex<State>>) -> KubeStore {
    let state = Arc::clone(state);
    let service = tower::service_fn(move |request: Request<kube::client::Body>| {
        let state = Arc::clone(&state);
        async move {
            let (parts, body) = request.into_parts();
            let bytes = body.collect().await?.to_bytes();
            let seen = Seen {
                method: parts.method.clone(),
                path: parts.uri.path().to_owned(),
                query: parts.uri.query().unwrap_or_default().to_owned(),
                content_type: parts
                    .headers
                    .get(http::header::CONTENT_TYPE)
                    .map(|v| v.to_str().unwrap().to_owned()),
                body: (!bytes.is_empty()).then(|| serde_json::from_slice(&bytes).unwrap()),
            };
            let mut state = state.lock().unwrap();
            state.seen.push(seen.clone());
            let (code, value) = match state.mode {
                Mode::Unreachable => {
                    return Err::<Response<kube::client::Body>, BoxError>(Box::new(std::io::Error::new(
                        std::io::ErrorKind::ConnectionRefused,
                        "connection refused",
                    )));
                }
                Mode::Status(code) => {
                    let response = Response::builder()
                        .status(code)
                        .header("content-type", "text/plain")
                        .body(kube::client::Body::from(b"upstream connect error".to_vec()))?;
                    return Ok(response);
                }
                Mode::Normal => answer(&mut state, &seen),
            };
            let response = Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(serde_json::to_vec(&value)?))?;
            Ok(response)
        }
    });
    KubeStore::new(kube::Client::new(service, "ichor-system"))
}

fn requests(state: &Arc<Mutex<State>>) -> Vec<(Method, String)> {
    state
        .lock()
        .unwrap()
        .seen
        .iter()
        .map(|s| (s.method.clone(), s.path.clone()))
        .collect()
}

fn shared(state: State) -> Arc<Mutex<State>> {
    Arc::new(Mutex::new(state))
}

/// The version a read returns for a user whose entry is `entry`.
fn entry_version(user: &str, entry: &CredentialsEntry) -> Version {
    Version(format!("entry:{}", b64(entry.to_json(user).unwrap().as_bytes())))
}

/// Bumps the family generation of `user` by one through `modify_credentials`; returns it.
async fn bump(store: &KubeStore, user: &str) -> u64 {
    modify_credentials(store, user, |current| {
        let mut next = current.cloned().unwrap();
        let family = next.families.get_mut(FAMILY).unwrap();
        family.generation += 1;
        let generation = family.generation;
        Ok::<_, StoreError>(Change::Put(next, generation))
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn every_credentials_read_gets_the_secret_and_versions_the_users_entry_alone() {
    let state = shared(State::with_secret(&[("alice", &entry())]));
    let store = store(&state);
    let (first, version) = store.read_credentials("alice").await.unwrap();
    let (second, _) = store.read_credentials("alice").await.unwrap();
    assert_eq!(first, Some(entry()));
    assert_eq!(second, Some(entry()));
    assert_eq!(version, entry_version("alice", &entry()));
    assert_eq!(
        store.read_credentials("bob").await.unwrap(),
        (None, Version("absent@100".to_owned()))
    );
    assert_eq!(requests(&state), vec![(Method::GET, SECRET_PATH.to_owned()); 3]);
}

#[tokio::test]
async fn a_missing_secret_is_reported_as_missing() {
    let state = shared(State::default());
    let err = store(&state).read_credentials("alice").await.unwrap_err();
    assert!(matches!(err, StoreError::Missing(_)), "{err}");
    let err = store(&state)
        .write_credentials("alice", &Version("absent@1".to_owned()), Some(&entry()))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Missing(_)), "{err}");
}

#[tokio::test]
async fn a_first_write_is_a_merge_patch_of_one_key_guarded_by_the_resource_version() {
    let bob = entry().revoke_all("2026-11-06T00:00:00Z".parse().unwrap());
    let state = shared(State::with_secret(&[("bob", &bob)]));
    let store = store(&state);
    let (_, read) = store.read_credentials("alice").await.unwrap();
    let version = store
        .write_credentials("alice", &read, Some(&entry()))
        .await
        .unwrap();
    assert_eq!(version, entry_version("alice", &entry()));
    assert_eq!(store.read_credentials("alice").await.unwrap().1, version);
    let state = state.lock().unwrap();
    let patch = &state.seen[1];
    assert_eq!(patch.method, Method::PATCH);
    assert_eq!(patch.path, SECRET_PATH);
    assert!(
        patch.query.contains("fieldManager=ichor-issuer"),
        "{}",
        patch.query
    );
    assert_eq!(
        patch.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    let expected = json!({
        "metadata": {"resourceVersion": "100"},
        "data": {"alice": b64(entry().to_json("alice").unwrap().as_bytes())},
    });
    assert_eq!(patch.body.as_ref(), Some(&expected));
    assert_eq!(state.entry("alice"), Some(entry()));
    assert_eq!(state.entry("bob"), Some(bob), "the other user's key is untouched");
}

#[tokio::test]
async fn an_update_is_a_json_patch_testing_the_keys_value_as_read_then_replacing_it() {
    let bob = entry().revoke_all("2026-11-06T00:00:00Z".parse().unwrap());
    let state = shared(State::with_secret(&[("alice", &entry()), ("bob", &bob)]));
    let store = store(&state);
    let next = entry().revoke_all("2026-11-07T00:00:00Z".parse().unwrap());
    let version = store
        .write_credentials("alice", &entry_version("alice", &entry()), Some(&next))
        .await
        .unwrap();
    assert_eq!(version, entry_version("alice", &next));
    let state = state.lock().unwrap();
    let patch = state.seen.last().unwrap();
    assert_eq!(
        (&patch.method, patch.path.as_str()),
        (&Method::PATCH, SECRET_PATH)
    );
    assert!(
        patch.query.contains("fieldManager=ichor-issuer"),
        "{}",
        patch.query
    );
    assert_eq!(patch.content_type.as_deref(), Some("application/json-patch+json"));
    let expected = json!([
        {"op": "test", "path": "/data/alice", "value": b64(entry().to_json("alice").unwrap().as_bytes())},
        {"op": "replace", "path": "/data/alice", "value": b64(next.to_json("alice").unwrap().as_bytes())},
    ]);
    assert_eq!(patch.body.as_ref(), Some(&expected));
    assert_eq!(state.entry("alice"), Some(next));
    assert_eq!(state.entry("bob"), Some(bob), "the other user's key is untouched");
}

#[tokio::test]
async fn removing_an_entry_tests_its_value_then_removes_its_key() {
    let state = shared(State::with_secret(&[("alice", &entry()), ("bob", &entry())]));
    let version = store(&state)
        .write_credentials("alice", &entry_version("alice", &entry()), None)
        .await
        .unwrap();
    assert_eq!(version, Version("absent@101".to_owned()));
    let state = state.lock().unwrap();
    let body = state.seen.last().unwrap().body.clone().unwrap();
    assert_eq!(
        body,
        json!([
            {"op": "test", "path": "/data/alice", "value": b64(entry().to_json("alice").unwrap().as_bytes())},
            {"op": "remove", "path": "/data/alice"},
        ])
    );
    assert_eq!(state.entry("alice"), None);
    assert_eq!(state.entry("bob"), Some(entry()));
}

#[tokio::test]
async fn a_write_against_a_stale_entry_or_a_moved_resource_version_is_a_conflict() {
    let state = shared(State::with_secret(&[("alice", &entry())]));
    let stale = entry().revoke_all("2026-11-06T00:00:00Z".parse().unwrap());
    // The key holds another value than the one the version was read from: the test fails (422).
    let err = store(&state)
        .write_credentials("alice", &entry_version("alice", &stale), None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Conflict(ref u) if u == "alice"),
        "{err}"
    );
    // A user read as absent whose Secret moved on since (409).
    let err = store(&state)
        .write_credentials("carol", &Version("absent@99".to_owned()), Some(&entry()))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Conflict(ref u) if u == "carol"),
        "{err}"
    );
    // An empty resourceVersion would be no precondition at all, and an unknown version cannot be
    // current: both are refused before any request.
    for version in ["absent@", "", "100", "entry"] {
        let err = store(&state)
            .write_credentials("alice", &Version(version.to_owned()), None)
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Conflict(_)), "{version}: {err}");
    }
    let state = state.lock().unwrap();
    assert_eq!(state.seen.len(), 2);
    assert_eq!(state.entry("alice"), Some(entry()));
    assert_eq!(state.entry("carol"), None);
    assert_eq!(state.resource_version, 100);
}

#[tokio::test]
async fn a_422_naming_a_field_is_unavailable_not_a_conflict() {
    let state = shared(State::with_secret(&[("alice", &entry())]));
    // What the API server answers when the patched Secret fails validation (here: too large).
    state.lock().unwrap().patch_answer = Some((
        StatusCode::UNPROCESSABLE_ENTITY,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "Secret \"ichor-user-credentials\" is invalid: data: Too long",
               "reason": "Invalid",
               "details": {"name": "ichor-user-credentials", "kind": "Secret",
                           "causes": [{"reason": "FieldValueTooLong", "message": "Too long",
                                       "field": "data"}]},
               "code": 422}),
    ));
    let err = store(&state)
        .write_credentials("alice", &entry_version("alice", &entry()), None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
    assert!(err.to_string().contains("422"), "{err}");
    assert_eq!(state.lock().unwrap().entry("alice"), Some(entry()));
}

#[tokio::test]
async fn another_replicas_write_of_another_user_is_no_conflict() {
    let state = shared(State::with_secret(&[("alice", &entry())]));
    let other = entry().revoke_all("2026-11-06T00:00:00Z".parse().unwrap());
    let bob_value = b64(other.to_json("bob").unwrap().as_bytes());
    state.lock().unwrap().before_patch = Some(Box::new(move |state: &mut State| {
        // Another replica writes bob's key between our read and our patch.
        if let Some(data) = state.secret.as_mut() {
            data.insert("bob".to_owned(), Value::String(bob_value.clone()));
        }
        state.resource_version += 1;
    }));
    let store = store(&state);
    assert_eq!(bump(&store, "alice").await, 2);
    assert_eq!(
        requests(&state),
        vec![
            (Method::GET, SECRET_PATH.to_owned()),
            (Method::PATCH, SECRET_PATH.to_owned()),
        ]
    );
    let state = state.lock().unwrap();
    assert_eq!(
        state.entry("alice").unwrap().family(FAMILY).unwrap().generation,
        2
    );
    assert_eq!(state.entry("bob"), Some(other));
    assert_eq!(state.resource_version, 102);
}

#[tokio::test]
async fn a_conflict_is_retried_from_a_fresh_read_and_keeps_the_other_replicas_rotation() {
    let state = shared(State::with_secret(&[("alice", &entry())]));
    state.lock().unwrap().before_patch = Some(Box::new(move |state: &mut State| {
        // Another replica rotates alice's family between our read and our patch.
        let mut rotated = state.entry("alice").unwrap();
        rotated.families.get_mut(FAMILY).unwrap().generation += 1;
        let value = b64(rotated.to_json("alice").unwrap().as_bytes());
        state
            .secret
            .as_mut()
            .unwrap()
            .insert("alice".to_owned(), Value::String(value));
        state.resource_version += 1;
    }));
    let store = store(&state);
    assert_eq!(bump(&store, "alice").await, 3);
    assert_eq!(
        requests(&state),
        vec![
            (Method::GET, SECRET_PATH.to_owned()),
            (Method::PATCH, SECRET_PATH.to_owned()),
            (Method::GET, SECRET_PATH.to_owned()),
            (Method::PATCH, SECRET_PATH.to_owned()),
        ]
    );
    let state = state.lock().unwrap();
    let first_test = &state.seen[1].body.as_ref().unwrap()[0];
    assert_eq!(first_test["op"], "test");
    assert_eq!(
        first_test["value"],
        b64(entry().to_json("alice").unwrap().as_bytes())
    );
    assert_eq!(
        state.entry("alice").unwrap().family(FAMILY).unwrap().generation,
        3
    );
    assert_eq!(state.resource_version, 102);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_lose_no_rotation_under_concurrent_writers() {
    let state = shared(State::with_secret(&[("alice", &entry()), ("bob", &entry())]));
    let replicas = [Arc::new(store(&state)), Arc::new(store(&state))];
    let mut tasks = Vec::new();
    for (i, replica) in replicas.iter().enumerate() {
        for task in 0..3 {
            let replica = Arc::clone(replica);
            let user = if (i + task) % 3 == 0 { "bob" } else { "alice" };
            tasks.push(tokio::spawn(async move {
                for _ in 0..10 {
                    loop {
                        let result = modify_credentials(&*replica, user, |current| {
                            let mut next = current.cloned().unwrap();
                            next.families.get_mut(FAMILY).unwrap().generation += 1;
                            Ok::<_, StoreError>(Change::Put(next, ()))
                        })
                        .await;
                        match result {
                            Ok(()) => break,
                            Err(StoreError::Conflict(_)) => continue,
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
                user
            }));
        }
    }
    let mut expected: BTreeMap<&str, u64> = BTreeMap::from([("alice", 1), ("bob", 1)]);
    for task in tasks {
        *expected.get_mut(task.await.unwrap()).unwrap() += 10;
    }
    let state = state.lock().unwrap();
    for (user, generation) in expected {
        assert_eq!(
            state.entry(user).unwrap().family(FAMILY).unwrap().generation,
            generation,
            "{user}"
        );
    }
}

#[tokio::test]
async fn a_corrupt_entry_is_reported_without_its_content() {
    let state = shared(State::with_secret(&[]));
    let bad =
        br#"{"v":1,"hash":"$argon2id$LEAKEDHASH","notBefore":"2026-11-05T10:00:00Z","mustChange":"LEAKED"}"#;
    state
        .lock()
        .unwrap()
        .secret
        .as_mut()
        .unwrap()
        .insert("alice".to_owned(), Value::String(b64(bad)));
    let err = store(&state).read_credentials("alice").await.unwrap_err();
    assert!(
        matches!(err, StoreError::Corrupt { ref user, .. } if user == "alice"),
        "{err}"
    );
    assert!(!err.to_string().contains("LEAKED"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn user_reads_are_cached_for_at_most_ten_seconds() {
    let mut initial = State::default();
    initial.add_user("alice", &["admin"], false);
    let state = shared(initial);
    let store = store(&state);
    let get = (Method::GET, format!("{USERS_PATH}/alice"));

    assert!(!store.get_user("alice").await.unwrap().unwrap().disabled);
    state.lock().unwrap().add_user("alice", &["admin"], true);
    tokio::time::advance(Duration::from_millis(9_900)).await;
    assert!(
        !store.get_user("alice").await.unwrap().unwrap().disabled,
        "served from the cache"
    );
    assert_eq!(requests(&state), vec![get.clone()]);

    tokio::time::advance(Duration::from_millis(100)).await;
    assert!(
        store.get_user("alice").await.unwrap().unwrap().disabled,
        "read again at 10 s"
    );
    assert_eq!(requests(&state), vec![get.clone(), get.clone()]);

    state.lock().unwrap().add_user("alice", &["viewer"], true);
    store.invalidate("alice");
    assert_eq!(store.get_user("alice").await.unwrap().unwrap().roles, ["viewer"]);
    assert_eq!(requests(&state).len(), 3, "invalidate drops the cached read");
}

#[tokio::test(start_paused = true)]
async fn the_user_list_is_sorted_and_cached_for_at_most_ten_seconds() {
    let mut initial = State::default();
    initial.add_user("carol", &["viewer"], false);
    initial.add_user("alice", &["admin", "operator"], false);
    let state = shared(initial);
    let store = store(&state);
    let names =
        |users: Vec<ichor_issuer::store::StoredUser>| users.into_iter().map(|u| u.name).collect::<Vec<_>>();
    assert_eq!(names(store.list_users().await.unwrap()), ["alice", "carol"]);
    state.lock().unwrap().add_user("bob", &["viewer"], false);
    tokio::time::advance(Duration::from_secs(5)).await;
    assert_eq!(names(store.list_users().await.unwrap()), ["alice", "carol"]);
    tokio::time::advance(Duration::from_secs(5)).await;
    assert_eq!(
        names(store.list_users().await.unwrap()),
        ["alice", "bob", "carol"]
    );
    let seen = state.lock().unwrap().seen.clone();
    assert_eq!(seen.len(), 2);
    assert!(
        seen.iter()
            .all(|s| s.path == USERS_PATH && s.query.contains("limit=500"))
    );
    // The list filled the per-user cache: no further request for alice.
    let alice = store.get_user("alice").await.unwrap().unwrap();
    assert_eq!(alice.roles, ["admin", "operator"]);
    assert_eq!(state.lock().unwrap().seen.len(), 2);
}

#[tokio::test]
async fn an_unknown_user_is_none_and_an_invalid_name_is_not_even_asked() {
    let state = shared(State::default());
    let store = store(&state);
    assert_eq!(store.get_user("nobody").await.unwrap(), None);
    assert_eq!(store.get_user("../secrets").await.unwrap(), None);
    assert_eq!(
        requests(&state),
        vec![(Method::GET, format!("{USERS_PATH}/nobody"))]
    );
}

#[tokio::test]
async fn an_unreachable_api_is_unavailable() {
    let state = shared(State::with_secret(&[("alice", &entry())]));
    state.lock().unwrap().mode = Mode::Unreachable;
    let store = store(&state);
    let err = store.read_credentials("alice").await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
    let err = store.get_user("alice").await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
    let err = store
        .write_credentials("alice", &Version("absent@100".to_owned()), Some(&entry()))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
}

#[tokio::test]
async fn a_server_error_is_unavailable_and_names_the_status() {
    let state = shared(State::with_secret(&[("alice", &entry())]));
    state.lock().unwrap().mode = Mode::Status(StatusCode::SERVICE_UNAVAILABLE);
    let store = store(&state);
    let err = store.read_credentials("alice").await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
    assert!(err.to_string().contains("503"), "{err}");
    let err = store.list_users().await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
}
