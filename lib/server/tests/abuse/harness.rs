//! A server under test (TLS through the real `ichor_server::tls` configuration, or plain) with a
//! small router, and raw clients: TCP or TLS streams with a chosen ALPN.

use axum::Router;
use axum::body::Bytes;
use axum::routing::{get, post};
use ichor_server::tls::{PairFiles, server_config, watch_pair};
use ichor_server::{ServeOptions, serve, serve_http};
use rustls::pki_types::{CertificateDer, ServerName};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// The size of `/big`'s answer.
pub const BIG: usize = 1024 * 1024;

/// Which listener kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `serve`: HTTPS, as the external and internal listeners.
    Tls,
    /// `serve_http`: plain HTTP, as the metrics listener.
    Plain,
}

/// Both kinds, for the tests that hold for every listener.
pub const KINDS: [Kind; 2] = [Kind::Tls, Kind::Plain];

/// A bidirectional byte stream.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A running server.
pub struct Server {
    pub addr: SocketAddr,
    pub kind: Kind,
    /// How many times a handler started.
    pub handled: Arc<AtomicUsize>,
    ca_pem: String,
    _dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

fn router(handled: Arc<AtomicUsize>) -> Router {
    let counted = move || {
        handled.fetch_add(1, Ordering::SeqCst);
    };
    let (c1, c2, c3) = (counted.clone(), counted.clone(), counted);
    Router::new()
        .route(
            "/",
            get(move || async move {
                c1();
                "hello"
            }),
        )
        .route(
            "/echo",
            post(move |body: Bytes| async move {
                c2();
                body.len().to_string()
            }),
        )
        .route("/big", get(|| async { vec![b'x'; BIG] }))
        .route(
            "/hang",
            get(move || async move {
                c3();
                tokio::time::sleep(Duration::from_secs(3600)).await;
                "never"
            }),
        )
}

impl Server {
    /// Starts a server of `kind` with `options` on 127.0.0.1.
    pub async fn start(kind: Kind, options: ServeOptions) -> Server {
        let ca = ichor_testkit::pki::TestCa::new("abuse test CA").unwrap();
        let leaf = ca.serving("localhost").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tls.crt"), &leaf.cert_pem).unwrap();
        std::fs::write(dir.path().join("tls.key"), &leaf.key_pem).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let handled = Arc::new(AtomicUsize::new(0));
        let router = router(Arc::clone(&handled));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let shutdown = async {
            let _ = rx.await;
        };
        let task = match kind {
            Kind::Tls => {
                let watch = ichor_server::reload::WatchOptions {
                    poll_interval: Duration::from_secs(3600),
                    file_events: false,
                    ..Default::default()
                };
                let pair = watch_pair("tls", &PairFiles::in_secret_dir(dir.path()), watch).unwrap();
                let tls = server_config(pair).unwrap();
                tokio::spawn(serve(listener, tls, router, shutdown, options))
            }
            Kind::Plain => tokio::spawn(serve_http(listener, router, shutdown, options)),
        };
        Server {
            addr,
            kind,
            handled,
            ca_pem: ca.pem,
            _dir: dir,
            stop: Some(tx),
            task: Some(task),
        }
    }

    /// A raw connection speaking `alpn` (ignored on the plain listener, where the first bytes
    /// choose the protocol).
    pub async fn connect(&self, alpn: &[u8]) -> Box<dyn Io> {
        let tcp = TcpStream::connect(self.addr).await.unwrap();
        tcp.set_nodelay(true).unwrap();
        match self.kind {
            Kind::Plain => Box::new(tcp),
            Kind::Tls => Box::new(self.tls_over(tcp, alpn).await.unwrap()),
        }
    }

    /// A TLS handshake over `tcp` trusting the test CA.
    pub async fn tls_over(
        &self,
        tcp: TcpStream,
        alpn: &[u8],
    ) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
        let mut roots = rustls::RootCertStore::empty();
        let ca: CertificateDer<'static> = rustls_pemfile::certs(&mut self.ca_pem.as_bytes())
            .next()
            .unwrap()
            .unwrap();
        roots.add(ca).unwrap();
        let mut config =
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
        config.alpn_protocols = vec![alpn.to_vec()];
        tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
    }

    /// One HTTP/1.1 request `head` (with `Connection: close` added) on a fresh connection;
    /// the status of the answer.
    pub async fn status_of(&self, request_line: &str) -> u16 {
        let mut io = self.connect(b"http/1.1").await;
        let head = format!("{request_line}\r\nhost: localhost\r\nconnection: close\r\n\r\n");
        io.write_all(head.as_bytes()).await.unwrap();
        let answer = read_for(&mut io, Duration::from_secs(5)).await.bytes;
        status(&answer)
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .expect("the server stops")
                .unwrap();
        }
    }
}

/// The status code of an HTTP/1.1 answer (0 when there is none).
pub fn status(answer: &[u8]) -> u16 {
    let text = String::from_utf8_lossy(answer);
    text.strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

/// What [`read_for`] saw.
pub struct Read {
    pub bytes: Vec<u8>,
    /// When the peer closed (EOF or an error), since the call; `None`: still open at the end.
    pub closed_after: Option<Duration>,
}

/// Reads from `io` until it closes or `limit` passes.
pub async fn read_for(io: &mut (impl AsyncRead + Unpin + ?Sized), limit: Duration) -> Read {
    let started = Instant::now();
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let left = limit.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, io.read(&mut buf)).await {
            Err(_) => {
                return Read {
                    bytes,
                    closed_after: None,
                };
            }
            Ok(Ok(0) | Err(_)) => {
                return Read {
                    bytes,
                    closed_after: Some(started.elapsed()),
                };
            }
            Ok(Ok(n)) => bytes.extend_from_slice(&buf[..n]),
        }
    }
}

/// Writes `chunk` every `interval` while reading; returns when the peer closes (with what it
/// sent and when) or after `limit`.
pub async fn trickle(io: Box<dyn Io>, chunk: &[u8], interval: Duration, limit: Duration) -> Read {
    let (mut reader, mut writer) = tokio::io::split(io);
    let chunk = chunk.to_vec();
    let writing = tokio::spawn(async move {
        loop {
            if writer.write_all(&chunk).await.is_err() {
                return;
            }
            tokio::time::sleep(interval).await;
        }
    });
    let read = read_for(&mut reader, limit).await;
    writing.abort();
    read
}

/// Options with every time bound long, so a test shortens only the one it shows.
pub fn patient() -> ServeOptions {
    ServeOptions {
        handshake_timeout: Duration::from_secs(60),
        header_read_timeout: Duration::from_secs(60),
        idle_timeout: Duration::from_secs(60),
        request_timeout: Duration::from_secs(60),
        shutdown_grace: Duration::from_millis(200),
        ..ServeOptions::default()
    }
}

/// The slack allowed past a time bound: the close linger (1 s) and scheduling.
pub const SLACK: Duration = Duration::from_secs(3);

/// A GET of `/` over HTTP/1.1 on a fresh connection answers 200: the server still serves.
pub async fn still_serves(server: &Server) {
    assert_eq!(
        server.status_of("GET / HTTP/1.1").await,
        200,
        "the server still serves others"
    );
}
