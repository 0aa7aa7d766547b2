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
/// Where the users' own Secrets are: none here (the legacy layout, phase `legacy`).
const USER_SECRETS_PATH: &str = "/api/v1/namespaces/ichor-credentials/secrets/";

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
                            "resourceVersion": self.resource_version.to_string(),
                            "annotations": {"ichor.maesh.dev/credentials-layout": "legacy"}},
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
    if seen.path.starts_with(USER_SECRETS_PATH) {
        assert_eq!(
            seen.method,
            Method::GET,
            "no per-user Secret is written in phase legacy"
        );
        return status(404, "NotFound", "secrets not found");
    }
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

mod backend;
mod routers;
mod service;
