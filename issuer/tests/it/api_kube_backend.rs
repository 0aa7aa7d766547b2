//! The cluster `UserBackend` (`KubeStore`) against a scripted kube-apiserver speaking the real
//! wire format, for what a real apiserver does not show or cannot be made to do: the exact
//! impersonation headers and bodies of the writes (spec only, never status), a conflict between
//! the read and the replace and its retry, a webhook's denial passed through (no webhook server
//! runs beside the issuer's tests), an unreachable apiserver, a credentials write failing after
//! the create (the user is deleted again), and the `--store kube` routers. The answers of a real
//! apiserver (created, already exists, not found, RBAC's refusal of the impersonated caller, the
//! CRD's refusal naming the field, a refused create leaving no credentials) are tested on one in
//! `tests/cluster/`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{Arc, Mutex},
};

use crate::api_common;
use crate::api_common::{build_api, caller, t0};
use base64::Engine as _;
use http::Method;
use http_body_util::BodyExt as _;
use ichor_issuer::{
    api::{
        ApiError, UserBackend,
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
const REVIEWS_PATH: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
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
    if seen.path == REVIEWS_PATH {
        let mut review = seen.body.clone().unwrap();
        review["status"] = json!({"allowed": true});
        return (201, review);
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
        Method::GET => state
            .users
            .get(&name)
            .map_or_else(not_found, |u| (200, u.clone())),
        Method::DELETE => match state.users.remove(&name) {
            Some(_) => (
                200,
                json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
            ),
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

fn client(state: &Arc<Mutex<State>>) -> kube::Client {
    let state = Arc::clone(state);
    ichor_testkit::issuer::kube::client(NAMESPACE, move |parts, body| {
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
            body,
        };
        let mut state = state.lock().unwrap();
        state.seen.push(seen.clone());
        let (code, value) = answer(&mut state, &seen);
        (http::StatusCode::from_u16(code).unwrap(), value)
    })
}

fn store(state: &Arc<Mutex<State>>) -> KubeStore {
    KubeStore::new(client(state)).with_user_ttl(std::time::Duration::ZERO)
}

fn shared(state: State) -> Arc<Mutex<State>> {
    Arc::new(Mutex::new(state))
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
        .create_user(
            &caller("alice", &["admin"]),
            &user("bob", &["operator", "viewer"]),
        )
        .await
        .unwrap();
    let writes = writes(&state);
    assert_eq!(writes.len(), 1);
    let post = &writes[0];
    assert_eq!(
        (post.method.clone(), post.path.as_str()),
        (Method::POST, USERS_PATH)
    );
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
        .create_user(
            &caller("carol", &["operator", "auditor"]),
            &user("dave", &["viewer"]),
        )
        .await
        .unwrap();
    let post = &writes(&state)[0];
    assert_eq!(post.user.as_deref(), Some("ichor:carol"));
    assert_eq!(post.groups, ["ichor:operator", "ichor:auditor"]);
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
    assert_eq!(
        (put.method.clone(), put.path.as_str()),
        (Method::PUT, &*format!("{USERS_PATH}/bob"))
    );
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
    assert_eq!(
        state.lock().unwrap().users["bob"]["spec"]["roles"],
        json!(["operator"])
    );
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
        [
            Method::GET,
            Method::PUT,
            Method::GET,
            Method::PUT,
            Method::GET,
            Method::PUT
        ]
    );
    // Each replace carries the version of the read just before it.
    assert_ne!(
        seen[1].body.as_ref().unwrap()["metadata"]["resourceVersion"],
        seen[5].body.as_ref().unwrap()["metadata"]["resourceVersion"]
    );
    assert_eq!(
        state.lock().unwrap().users["bob"]["spec"]["roles"],
        json!(["operator"])
    );
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
    assert_eq!(
        state.lock().unwrap().users["bob"]["spec"]["roles"],
        json!(["viewer"])
    );
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
async fn an_unreachable_or_failing_apiserver_is_unavailable() {
    let mut s = State::default();
    s.scripted
        .push_back(status(503, "ServiceUnavailable", "etcd is down"));
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
    assert!(
        !state.users.contains_key("bob"),
        "the user object was left behind"
    );
    assert!(!state.secret.as_ref().unwrap().contains_key("bob"));
    let undo = state.seen.iter().find(|s| s.method == Method::DELETE).unwrap();
    assert_eq!(undo.path, format!("{USERS_PATH}/bob"));
    assert_as_alice_the_admin(undo);
}

// `--store kube`: the routers and the kubeconfig settings.

mod routers {
    use super::*;
    use clap::Parser as _;
    use ichor_issuer::{
        api::{
            KubeAccessReview,
            proto::{GetMyKubeconfigRequest, GetMyKubeconfigResponse, WhoAmIRequest, WhoAmIResponse},
        },
        cli::{
            CaFile, IN_CLUSTER_CA_FILE, IssuerArgs, KubeCaError, Served, kube_cluster, kube_routers,
            read_kube_ca,
        },
        keys::LoadedKeys,
        tokens::sign_id_token,
    };
    use ichor_renderers::trust::keys::KeysDocument;
    use ichor_server::{
        metrics::{Metrics, Sources},
        reload::{WatchOptions, Watched},
    };
    use jiff::{SignedDuration, Timestamp};
    use prost::Message as _;
    use tower::ServiceExt as _;

    const ISSUER: &str = "https://ichor.example.com";
    const RSA_PKCS8: &str = include_str!("../fixtures/rsa2048.pkcs8.pem");

    fn keys_json(created: Timestamp) -> String {
        let secret = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
        let created = created.to_string();
        json!({
            "v": 1,
            "keys": [{"kid": "k-1", "alg": "RS256", "pem": RSA_PKCS8, "createdAt": created, "activeFrom": created}],
            "hmac": [{"kid": "h-1", "secret": secret, "createdAt": created, "activeFrom": created}],
        })
        .to_string()
    }

    fn args(extra: &[&str]) -> IssuerArgs {
        let mut argv = vec!["ichor-issuer", "--external-url", ISSUER];
        argv.extend_from_slice(extra);
        IssuerArgs::try_parse_from(argv).unwrap()
    }

    /// A gRPC-web frame: flag byte, big-endian length, payload.
    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8];
        out.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    /// The data frame and the trailer text of a gRPC-web response body.
    fn split(body: &[u8]) -> (Vec<u8>, String) {
        let (mut data, mut trailers) = (Vec::new(), String::new());
        let mut rest = body;
        while rest.len() >= 5 {
            let len = u32::from_be_bytes(rest[1..5].try_into().unwrap()) as usize;
            let payload = &rest[5..5 + len];
            if rest[0] & 0x80 == 0 {
                data = payload.to_vec();
            } else {
                trailers = String::from_utf8_lossy(payload).into_owned();
            }
            rest = &rest[5 + len..];
        }
        (data, trailers)
    }

    async fn call(router: &axum::Router, method: &str, token: &str, message: Vec<u8>) -> (Vec<u8>, String) {
        let request = http::Request::builder()
            .method("POST")
            .uri(format!("/ichor.v1alpha1.UserService/{method}"))
            .header("content-type", "application/grpc-web+proto")
            .header("x-grpc-web", "1")
            .header("authorization", format!("Bearer {token}"))
            .body(axum::body::Body::from(frame(&message)))
            .unwrap();
        let response = router.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), 200);
        let in_headers = response
            .headers()
            .get("grpc-status")
            .map(|v| format!("grpc-status:{}", v.to_str().unwrap()));
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let (data, trailers) = split(&body);
        (data, in_headers.unwrap_or(trailers))
    }

    #[tokio::test]
    async fn the_kube_routers_serve_the_user_service_over_grpc_web_with_the_kubeconfig_settings() {
        let dir = tempfile::tempdir().unwrap();
        let now = Timestamp::now();
        let keys_text = keys_json(now - SignedDuration::from_hours(24));
        let keys_file = dir.path().join("keys.json");
        std::fs::write(&keys_file, &keys_text).unwrap();
        let config = args(&[
            "--keys-file",
            keys_file.to_str().unwrap(),
            "--kube-api-server-url",
            "https://kube.example.com:6443",
            "--kube-api-tls-server-name",
            "kube-apiserver.prod.internal",
            "--kube-cluster-name",
            "prod",
        ])
        .validate()
        .unwrap();
        let keys = Watched::file(
            "keys",
            &config.keys_file,
            KeysDocument::parse,
            WatchOptions::default(),
        )
        .unwrap();
        let served = Served {
            settings: Arc::new(ichor_issuer::oidc::Settings::new(config.settings())),
            config: Arc::new(config),
            keys,
            metrics: Arc::new(Metrics::new(
                "ichor_issuer",
                Sources {
                    reloads: Vec::new(),
                    certificates: Vec::new(),
                    key_times: None,
                },
            )),
        };

        let mut s = State::default();
        s.add_user("alice", &["admin"]);
        s.set_entry(
            "alice",
            &CredentialsEntry::new(
                api_common::real_hash(),
                now - SignedDuration::from_hours(1),
                false,
            ),
        );
        let state = shared(s);
        let client = client(&state);
        let cluster = kube_cluster(&served.config.kubeconfig, "https://10.96.0.1:443/", None);
        let routers = kube_routers(
            &served,
            Arc::new(KubeStore::new(client.clone())),
            KubeAccessReview::new(client),
            Some(cluster),
        )
        .unwrap();

        let loaded = LoadedKeys::from_document(&KeysDocument::parse(keys_text.as_bytes()).unwrap()).unwrap();
        let token = sign_id_token(
            &loaded,
            &ichor_testkit::issuer::harness::id_claims(ISSUER, "alice", "ichor-ui", &["admin"], now),
            now,
        )
        .unwrap();

        let (data, trailers) = call(
            &routers.external,
            "WhoAmI",
            &token,
            WhoAmIRequest {}.encode_to_vec(),
        )
        .await;
        assert!(trailers.contains("grpc-status:0"), "{trailers}");
        let me = WhoAmIResponse::decode(&data[..]).unwrap();
        assert_eq!(
            (me.name.as_str(), me.roles.as_slice()),
            ("alice", &["admin".to_owned()][..])
        );

        let (data, trailers) = call(
            &routers.external,
            "GetMyKubeconfig",
            &token,
            GetMyKubeconfigRequest::default().encode_to_vec(),
        )
        .await;
        assert!(trailers.contains("grpc-status:0"), "{trailers}");
        let kubeconfig = GetMyKubeconfigResponse::decode(&data[..]).unwrap().kubeconfig;
        let doc: serde_yaml::Value = serde_yaml::from_str(&kubeconfig).unwrap();
        let cluster = &doc["clusters"][0];
        assert_eq!(cluster["name"], "prod");
        assert_eq!(cluster["cluster"]["server"], "https://kube.example.com:6443");
        assert_eq!(
            cluster["cluster"]["tls-server-name"],
            "kube-apiserver.prod.internal"
        );
        assert!(
            cluster["cluster"].get("certificate-authority-data").is_none(),
            "{kubeconfig}"
        );
        // The authorization question went to the apiserver as a SubjectAccessReview for alice.
        let review = state
            .lock()
            .unwrap()
            .seen
            .iter()
            .find(|s| s.path == REVIEWS_PATH)
            .cloned()
            .unwrap();
        assert_eq!(review.body.as_ref().unwrap()["spec"]["user"], "ichor:alice");

        // Without a token: refused by the service (so it is served), never a 404.
        let (_, trailers) = call(&routers.external, "WhoAmI", "", WhoAmIRequest {}.encode_to_vec()).await;
        assert!(trailers.contains("grpc-status:16"), "{trailers}");
    }

    #[test]
    fn with_store_kube_the_ca_defaults_to_the_service_accounts_and_local_has_none() {
        let kube = args(&[]).validate().unwrap();
        assert_eq!(
            kube.kubeconfig.ca_file,
            Some(CaFile::Default(IN_CLUSTER_CA_FILE.into()))
        );
        assert_eq!(kube.kubeconfig.cluster_name, "ichor");
        assert_eq!(kube.kubeconfig.api_server_url, None);
        let given = args(&["--kube-ca-file", "/etc/ca.pem"]).validate().unwrap();
        assert_eq!(
            given.kubeconfig.ca_file,
            Some(CaFile::Given("/etc/ca.pem".into()))
        );
        let local = args(&[
            "--store",
            "local",
            "--local-users-dir",
            "u",
            "--local-state-dir",
            "s",
        ])
        .validate()
        .unwrap();
        assert_eq!(local.kubeconfig.ca_file, None);
    }

    #[test]
    fn refuses_a_kube_api_server_url_that_is_not_https_and_a_bad_tls_server_name() {
        let err = args(&["--kube-api-server-url", "http://kube:6443"])
            .validate()
            .unwrap_err();
        assert!(err.to_string().starts_with("--kube-api-server-url"), "{err}");
        let err = args(&["--kube-api-tls-server-name", "kube apiserver"])
            .validate()
            .unwrap_err();
        assert!(err.to_string().starts_with("--kube-api-tls-server-name"), "{err}");
        let ok = args(&["--kube-api-server", "https://kube.example.com/"])
            .validate()
            .unwrap();
        assert_eq!(
            ok.kubeconfig.api_server_url.as_deref(),
            Some("https://kube.example.com")
        );
    }

    fn certificate_pem() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        rcgen::CertificateParams::new(vec!["kubernetes".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap()
            .pem()
    }

    #[test]
    fn an_absent_default_ca_is_no_ca_but_an_absent_given_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("ca.crt");
        assert_eq!(read_kube_ca(&CaFile::Default(missing.clone())).unwrap(), None);
        let err = read_kube_ca(&CaFile::Given(missing)).unwrap_err();
        assert!(matches!(err, KubeCaError::Read { .. }), "{err}");
    }

    #[test]
    fn reads_pem_certificates_and_refuses_a_key_garbage_or_an_oversized_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ca.crt");
        let pem = format!("{}{}", certificate_pem(), certificate_pem());
        std::fs::write(&file, &pem).unwrap();
        assert_eq!(
            read_kube_ca(&CaFile::Default(file.clone())).unwrap().as_deref(),
            Some(&*pem)
        );

        let with_key = format!("{pem}-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
        std::fs::write(&file, with_key).unwrap();
        let err = read_kube_ca(&CaFile::Default(file.clone())).unwrap_err();
        assert!(err.to_string().contains("PRIVATE KEY"), "{err}");

        std::fs::write(&file, "not a certificate\n").unwrap();
        let err = read_kube_ca(&CaFile::Given(file.clone())).unwrap_err();
        assert!(matches!(err, KubeCaError::NotCertificates { .. }), "{err}");

        std::fs::write(&file, "x".repeat(300 * 1024)).unwrap();
        let err = read_kube_ca(&CaFile::Given(file)).unwrap_err();
        assert!(matches!(err, KubeCaError::TooLarge { .. }), "{err}");
    }
}
