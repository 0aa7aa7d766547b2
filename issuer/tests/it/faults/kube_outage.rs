//! The Kubernetes store unreachable, then back: clear 503s that name no user, and the same router serves again without a restart.

use super::*;

const SECRET_PATH: &str = "/api/v1/namespaces/ichor-system/secrets/ichor-user-credentials";
const USER_SECRETS_PATH: &str = "/api/v1/namespaces/ichor-credentials/secrets/";
const USERS_PATH: &str = "/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/ichorusers";

/// How the scripted API answers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Api {
    Up,
    /// The connection is refused.
    Refused,
    /// A proxy in front of the API answers 503.
    ProxyError,
}

/// A scripted Kubernetes API holding the credentials Secret and one user; every write is a
/// JSON Patch `test`+`replace` or a merge patch guarded by `resourceVersion`, as `KubeStore`
/// sends them.
struct FakeApi {
    mode: Api,
    resource_version: u64,
    data: serde_json::Map<String, Value>,
    patches: usize,
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl FakeApi {
    fn secret(&self) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "ichor-user-credentials", "namespace": "ichor-system",
                            "resourceVersion": self.resource_version.to_string(),
                            "annotations": {"ichor.maesh.dev/credentials-layout": "legacy"}},
               "type": "Opaque", "data": self.data})
    }

    fn answer(&mut self, method: &http::Method, path: &str, body: &[u8]) -> (u16, Value) {
        let conflict = (
            409,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409,
                   "message": "the object has been modified"}),
        );
        if path.starts_with(USER_SECRETS_PATH) && method == http::Method::GET {
            // The legacy layout: no user has a Secret of their own.
            return (
                404,
                json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                       "code": 404, "message": "not found"}),
            );
        }
        if path == SECRET_PATH && method == http::Method::GET {
            return (200, self.secret());
        }
        if path == SECRET_PATH && method == http::Method::PATCH {
            let patch: Value = serde_json::from_slice(body).unwrap();
            if let Some(ops) = patch.as_array() {
                // The phase's test first (this fake stays in phase `legacy`), then the key's.
                assert_eq!(
                    ops[0],
                    json!({"op": "test", "path": "/metadata/annotations/ichor.maesh.dev~1credentials-layout",
                           "value": "legacy"})
                );
                let ops = &ops[1..];
                let key = ops[0]["path"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("/data/")
                    .to_owned();
                if self.data.get(&key) != Some(&ops[0]["value"]) {
                    return (
                        422,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                               "reason": "Invalid", "code": 422, "message": "test failed"}),
                    );
                }
                match ops[1]["op"].as_str() {
                    Some("replace") => {
                        self.data.insert(key, ops[1]["value"].clone());
                    }
                    _ => {
                        self.data.remove(&key);
                    }
                }
            } else {
                if patch["metadata"]["resourceVersion"].as_str() != Some(&self.resource_version.to_string()) {
                    return conflict;
                }
                for (k, v) in patch["data"].as_object().unwrap() {
                    if v.is_null() {
                        self.data.remove(k);
                    } else {
                        self.data.insert(k.clone(), v.clone());
                    }
                }
            }
            self.resource_version += 1;
            self.patches += 1;
            return (200, self.secret());
        }
        if path == format!("{USERS_PATH}/alice") {
            return (
                200,
                json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
                       "metadata": {"name": "alice", "namespace": "ichor-system", "resourceVersion": "7",
                                    "uid": "uid-alice"},
                       "spec": {"roles": ["admin"]}}),
            );
        }
        panic!("unexpected request {method} {path}");
    }
}

fn kube_store(api: &Arc<Mutex<FakeApi>>) -> KubeStore {
    type BoxError = Box<dyn std::error::Error + Send + Sync>;
    let api = Arc::clone(api);
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let api = Arc::clone(&api);
        async move {
            let (parts, body) = request.into_parts();
            let bytes = body.collect().await?.to_bytes();
            let (code, value) = {
                let mut api = api.lock().unwrap();
                match api.mode {
                    Api::Refused => {
                        return Err::<http::Response<kube::client::Body>, BoxError>(Box::new(
                            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused"),
                        ));
                    }
                    Api::ProxyError => {
                        return Ok(http::Response::builder()
                            .status(503)
                            .header("content-type", "text/plain")
                            .body(kube::client::Body::from(b"upstream connect error".to_vec()))?);
                    }
                    Api::Up => api.answer(&parts.method, parts.uri.path(), &bytes),
                }
            };
            Ok(http::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(serde_json::to_vec(&value)?))?)
        }
    });
    // No user cache: every request reaches the API, so an outage shows at once.
    KubeStore::new(kube::Client::new(service, "ichor-system")).with_user_ttl(Duration::ZERO)
}

#[tokio::test]
async fn an_unreachable_kube_store_is_a_clear_503_and_the_same_router_recovers_without_restart() {
    let entry = common::entry(false);
    let api = Arc::new(Mutex::new(FakeApi {
        mode: Api::Up,
        resource_version: 100,
        data: [(
            "alice".to_owned(),
            Value::String(b64(entry.to_json("alice").unwrap().as_bytes())),
        )]
        .into_iter()
        .collect(),
        patches: 0,
    }));
    let template = Harness::new();
    let h = replica(
        Arc::new(kube_store(&api)) as Arc<dyn UserStore>,
        Arc::new(MemoryStore::default()),
        Arc::clone(&template.ring),
        Arc::clone(&template.settings),
        Arc::new(ManualClock::new(common::start())),
    );
    let token = refresh_of(&h.cli_session("alice").await);
    let code = h
        .code("alice", "ichor-cli", CLI_REDIRECT, "openid offline_access", "")
        .await;
    let patches_before = api.lock().unwrap().patches;

    for outage in [Api::Refused, Api::ProxyError] {
        api.lock().unwrap().mode = outage;
        for _ in 0..3 {
            let reply = h.refresh(&token, "ichor-cli", None).await;
            assert_eq!(
                reply.status,
                StatusCode::SERVICE_UNAVAILABLE,
                "{outage:?}: {}",
                reply.text()
            );
            assert_eq!(reply.error(), "temporarily_unavailable");
            assert!(!reply.text().contains("alice"), "{}", reply.text());
            let reply = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
            assert_eq!(
                reply.status,
                StatusCode::SERVICE_UNAVAILABLE,
                "{outage:?}: {}",
                reply.text()
            );
            let reply = h
                .login(
                    &h.ticket("ichor-ui", UI_REDIRECT, "openid", "").await,
                    "alice",
                    "x",
                )
                .await;
            assert_eq!(
                reply.status,
                StatusCode::SERVICE_UNAVAILABLE,
                "{outage:?}: {}",
                reply.text()
            );
            assert!(!reply.text().contains("alice"), "{}", reply.text());
        }
        h.clock.advance(SignedDuration::from_secs(1));
    }
    assert_eq!(
        api.lock().unwrap().patches,
        patches_before,
        "nothing was written while down"
    );

    // The API is back: the same router, no restart, the same tokens.
    api.lock().unwrap().mode = Api::Up;
    let reply = h.refresh(&token, "ichor-cli", None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(
        generation_of(&refresh_of(&reply.json())),
        2,
        "one rotation, none lost"
    );
    let reply = h.exchange(&code, "ichor-cli", CLI_REDIRECT, VERIFIER).await;
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "the code was released: {}",
        reply.text()
    );
}
