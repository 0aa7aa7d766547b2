//! HTTPS for tests on loopback: a client that trusts only a test CA, and an axum router served
//! over TLS (HTTP/2 and HTTP/1.1) on 127.0.0.1.

use std::sync::Arc;

/// A reqwest client builder (rustls) trusting only `ca_pem`; the caller adds timeouts,
/// redirect policy and name overrides.
pub fn client_builder(ca_pem: &str) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).expect("a PEM certificate"))
}

/// Serves `app` over TLS with `config` on a free port of 127.0.0.1 from `runtime` (until the
/// runtime is dropped); returns the base URL `https://127.0.0.1:<port>`.
pub fn serve(
    runtime: &tokio::runtime::Runtime,
    config: Arc<rustls::ServerConfig>,
    app: axum::Router,
) -> String {
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind 127.0.0.1");
    let port = listener.local_addr().expect("local address").port();
    serve_on(runtime, listener, config, app);
    format!("https://127.0.0.1:{port}")
}

/// As [`serve`], on a listener the caller bound (to know its address before the router is
/// built).
pub fn serve_on(
    runtime: &tokio::runtime::Runtime,
    listener: tokio::net::TcpListener,
    config: Arc<rustls::ServerConfig>,
    app: axum::Router,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    runtime.spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper_util::service::TowerToHyperService::new(app);
                let _ = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
}

/// A multi-threaded runtime (two workers) for test servers beside a synchronous test.
pub fn server_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}
