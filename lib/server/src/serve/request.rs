//! What wraps every request on its way to the router: the peer address as axum's
//! `ConnectInfo<SocketAddr>`, the request counted in flight on its connection until its response
//! body is done (for the connection's watchdog), and the process-wide cap on requests in flight,
//! past which a request is answered `503` with `Retry-After` without reaching the router.

use super::activity::Activity;
use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::response::{IntoResponse as _, Response};
use http::{Request, StatusCode, header};
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::Semaphore;
use tower::ServiceExt as _;

/// One request of the connection from `remote`: routed through `router` when a permit of
/// `permits` is free, the permit held until the handler has answered, the in-flight mark on
/// `activity` until the response body has been handed over (or the request is dropped, by a
/// reset say).
pub(crate) async fn handle(
    router: Router,
    remote: SocketAddr,
    activity: Arc<Activity>,
    permits: Arc<Semaphore>,
    mut request: Request<Incoming>,
) -> Result<Response, Infallible> {
    let in_flight = activity.start();
    let Ok(permit) = permits.try_acquire_owned() else {
        tracing::debug!(%remote, "requests in flight at their cap; answered 503");
        return Ok(busy());
    };
    request.extensions_mut().insert(ConnectInfo(remote));
    let response = router.oneshot(request).await?;
    // The handler is done with the request body: the permit goes back now, so answers a client
    // is slow to take (an HTTP/2 window never opened) cannot hold the cap; the connection's
    // watchdog still counts the request, now to the answer bound, until its answer is handed
    // over.
    drop(permit);
    in_flight.answered();
    Ok(response.map(move |body| {
        Body::new(body.map_frame(move |frame| {
            let _in_flight = &in_flight;
            frame
        }))
    }))
}

/// The answer past the cap of requests in flight.
fn busy() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, "1")],
        "the server is handling too many requests; retry in a second\n",
    )
        .into_response()
}
