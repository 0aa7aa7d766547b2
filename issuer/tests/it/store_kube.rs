//! The cluster-mode store against a fake Kubernetes API that speaks the real HTTP/JSON wire
//! format, for what a real apiserver cannot show or be made to do: how many requests a read
//! makes (credentials never cached, users cached for at most ten seconds, the list paged), an
//! unreachable API, a proxy's plain-text error and a 422 naming a field. Writes and their
//! conflicts run on a real apiserver (`tests/cluster/store.rs`); this fake applies no patch.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use base64::Engine as _;
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use ichor_issuer::store::{StoreError, UserStore, Version, kube::KubeStore};
use ichor_renderers::auth::credentials::CredentialsEntry;
use jiff::Timestamp;
use serde_json::{Value, json};

const SECRET_PATH: &str = "/api/v1/namespaces/ichor-system/secrets/ichor-user-credentials";
/// Where the users' own Secrets are (none exists in this fake: the legacy layout, phase `legacy`).
const USER_SECRETS_PATH: &str = "/api/v1/namespaces/ichor-credentials/secrets/";
const USERS_PATH: &str = "/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/ichorusers";
const HASH: &str = "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$SECRETHASHVALUE";
const FAMILY: &str = "fam1";

fn entry() -> CredentialsEntry {
    let now: Timestamp = "2026-11-05T10:00:00Z".parse().unwrap();
    ichor_testkit::issuer::harness::cli_family_entry(HASH, now, FAMILY, now)
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

#[derive(Default)]
struct State {
    resource_version: u64,
    /// The Secret's `data`, absent when the Secret does not exist.
    secret: Option<serde_json::Map<String, Value>>,
    users: BTreeMap<String, Value>,
    seen: Vec<Seen>,
    mode: Mode,
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
                "creationTimestamp": "2026-11-01T00:00:00Z",
                "annotations": {"ichor.maesh.dev/credentials-layout": "legacy"}
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

fn answer(state: &mut State, seen: &Seen) -> (StatusCode, Value) {
    if let Some(name) = seen.path.strip_prefix(USER_SECRETS_PATH) {
        assert_eq!(
            seen.method,
            Method::GET,
            "the fake holds no per-user Secret to write"
        );
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            &format!("secrets \"{name}\" not found"),
        );
    }
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
        // The patch semantics (JSON Patch test, the resourceVersion precondition) are the real
        // apiserver's, tested on it (tests/cluster/store.rs); here only a fault is answered.
        return state
            .patch_answer
            .take()
            .expect("the fake applies no patch; tests/cluster/store.rs runs patches on a real apiserver");
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
            body.collect().await?;
            let seen = Seen {
                method: parts.method.clone(),
                path: parts.uri.path().to_owned(),
                query: parts.uri.query().unwrap_or_default().to_owned(),
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

#[tokio::test]
async fn every_credentials_read_gets_the_secrets_and_versions_the_users_entry_alone() {
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
    // Each read asks the user's own Secret first, then the legacy one; a key absent there asks
    // the user's own Secret once more (a move may have created it in between).
    let get = |path: &str| (Method::GET, path.to_owned());
    let alice = format!("{USER_SECRETS_PATH}ichor-user-alice");
    let bob = format!("{USER_SECRETS_PATH}ichor-user-bob");
    assert_eq!(
        requests(&state),
        vec![
            get(&alice),
            get(SECRET_PATH),
            get(&alice),
            get(SECRET_PATH),
            get(&bob),
            get(SECRET_PATH),
            get(&bob),
        ]
    );
}

#[tokio::test]
async fn a_422_naming_a_field_is_unavailable_not_a_conflict() {
    let state = shared(State::with_secret(&[("alice", &entry())]));
    // What the API server answers when the patched Secret fails validation (here: a key it
    // refuses; a `data` too long is a full Secret, `StoreError::Full`, shown in `cluster::full_secret`).
    state.lock().unwrap().patch_answer = Some((
        StatusCode::UNPROCESSABLE_ENTITY,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "Secret \"ichor-user-credentials\" is invalid: data[bad key]: Invalid value",
               "reason": "Invalid",
               "details": {"name": "ichor-user-credentials", "kind": "Secret",
                           "causes": [{"reason": "FieldValueInvalid", "message": "Invalid value",
                                       "field": "data[bad key]"}]},
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

#[tokio::test(start_paused = true)]
async fn a_missing_legacy_secret_is_not_asked_again_for_ten_seconds() {
    // A fresh installation: no legacy Secret, no per-user one for alice.
    let state = shared(State::default());
    let store = store(&state);
    let own = (Method::GET, format!("{USER_SECRETS_PATH}ichor-user-alice"));
    let legacy = (Method::GET, SECRET_PATH.to_owned());
    let (none, version) = store.read_credentials("alice").await.unwrap();
    assert_eq!((none, version.0.as_str()), (None, "absent-user"));
    assert_eq!(requests(&state), [own.clone(), legacy.clone(), own.clone()]);

    tokio::time::advance(Duration::from_millis(9_900)).await;
    store.read_credentials("alice").await.unwrap();
    assert_eq!(
        requests(&state)[3..],
        [own.clone(), own.clone()],
        "the legacy Secret's 404 is remembered"
    );

    tokio::time::advance(Duration::from_millis(100)).await;
    store.read_credentials("alice").await.unwrap();
    assert_eq!(
        requests(&state)[5..],
        [own.clone(), legacy, own],
        "asked again at 10 s"
    );
}

#[tokio::test]
async fn a_name_no_user_can_have_is_never_put_in_a_path() {
    let state = shared(State::with_secret(&[("alice", &entry())]));
    let store = store(&state);
    let (none, _) = store.read_credentials("../ichor-user-credentials").await.unwrap();
    assert_eq!(none, None);
    assert!(requests(&state).is_empty(), "{:?}", requests(&state));
}
