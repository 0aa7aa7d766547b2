//! `UserService` request bodies as the issuer's listener receives them
//! (`ichor_issuer::api::grpc_router`): gRPC, and gRPC-web in its binary and base64 text forms
//! through `tonic_web::GrpcWebLayer`, each framed (flag byte, big-endian length, message) and
//! decoded as the method's prost message before any handler runs. No request carries a bearer
//! token, as from anyone who reaches the port.
//!
//! Input: the first byte picks the encoding (`% 3`: gRPC, gRPC-web, gRPC-web text) and the
//! method (`/ 3 % 11`: the ten methods, then an unknown one); the rest is the request body as
//! sent, framing included.
//!
//! Properties: no panic; the answer is HTTP 200 with a `grpc-status` that is a known code and
//! never `OK` (no call succeeds without a bearer token); a body that is one well-formed frame
//! holding a message that decodes re-encodes to a message that decodes to the same value.

use std::{
    path::PathBuf,
    sync::{Arc, OnceLock},
};

use axum::{body::Body, http::Request};
use ichor_issuer::{
    api::{
        ApiConfig, LocalAccessReview, UserApi, grpc_router,
        proto::{
            ChangeOwnPasswordRequest, CreateUserRequest, DeleteUserRequest, GetMyKubeconfigRequest,
            GetUserRequest, ListUsersRequest, RevokeSessionsRequest, SetPasswordRequest, UpdateUserRequest,
            WhoAmIRequest,
        },
    },
    store::local::LocalStore,
};
use ichor_renderers::rbac::{Authorizer, Policy};
use ichor_testkit::issuer::clock::ManualClock;
use prost::Message;
use tower::ServiceExt as _;

/// The methods of the service, in the order the input's first byte picks them, then a name the
/// service does not have.
pub const METHODS: [&str; 11] = [
    "ListUsers",
    "GetUser",
    "CreateUser",
    "UpdateUser",
    "DeleteUser",
    "SetPassword",
    "ChangeOwnPassword",
    "RevokeSessions",
    "GetMyKubeconfig",
    "WhoAmI",
    "NoSuchMethod",
];

/// The content types of the encodings, in the order the input's first byte picks them.
pub const CONTENT_TYPES: [&str; 3] = [
    "application/grpc",
    "application/grpc-web+proto",
    "application/grpc-web-text",
];

/// The input byte that sends `body` to `method` (an index of [`METHODS`]) with the content type
/// of index `encoding` in [`CONTENT_TYPES`].
pub fn selector(method: usize, encoding: usize) -> u8 {
    u8::try_from(method * 3 + encoding).expect("a selector fits a byte")
}

/// One gRPC frame of `message`: flag 0 (uncompressed), big-endian length, bytes.
pub fn frame(message: &[u8]) -> Vec<u8> {
    let mut out = vec![0];
    out.extend_from_slice(&u32::try_from(message.len()).expect("small").to_be_bytes());
    out.extend_from_slice(message);
    out
}

fn router() -> &'static axum::Router {
    static ROUTER: OnceLock<axum::Router> = OnceLock::new();
    ROUTER.get_or_init(|| {
        // No request is authenticated, so the store is never read: it names directories that
        // need not exist.
        let dir = PathBuf::from("/nonexistent/ichor-fuzz");
        let store = Arc::new(LocalStore::new(dir.join("users"), dir.join("state")));
        let access = LocalAccessReview::new(Authorizer::new(Policy::builtin().expect("built-in roles")));
        let harness = crate::fixtures::harness();
        let config = ApiConfig::new(crate::fixtures::ISSUER, None).expect("api config");
        let clock = Arc::new(ManualClock::new(crate::fixtures::now()));
        grpc_router(UserApi::new(
            store,
            access,
            Arc::clone(&harness.issuer),
            clock,
            config,
        ))
    })
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    })
}

/// The `grpc-status` of an answer: its header (a trailers-only answer), else the trailers
/// frame of a gRPC-web body (decoded from base64 in text mode).
fn grpc_status(headers: &axum::http::HeaderMap, body: &[u8], text: bool) -> Option<String> {
    if let Some(value) = headers.get("grpc-status") {
        return Some(value.to_str().expect("grpc-status is text").to_owned());
    }
    let decoded;
    let mut rest = if text {
        use base64::Engine as _;
        decoded = base64::engine::general_purpose::STANDARD
            .decode(body)
            .expect("a text answer is base64");
        decoded.as_slice()
    } else {
        body
    };
    while rest.len() >= 5 {
        let len = u32::from_be_bytes(rest[1..5].try_into().expect("4 bytes")) as usize;
        let payload = rest.get(5..5 + len).expect("a frame of the answer is whole");
        if rest[0] & 0x80 != 0 {
            let trailers = String::from_utf8_lossy(payload);
            return trailers
                .lines()
                .find_map(|l| l.trim().strip_prefix("grpc-status:").map(|v| v.trim().to_owned()));
        }
        rest = &rest[5 + len..];
    }
    None
}

/// `decode(encode(decode(payload))) == decode(payload)` for the request message of `method`.
fn round_trip(method: usize, payload: &[u8]) {
    fn check<M: Message + Default + PartialEq>(payload: &[u8]) {
        if let Ok(message) = M::decode(payload) {
            let back = M::decode(message.encode_to_vec().as_slice()).expect("a re-encoded message decodes");
            assert!(back == message, "decode(encode(m)) != m");
        }
    }
    match method {
        0 => check::<ListUsersRequest>(payload),
        1 => check::<GetUserRequest>(payload),
        2 => check::<CreateUserRequest>(payload),
        3 => check::<UpdateUserRequest>(payload),
        4 => check::<DeleteUserRequest>(payload),
        5 => check::<SetPasswordRequest>(payload),
        6 => check::<ChangeOwnPasswordRequest>(payload),
        7 => check::<RevokeSessionsRequest>(payload),
        8 => check::<GetMyKubeconfigRequest>(payload),
        9 => check::<WhoAmIRequest>(payload),
        _ => {}
    }
}

/// One input of the target: returns normally or panics on a broken property.
pub fn run(data: &[u8]) {
    let Some((&first, body)) = data.split_first() else {
        return;
    };
    let encoding = usize::from(first) % CONTENT_TYPES.len();
    let method = usize::from(first) / CONTENT_TYPES.len() % METHODS.len();
    let mut request = Request::post(format!("/ichor.v1alpha1.UserService/{}", METHODS[method]))
        .header("content-type", CONTENT_TYPES[encoding]);
    request = if encoding == 0 {
        // gRPC is HTTP/2 only (tonic answers 400 otherwise); gRPC-web is what HTTP/1.1 carries.
        request
            .version(axum::http::Version::HTTP_2)
            .header("te", "trailers")
    } else {
        request.header("x-grpc-web", "1")
    };
    let request = request.body(Body::from(body.to_vec())).expect("request");
    let (status, headers, answer) = runtime().block_on(async {
        let response = router().clone().oneshot(request).await.expect("infallible");
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, 1 << 20)
            .await
            .expect("the answer's body");
        (parts.status, parts.headers, bytes)
    });
    let code = grpc_status(&headers, &answer, encoding == 2);
    if std::env::var_os("ICHOR_FUZZ_SHOW").is_some() {
        eprintln!(
            "{} {} {status} grpc-status {code:?} {headers:?}",
            METHODS[method], CONTENT_TYPES[encoding]
        );
    }
    assert_eq!(status, 200, "HTTP status");
    let code = code.expect("the answer has a grpc-status");
    let code: i32 = code.parse().expect("grpc-status is a number");
    assert!(
        (1..=16).contains(&code),
        "grpc-status {code} without a bearer token"
    );
    if body.len() >= 5 && encoding < 2 && body[0] == 0 {
        let len = u32::from_be_bytes(body[1..5].try_into().expect("4 bytes")) as usize;
        if body.len() == 5 + len {
            round_trip(method, &body[5..]);
        }
    }
}
