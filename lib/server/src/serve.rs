//! The HTTPS accept loop ([`serve`]; [`serve_http`] is the same loop without TLS, for listeners
//! inside the pod network such as the metrics one): TLS handshakes (bounded in time) off the
//! accept path, HTTP/1.1 and HTTP/2 per connection (hyper-util `auto`), the peer address as axum's
//! `ConnectInfo<SocketAddr>`, header and body limits, a connection cap, a cap on requests in
//! flight, a watchdog per connection (no first request, idle, or a request past its bound: the
//! connection is closed), and graceful shutdown — on the shutdown signal the listener stops
//! accepting, open connections finish their in-flight requests (HTTP/2 GOAWAY, HTTP/1.1
//! `Connection: close`) and are dropped after a bound.

mod activity;
mod options;
mod request;

pub use options::ServeOptions;

use activity::{Activity, Bounds, Overstay};
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tower_http::limit::RequestBodyLimitLayer;

/// How long a connection that overstayed may take to close gracefully (a GOAWAY or
/// `Connection: close` flushed) before it is dropped.
const CLOSE_LINGER: Duration = Duration::from_secs(1);

/// What every connection of one listener shares.
struct Shared {
    builder: Builder<TokioExecutor>,
    router: Router,
    bounds: Bounds,
    requests: Arc<Semaphore>,
}

/// Serves `router` over HTTPS on `listener` until `shutdown` completes, then drains: returns
/// when every connection has finished or after [`ServeOptions::shutdown_grace`].
///
/// Handlers can extract `ConnectInfo<SocketAddr>` (the TCP peer; the trusted-proxy rules decide
/// whether to believe `X-Forwarded-For`).
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    router: Router,
    shutdown: impl Future<Output = ()> + Send,
    options: ServeOptions,
) {
    accept_loop(listener, Some(TlsAcceptor::from(tls)), router, shutdown, options).await;
}

/// Serves `router` over plain HTTP (HTTP/1.1, or HTTP/2 with prior knowledge) on `listener`,
/// with the limits, timeouts and drain of [`serve`] (the handshake timeout aside).
///
/// # Caveats
/// Nothing is encrypted or authenticated: bind it where only the pod network reaches, and
/// serve nothing secret on it.
pub async fn serve_http(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send,
    options: ServeOptions,
) {
    accept_loop(listener, None, router, shutdown, options).await;
}

/// The loop of [`serve`] and [`serve_http`]: TLS when `acceptor` is given.
async fn accept_loop(
    listener: TcpListener,
    acceptor: Option<TlsAcceptor>,
    router: Router,
    shutdown: impl Future<Output = ()> + Send,
    options: ServeOptions,
) {
    let shared = Arc::new(Shared {
        builder: options.builder(),
        router: router.layer(RequestBodyLimitLayer::new(options.max_body_bytes)),
        bounds: Bounds {
            first_request: options.header_read_timeout,
            idle: options.idle_timeout,
            request: options.request_timeout,
            answer: options.answer_timeout,
        },
        requests: Arc::new(Semaphore::new(options.max_requests_in_flight.max(1))),
    });
    let permits = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let local = listener.local_addr().ok();

    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            () = &mut shutdown => break,
            p = Arc::clone(&permits).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            a = listener.accept() => a,
        };
        // Reap finished connection tasks so the set does not grow.
        while connections.try_join_next().is_some() {}
        let (stream, remote) = match accepted {
            Ok(a) => a,
            Err(error) => {
                // Out of file descriptors and the like: wait a little instead of spinning.
                tracing::warn!(listen = ?local, %error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let acceptor = acceptor.clone();
        let shared = Arc::clone(&shared);
        let stop = stop_rx.clone();
        connections.spawn(async move {
            let _permit = permit;
            let Some(acceptor) = acceptor else {
                return serve_connection(&shared, TokioIo::new(stream), remote, stop).await;
            };
            match tokio::time::timeout(options.handshake_timeout, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => serve_connection(&shared, TokioIo::new(tls), remote, stop).await,
                Ok(Err(error)) => tracing::debug!(%remote, %error, "TLS handshake failed"),
                Err(_) => tracing::debug!(%remote, "TLS handshake timed out"),
            }
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(options.shutdown_grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            listen = ?local,
            open = connections.len(),
            "shutdown grace elapsed; closing the remaining connections"
        );
        connections.abort_all();
        while connections.join_next().await.is_some() {}
    }
}

/// One connection's HTTP, with the peer address as `ConnectInfo`, until it ends, its watchdog
/// finds it overstayed (closed gracefully, then dropped after [`CLOSE_LINGER`]), or (after the
/// shutdown signal) its in-flight requests finish.
async fn serve_connection<I>(
    shared: &Shared,
    io: TokioIo<I>,
    remote: std::net::SocketAddr,
    mut stop: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Activity::new(shared.bounds);
    let service = {
        let (router, requests, activity) = (
            shared.router.clone(),
            Arc::clone(&shared.requests),
            Arc::clone(&activity),
        );
        tower::service_fn(move |req| {
            request::handle(
                router.clone(),
                remote,
                Arc::clone(&activity),
                Arc::clone(&requests),
                req,
            )
        })
    };
    let conn = shared
        .builder
        .serve_connection(io, TowerToHyperService::new(service));
    tokio::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        () = async { let _ = stop.wait_for(|s| *s).await; } => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
        why = activity.overstayed() => {
            match why {
                Overstay::NoFirstRequest => tracing::debug!(%remote, "no request in time; closing"),
                Overstay::Idle => tracing::debug!(%remote, "idle; closing"),
                Overstay::SlowRequest => tracing::debug!(%remote, "a request overstayed; closing"),
                Overstay::UnreadAnswer => tracing::debug!(%remote, "an answer was never taken; closing"),
            }
            conn.as_mut().graceful_shutdown();
            match tokio::time::timeout(CLOSE_LINGER, conn).await {
                Ok(r) => r,
                Err(_) => Ok(()),
            }
        }
    };
    if let Err(error) = result {
        tracing::debug!(%remote, %error, "connection ended with an error");
    }
}
