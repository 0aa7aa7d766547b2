//! The HTTPS accept loop ([`serve`]; [`serve_http`] is the same loop without TLS, for listeners
//! inside the pod network such as the metrics one): TLS handshakes (bounded in time) off the
//! accept path, HTTP/1.1 and HTTP/2 per connection (hyper-util `auto`), the peer address as axum's
//! `ConnectInfo<SocketAddr>`, header and body limits, a connection cap, and graceful shutdown —
//! on the shutdown signal the listener stops accepting, open connections finish their in-flight
//! requests (HTTP/2 GOAWAY, HTTP/1.1 `Connection: close`) and are dropped after a bound.

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
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
use tower::ServiceBuilder;
use tower_http::limit::RequestBodyLimitLayer;

/// Limits and timeouts of [`serve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeOptions {
    /// Longest TLS handshake; a slower client is dropped.
    pub handshake_timeout: Duration,
    /// Longest time to receive the request headers of an HTTP/1.1 request.
    pub header_read_timeout: Duration,
    /// Largest HTTP/1.1 read buffer, which bounds the request line and headers.
    pub max_header_bytes: usize,
    /// Largest HTTP/2 header list.
    pub max_h2_header_list_bytes: u32,
    /// Most concurrent HTTP/2 streams per connection.
    pub max_h2_streams: u32,
    /// Largest request body.
    pub max_body_bytes: usize,
    /// Most connections open at once; further connections wait in the kernel's backlog.
    pub max_connections: usize,
    /// How long in-flight requests may run after the shutdown signal.
    pub shutdown_grace: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            max_header_bytes: 64 * 1024,
            max_h2_header_list_bytes: 64 * 1024,
            max_h2_streams: 100,
            max_body_bytes: 1024 * 1024,
            max_connections: 4096,
            shutdown_grace: Duration::from_secs(20),
        }
    }
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
    let router = router.layer(RequestBodyLimitLayer::new(options.max_body_bytes));
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout)
        .max_buf_size(options.max_header_bytes.max(8192));
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(options.max_h2_header_list_bytes)
        .max_concurrent_streams(options.max_h2_streams)
        .max_pending_accept_reset_streams(20)
        .keep_alive_interval(Duration::from_secs(30));
    let builder = Arc::new(builder);
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
        let router = router.clone();
        let builder = Arc::clone(&builder);
        let stop = stop_rx.clone();
        connections.spawn(async move {
            let _permit = permit;
            let Some(acceptor) = acceptor else {
                return serve_connection(&builder, TokioIo::new(stream), router, remote, stop).await;
            };
            match tokio::time::timeout(options.handshake_timeout, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => serve_connection(&builder, TokioIo::new(tls), router, remote, stop).await,
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

/// One connection's HTTP, with the peer address as `ConnectInfo`, until it ends or (after the
/// shutdown signal) its in-flight requests finish.
async fn serve_connection<I>(
    builder: &Builder<TokioExecutor>,
    io: TokioIo<I>,
    router: Router,
    remote: std::net::SocketAddr,
    mut stop: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = ServiceBuilder::new()
        .map_request(move |mut req: http::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(ConnectInfo(remote));
            req
        })
        .service(router);
    let conn = builder.serve_connection(io, TowerToHyperService::new(service));
    tokio::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        () = async { let _ = stop.wait_for(|s| *s).await; } => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(error) = result {
        tracing::debug!(%remote, %error, "connection ended with an error");
    }
}
