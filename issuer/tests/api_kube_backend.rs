//! The cluster `UserBackend` (`KubeStore`) against a scripted kube-apiserver speaking the real
//! wire format: the impersonation headers of every write, the bodies (spec only, never status),
//! the `resourceVersion` precondition and its conflict retry, and how 404, 409, 403 (a webhook
//! denial, passed through) and 422 map to API errors; then the `UserService` over it (a failed
//! create leaves nothing behind) and the `--store kube` routers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod api_common;

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{Arc, Mutex},
};

use api_common::{build_api, t0};
use base64::Engine as _;
use http::{Method, Request, Response};
use http_body_util::BodyExt as _;
use ichor_issuer::{
    api::{
        ApiError, Caller, UserBackend,
        kube_backend::MAX_UPDATE_ATTEMPTS,
        proto::{CreateUserRequest, create_user_request::InitialPassword},
    },
    store::{UserStore, kube::KubeStore},
};
use ichor_renderers::{
    auth::{credentials::CredentialsEntry, roles::check_grant},
    crd::{IchorUser, IchorUserSpec, NAMESPACE},
};
use serde_json::{Value, json};
use tonic::Code;

const USERS_PATH: &str = "/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/ichorusers";
const SECRET_PATH: &str = "/api/v1/namespaces/ichor-system/secrets/ichor-user-credentials";

/// One request as the fake API server saw it.
#[derive(Clone, Debug)]
struct Seen {
    method: Method,
    path: String,
    query: String,
    user: Option<String>,
    groups: Vec<String>,
    body: Option<Value>,
}

#[derive(Default)]
struct State {
    resource_version: u64,
    users: BTreeMap<String, Value>,
    /// The credentials Secret's data (absent: no Secret).
    secret: Option<serde_json::Map<String, Value>>,
    seen: Vec<Seen>,
    /// Answers given to the next writes of IchorUsers (POST, PUT, DELETE) instead of applying them.
    scripted: VecDeque<(u16, Value)>,
    /// How many PUTs are answered 409 after another writer bumped the object.
    conflicting_puts: usize,
    /// Answer every PATCH of the Secret with a 500.
    fail_secret_writes: bool,
}

impl State {
    fn next_version(&mut self) -> String {
        self.resource_version += 1;
        self.resource_version.to_string()
    }

    fn add_user(&mut self, name: &str, roles: &[&str]) {
        let rv = self.next_version();
        self.users.insert(
            name.to_owned(),
            json!({
                "apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
                "metadata": {"name": name, "namespace": NAMESPACE, "resourceVersion": rv,
                             "uid": format!("uid-{name}"), "labels": {"team": "platform"},
                             "managedFields": [{"manager": "kubectl", "operation": "Update"}]},
                "spec": {"roles": roles, "disabled": false},
                "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ok",
                           "message": "", "lastTransitionTime": "2026-11-01T00:00:00Z"}]},
            }),
        );
    }

    fn set_entry(&mut self, name: &str, entry: &CredentialsEntry) {
        let value = base64::engine::general_purpose::STANDARD.encode(entry.to_json(name).unwrap());
        self.secret
            .get_or_insert_with(Default::default)
            .insert(name.to_owned(), Value::String(value));
    }

    fn secret_json(&self) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "ichor-user-credentials", "namespace": NAMESPACE,
                            "resourceVersion": self.resource_version.to_string()},
               "data": self.secret.clone().unwrap_or_default()})
    }
}

fn status(code: u16, reason: &str, message: &str) -> (u16, Value) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason, "code": code}),
    )
}

fn answer(state: &mut State, seen: &Seen) -> (u16, Value) {
    if seen.path == SECRET_PATH {
        let Some(_) = state.secret else {
            return status(404, "NotFound", "secrets \"ichor-user-credentials\" not found");
        };
        if seen.method == Method::GET {
            return (200, state.secret_json());
        }
        assert_eq!(seen.method, Method::PATCH);
        if state.fail_secret_writes {
            return status(500, "InternalError", "etcdserver: request timed out");
        }
        let patch = seen.body.clone().unwrap();
        for (key, value) in patch["data"].as_object().unwrap() {
            let data = state.secret.as_mut().unwrap();
            if value.is_null() {
                data.remove(key);
            } else {
                data.insert(key.clone(), value.clone());
            }
        }
        state.next_version();
        return (200, state.secret_json());
    }
    let is_write = matches!(seen.method, Method::POST | Method::PUT | Method::DELETE);
    if is_write && let Some(scripted) = state.scripted.pop_front() {
        return scripted;
    }
    if seen.path == USERS_PATH {
        if seen.method == Method::GET {
            let items: Vec<Value> = state.users.values().cloned().collect();
            return (
                200,
                json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUserList",
                       "metadata": {"resourceVersion": "1"}, "items": items}),
            );
        }
        assert_eq!(seen.method, Method::POST);
        let mut object = seen.body.clone().unwrap();
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        if state.users.contains_key(&name) {
            return status(
                409,
                "AlreadyExists",
                &format!("ichorusers.ichor.maesh.dev \"{name}\" already exists"),
            );
        }
        object["metadata"]["resourceVersion"] = Value::String(state.next_version());
        object["metadata"]["uid"] = Value::String(format!("uid-{name}"));
        state.users.insert(name, object.clone());
        return (201, object);
    }
    let name = seen
        .path
        .strip_prefix(&format!("{USERS_PATH}/"))
        .unwrap_or_else(|| panic!("unexpected request {seen:?}"))
        .to_owned();
    let not_found = || {
        status(
            404,
            "NotFound",
            &format!("ichorusers.ichor.maesh.dev \"{name}\" not found"),
        )
    };
    match seen.method.clone() {
        Method::GET => state.users.get(&name).map_or_else(not_found, |u| (200, u.clone())),
        Method::DELETE => match state.users.remove(&name) {
            Some(_) => (200, json!({"kind": "Status", "apiVersion": "v1", "status": "Success"})),
            None => not_found(),
        },
        Method::PUT => {
            if !state.users.contains_key(&name) {
                return not_found();
            }
            if state.conflicting_puts > 0 {
                state.conflicting_puts -= 1;
                // Another writer got there first.
                let rv = state.next_version();
                state.users.get_mut(&name).unwrap()["metadata"]["resourceVersion"] = Value::String(rv);
                return status(
                    409,
                    "Conflict",
                    &format!(
                        "Operation cannot be fulfilled on ichorusers.ichor.maesh.dev \"{name}\": the object \
                         has been modified; please apply your changes to the latest version and try again"
                    ),
                );
            }
            let body = seen.body.clone().unwrap();
            let current = &state.users[&name];
            if body["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"] {
                return status(409, "Conflict", "the object has been modified");
            }
            let mut object = body;
            object["metadata"]["resourceVersion"] = Value::String(state.next_version());
            state.users.insert(name, object.clone());
            (200, object)
        }
        other => panic!("unexpected method {other}"),
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn client(state: &Arc<Mutex<State>>) -> kube::Client {
    let state = Arc::clone(state);
    let service = tower::service_fn(move |request: Request<kube::client::Body>| {
        let state = Arc::clone(&state);
        async move {
            let (parts, body) = request.into_parts();
            let bytes = body.collect().await?.to_bytes();
            let header = |name: &str| {
                parts
                    .headers
                    .get_all(name)
                    .iter()
                    .map(|v| v.to_str().unwrap().to_owned())
                    .collect::<Vec<_>>()
            };
            let seen = Seen {
                method: parts.method.clone(),
                path: parts.uri.path().to_owned(),
                query: parts.uri.query().unwrap_or_default().to_owned(),
                user: header("impersonate-user").into_iter().next(),
                groups: header("impersonate-group"),
                body: (!bytes.is_empty()).then(|| serde_json::from_slice(&bytes).unwrap()),
            };
            let mut state = state.lock().unwrap();
            state.seen.push(seen.clone());
            let (code, value) = answer(&mut state, &seen);
            let response = Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(serde_json::to_vec(&value)?))?;
            Ok::<_, BoxError>(response)
        }
    });
    kube::Client::new(service, NAMESPACE)
}

fn store(state: &Arc<Mutex<State>>) -> KubeStore {
    KubeStore::new(client(state)).with_user_ttl(std::time::Duration::ZERO)
}

fn shared(state: State) -> Arc<Mutex<State>> {
    Arc::new(Mutex::new(state))
}

fn caller(name: &str, roles: &[&str]) -> Caller {
    Caller {
        name: name.into(),
        roles: roles.iter().map(|r| (*r).to_owned()).collect(),
        display_name: None,
        email: None,
        must_change: false,
    }
}

fn user(name: &str, roles: &[&str]) -> IchorUser {
    let mut user = IchorUser::new(
        name,
        IchorUserSpec {
            display_name: Some(format!("{name} display")),
            email: None,
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
            disabled: false,
        },
    );
    user.metadata.namespace = Some(NAMESPACE.into());
    user
}

fn writes(state: &Arc<Mutex<State>>) -> Vec<Seen> {
    state
        .lock()
        .unwrap()
        .seen
        .iter()
        .filter(|s| s.path.starts_with(USERS_PATH) && s.method != Method::GET)
        .cloned()
        .collect()
}

fn assert_as_alice_the_admin(seen: &Seen) {
    assert_eq!(seen.user.as_deref(), Some("ichor:alice"), "{seen:?}");
    assert_eq!(seen.groups, ["ichor:admin"], "{seen:?}");
}

#[tokio::test]
async fn creates_the_user_as_the_caller_with_a_body_of_metadata_and_spec_only() {
    let state = shared(State::default());
    let store = store(&state);
    store
        .create_user(&caller("alice", &["admin"]), &user("bob", &["operator", "viewer"]))
        .await
        .unwrap();
    let writes = writes(&state);
    assert_eq!(writes.len(), 1);
    let post = &writes[0];
    assert_eq!((post.method.clone(), post.path.as_str()), (Method::POST, USERS_PATH));
    assert_as_alice_the_admin(post);
    assert!(post.query.contains("fieldManager=ichor-issuer"), "{}", post.query);
    assert_eq!(
        post.body.as_ref().unwrap(),
        &json!({
            "apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
            "metadata": {"name": "bob", "namespace": "ichor-system"},
            "spec": {"displayName": "bob display", "roles": ["operator", "viewer"], "disabled": false},
        })
    );
    let bob = store.get_user("bob").await.unwrap().unwrap();
    assert_eq!(bob.roles, ["operator", "viewer"]);
}

#[tokio::test]
async fn a_caller_with_several_roles_is_impersonated_with_each_group_and_no_system_group() {
    let state = shared(State::default());
    store(&state)
        .create_user(&caller("carol", &["operator", "auditor"]), &user("dave", &["viewer"]))
        .await
        .unwrap();
    let post = &writes(&state)[0];
    assert_eq!(post.user.as_deref(), Some("ichor:carol"));
    assert_eq!(post.groups, ["ichor:operator", "ichor:auditor"]);
}

#[tokio::test]
async fn creating_an_existing_user_is_already_exists() {
    let mut s = State::default();
    s.add_user("bob", &["viewer"]);
    let state = shared(s);
    let err = store(&state)
        .create_user(&caller("alice", &["admin"]), &user("bob", &["viewer"]))
        .await
        .unwrap_err();
    assert!(matches!(&err, ApiError::AlreadyExists(n) if n == "bob"), "{err}");
    assert_eq!(err.code(), Code::AlreadyExists);
}

#[tokio::test]
async fn an_update_reads_then_replaces_the_spec_with_the_read_resource_version_as_the_caller() {
    let mut s = State::default();
    s.add_user("bob", &["viewer"]);
    let state = shared(s);
    let read_version = state.lock().unwrap().users["bob"]["metadata"]["resourceVersion"].clone();
    store(&state)
        .update_user(&caller("alice", &["admin"]), &user("bob", &["operator"]))
        .await
        .unwrap();
    let seen = state.lock().unwrap().seen.clone();
    let get = &seen[0];
    assert_eq!(get.method, Method::GET);
    assert_eq!(get.user, None, "the read is the issuer's own");
    let put = &seen[1];
    assert_eq!((put.method.clone(), put.path.as_str()), (Method::PUT, &*format!("{USERS_PATH}/bob")));
    assert_as_alice_the_admin(put);
    assert!(put.query.contains("fieldManager=ichor-issuer"), "{}", put.query);
    let body = put.body.as_ref().unwrap();
    assert_eq!(body["metadata"]["resourceVersion"], read_version);
    assert_eq!(body["metadata"]["labels"], json!({"team": "platform"}));
    assert!(body.get("status").is_none(), "{body}");
    assert!(body["metadata"].get("managedFields").is_none(), "{body}");
    assert_eq!(
        body["spec"],
        json!({"displayName": "bob display", "roles": ["operator"], "disabled": false})
    );
    assert_eq!(state.lock().unwrap().users["bob"]["spec"]["roles"], json!(["operator"]));
}

#[tokio::test]
async fn an_update_that_conflicts_is_retried_from_a_fresh_read() {
    let mut s = State::default();
    s.add_user("bob", &["viewer"]);
    s.conflicting_puts = 2;
    let state = shared(s);
    store(&state)
        .update_user(&caller("alice", &["admin"]), &user("bob", &["operator"]))
        .await
        .unwrap();
    let seen = state.lock().unwrap().seen.clone();
    let methods: Vec<Method> = seen.iter().map(|s| s.method.clone()).collect();
    assert_eq!(
        methods,
        [Method::GET, Method::PUT, Method::GET, Method::PUT, Method::GET, Method::PUT]
    );
    // Each replace carries the version of the read just before it.
    assert_ne!(
        seen[1].body.as_ref().unwrap()["metadata"]["resourceVersion"],
        seen[5].body.as_ref().unwrap()["metadata"]["resourceVersion"]
    );
    assert_eq!(state.lock().unwrap().users["bob"]["spec"]["roles"], json!(["operator"]));
}

#[tokio::test]
async fn an_update_that_keeps_conflicting_gives_up_as_a_conflict() {
    let mut s = State::default();
    s.add_user("bob", &["viewer"]);
    s.conflicting_puts = 100;
    let state = shared(s);
    let err = store(&state)
        .update_user(&caller("alice", &["admin"]), &user("bob", &["operator"]))
        .await
        .unwrap_err();
    assert!(matches!(err, ApiError::Conflict(_)), "{err}");
    assert_eq!(err.code(), Code::Aborted);
    assert_eq!(writes(&state).len(), MAX_UPDATE_ATTEMPTS);
    assert_eq!(state.lock().unwrap().users["bob"]["spec"]["roles"], json!(["viewer"]));
}

#[tokio::test]
async fn updating_or_deleting_a_missing_user_is_not_found() {
    let state = shared(State::default());
    let store = store(&state);
    let err = store
        .update_user(&caller("alice", &["admin"]), &user("ghost", &["viewer"]))
        .await
        .unwrap_err();
    assert!(matches!(&err, ApiError::NotFound(n) if n == "ghost"), "{err}");
    let err = store
        .delete_user(&caller("alice", &["admin"]), "ghost")
        .await
        .unwrap_err();
    assert!(matches!(&err, ApiError::NotFound(n) if n == "ghost"), "{err}");
    assert_eq!(err.code(), Code::NotFound);
}

#[tokio::test]
async fn deletes_the_user_as_the_caller() {
    let mut s = State::default();
    s.add_user("bob", &["viewer"]);
    let state = shared(s);
    let store = store(&state);
    store.delete_user(&caller("alice", &["admin"]), "bob").await.unwrap();
    let writes = writes(&state);
    assert_eq!(writes.len(), 1);
    assert_eq!(
        (writes[0].method.clone(), writes[0].path.as_str()),
        (Method::DELETE, &*format!("{USERS_PATH}/bob"))
    );
    assert_as_alice_the_admin(&writes[0]);
    assert_eq!(store.get_user("bob").await.unwrap(), None);
}

#[tokio::test]
async fn a_webhook_denial_is_permission_denied_carrying_the_webhooks_sentence() {
    let sentence = check_grant(&["operator".to_owned()], &[] as &[&str], &["admin".to_owned()])
        .unwrap_err()
        .to_string();
    let message = format!("admission webhook \"vichoruser.ichor.maesh.dev\" denied the request: {sentence}");
    let mut s = State::default();
    s.scripted.push_back(status(403, "Forbidden", &message));
    let state = shared(s);
    let err = store(&state)
        .create_user(&caller("alice", &["operator"]), &user("eve", &["admin"]))
        .await
        .unwrap_err();
    assert!(matches!(&err, ApiError::Denied(m) if *m == message), "{err}");
    let grpc: tonic::Status = err.into();
    assert_eq!(grpc.code(), Code::PermissionDenied);
    assert!(grpc.message().contains(&sentence), "{}", grpc.message());
}

#[tokio::test]
async fn an_rbac_refusal_of_the_impersonated_user_is_permission_denied_with_the_apiservers_message() {
    let message = "ichorusers.ichor.maesh.dev \"bob\" is forbidden: User \"ichor:alice\" cannot delete resource \
                   \"ichorusers\" in API group \"ichor.maesh.dev\" in the namespace \"ichor-system\"";
    let mut s = State::default();
    s.add_user("bob", &["viewer"]);
    s.scripted.push_back(status(403, "Forbidden", message));
    let state = shared(s);
    let err = store(&state)
        .delete_user(&caller("alice", &["viewer"]), "bob")
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    assert_eq!(err.to_string(), message);
    assert!(state.lock().unwrap().users.contains_key("bob"));
}

#[tokio::test]
async fn an_invalid_object_is_invalid_argument_naming_the_apiservers_field() {
    let mut s = State::default();
    s.scripted.push_back((
        422,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Invalid", "code": 422,
               "message": "IchorUser.ichor.maesh.dev \"bob\" is invalid: spec.roles[0]: Invalid value: \"Admin\": each role must match ^[a-z][a-z0-9-]{0,30}$",
               "details": {"name": "bob", "kind": "IchorUser",
                           "causes": [{"reason": "FieldValueInvalid", "field": "spec.roles[0]",
                                       "message": "Invalid value"}]}}),
    ));
    let state = shared(s);
    let err = store(&state)
        .create_user(&caller("alice", &["admin"]), &user("bob", &["viewer"]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    match err {
        ApiError::InvalidArgument { field, reason } => {
            assert_eq!(field, "spec.roles[0]");
            assert!(reason.contains("each role must match"), "{reason}");
        }
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn an_unreachable_or_failing_apiserver_is_unavailable() {
    let mut s = State::default();
    s.scripted.push_back(status(503, "ServiceUnavailable", "etcd is down"));
    let state = shared(s);
    let err = store(&state)
        .create_user(&caller("alice", &["admin"]), &user("bob", &["viewer"]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err}");
}

// The UserService over the cluster backend.

fn admin_entry() -> CredentialsEntry {
    CredentialsEntry::new(
        api_common::real_hash(),
        t0() - jiff::SignedDuration::from_hours(1),
        false,
    )
}

fn create_request(name: &str) -> tonic::Request<CreateUserRequest> {
    let mut request = tonic::Request::new(CreateUserRequest {
        name: name.into(),
        display_name: String::new(),
        email: String::new(),
        roles: vec!["viewer".into()],
        disabled: false,
        initial_password: Some(InitialPassword::Password("a long enough password".into())),
    });
    let token = format!("alice@{}", t0().as_second());
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    request
}

#[tokio::test]
async fn the_service_creates_the_user_as_the_caller_then_its_credentials_entry() {
    use ichor_issuer::api::proto::user_service_server::UserService as _;
    let mut s = State::default();
    s.add_user("alice", &["admin"]);
    s.set_entry("alice", &admin_entry());
    let state = shared(s);
    let (api, _, _) = build_api(Arc::new(store(&state)), None);
    let created = api.create_user(create_request("bob")).await.unwrap().into_inner();
    assert_eq!(created.user.unwrap().name, "bob");
    let state = state.lock().unwrap();
    assert!(state.users.contains_key("bob"));
    assert!(state.secret.as_ref().unwrap().contains_key("bob"));
    let post = state.seen.iter().find(|s| s.method == Method::POST).unwrap();
    assert_as_alice_the_admin(post);
    // Nothing of the password reaches an IchorUser write.
    for seen in state.seen.iter().filter(|s| s.path.starts_with(USERS_PATH)) {
        let text = seen.body.as_ref().map(Value::to_string).unwrap_or_default();
        assert!(!text.contains("password") && !text.contains("argon2"), "{text}");
    }
}

#[tokio::test]
async fn a_create_whose_credentials_write_fails_deletes_the_user_again_as_the_caller() {
    use ichor_issuer::api::proto::user_service_server::UserService as _;
    let mut s = State::default();
    s.add_user("alice", &["admin"]);
    s.set_entry("alice", &admin_entry());
    s.fail_secret_writes = true;
    let state = shared(s);
    let (api, _, _) = build_api(Arc::new(store(&state)), None);
    let err = api.create_user(create_request("bob")).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    let state = state.lock().unwrap();
    assert!(!state.users.contains_key("bob"), "the user object was left behind");
    assert!(!state.secret.as_ref().unwrap().contains_key("bob"));
    let undo = state.seen.iter().find(|s| s.method == Method::DELETE).unwrap();
    assert_eq!(undo.path, format!("{USERS_PATH}/bob"));
    assert_as_alice_the_admin(undo);
}
