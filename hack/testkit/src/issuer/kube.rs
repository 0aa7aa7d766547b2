//! A Kubernetes API in process: a kube client whose every request a test's function answers,
//! for the stores and backends that talk to the apiserver, without one.

use std::sync::Arc;

use http::{Request, Response, StatusCode, request::Parts};
use http_body_util::BodyExt as _;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A client in `namespace` whose requests `answer` decides: it gets the request's head and its
/// JSON body (if any) and returns the status and JSON body of the response.
pub fn client<F>(namespace: &str, answer: F) -> kube::Client
where
    F: Fn(&Parts, Option<serde_json::Value>) -> (StatusCode, serde_json::Value) + Send + Sync + 'static,
{
    let answer = Arc::new(answer);
    let service = tower::service_fn(move |request: Request<kube::client::Body>| {
        let answer = Arc::clone(&answer);
        async move {
            let (parts, body) = request.into_parts();
            let bytes = body.collect().await?.to_bytes();
            let body = if bytes.is_empty() {
                None
            } else {
                Some(serde_json::from_slice(&bytes)?)
            };
            let (code, value) = answer(&parts, body);
            let response = Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(serde_json::to_vec(&value)?))?;
            Ok::<_, BoxError>(response)
        }
    });
    kube::Client::new(service, namespace)
}
