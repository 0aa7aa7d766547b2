//! The issuer process around its routers (`cli::run`): readiness gated on keys and TLS, health,
//! metrics on their own plain-HTTP listener only, the internal listener serving its routes only, the peer address reaching handlers,
//! HTTP/2, and graceful shutdown.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::server_common::*;
use axum::Router;
use axum::extract::ConnectInfo;
use axum::routing::get;
use clap::Parser as _;
use ichor_issuer::cli::{Flags, Listeners, Routers, RunOptions, Served, run};
use ichor_server::ServeOptions;
use ichor_server::reload::WatchOptions;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;

struct Harness {
    external: SocketAddr,
    internal: SocketAddr,
    metrics: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    client_ext: reqwest::Client,
    client_int: reqwest::Client,
    client_ops: reqwest::Client,
}

fn test_routers(served: &Served) -> Routers {
    // What an OIDC handler does on issuing a token: the counter shows in /metrics.
    served.metrics.handlers(|registry| {
        let issued = prometheus_client::metrics::counter::Counter::<u64>::default();
        registry.register("ichor_issuer_tokens_issued", "ID tokens issued", issued.clone());
        issued.inc();
    });
    Routers {
        external: Router::new()
            .route(
                "/peer",
                get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() }),
            )
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(Duration::from_millis(600)).await;
                    "finished"
                }),
            ),
        internal: Router::new().route("/.well-known/openid-configuration", get(|| async { "{}" })),
    }
}

/// Starts `run` with `args` (plus listeners on 127.0.0.1:0 and fast file polling).
async fn start(ca: &Ca, args: &[&str]) -> Harness {
    start_with(ca, args, ServeOptions::default()).await
}

/// As [`start`], with `serve` as the listeners' limits.
async fn start_with(ca: &Ca, args: &[&str], serve: ServeOptions) -> Harness {
    let mut argv = vec!["ichor-issuer", "--external-url", "https://ichor.example.com"];
    argv.extend_from_slice(args);
    let config = Flags::try_parse_from(argv).unwrap().validate().unwrap();
    let external = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let internal = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (ext, int) = (external.local_addr().unwrap(), internal.local_addr().unwrap());
    let met = metrics.local_addr().unwrap();
    let options = RunOptions {
        watch: WatchOptions {
            poll_interval: Duration::from_millis(50),
            debounce: Duration::from_millis(10),
            ..WatchOptions::default()
        },
        serve,
        ..RunOptions::default()
    };
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        run(
            config,
            Listeners {
                external,
                internal,
                metrics,
            },
            options,
            |s: &Served| Ok(test_routers(s)),
            async {
                let _ = rx.await;
            },
        )
        .await
        .unwrap();
    });
    Harness {
        external: ext,
        internal: int,
        metrics: met,
        stop: Some(tx),
        task,
        client_ext: https_client(&ca.pem, ext),
        client_int: https_client(&ca.pem, int),
        client_ops: reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap(),
    }
}

impl Harness {
    fn ext(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.external.port())
    }
    fn int(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.internal.port())
    }
    /// The metrics listener's URL of `path` (plain HTTP).
    fn ops(&self, path: &str) -> String {
        format!("http://{}{path}", self.metrics)
    }
    async fn get(&self, path: &str) -> (u16, String) {
        let r = self.client_ext.get(self.ext(path)).send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }
    async fn get_ops(&self, path: &str) -> (u16, String) {
        let r = self.client_ops.get(self.ops(path)).send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }
    async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("run returns after shutdown")
            .unwrap();
    }
}

struct Files {
    _dir: tempfile::TempDir,
    ichor_tls: std::path::PathBuf,
    operator_tls: std::path::PathBuf,
    keys: std::path::PathBuf,
}

fn files() -> Files {
    let dir = tempfile::tempdir().unwrap();
    let ichor_tls = dir.path().join("oidc-tls");
    let operator_tls = dir.path().join("ui-tls");
    let signing = dir.path().join("oidc-signing");
    for d in [&ichor_tls, &operator_tls, &signing] {
        std::fs::create_dir(d).unwrap();
    }
    Files {
        ichor_tls,
        operator_tls,
        keys: signing.join("keys.json"),
        _dir: dir,
    }
}

fn args(f: &Files, operator: bool) -> Vec<String> {
    let mut a = vec![
        "--ichor-tls-dir".to_owned(),
        f.ichor_tls.display().to_string(),
        "--keys-file".to_owned(),
        f.keys.display().to_string(),
    ];
    if operator {
        a.extend([
            "--tls-cert-file".to_owned(),
            f.operator_tls.join("tls.crt").display().to_string(),
            "--tls-key-file".to_owned(),
            f.operator_tls.join("tls.key").display().to_string(),
        ]);
    }
    a
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[tokio::test]
async fn readyz_is_503_naming_what_is_missing_until_keys_and_tls_are_loaded() {
    let ca = Ca::new();
    let f = files();
    let operator = ca.leaf(2031);
    write_pair(&f.operator_tls, &operator);
    let a = args(&f, true);
    let h = start(&ca, &strs(&a)).await;

    let (status, body) = h.get("/readyz").await;
    assert_eq!(status, 503);
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["ready"], false);
    assert_eq!(body["waitingFor"], serde_json::json!(["keys", "tls-internal"]));
    assert_eq!(h.get("/healthz").await.0, 200, "alive while not ready");

    std::fs::write(&f.keys, keys_json("k-1", "2027-01-01T00:00:00Z")).unwrap();
    eventually("keys loaded", 10, || async {
        h.get("/readyz")
            .await
            .1
            .contains("\"waitingFor\":[\"tls-internal\"]")
    })
    .await;
    write_pair(&f.ichor_tls, &ca.leaf(2030));
    eventually("ready", 10, || async {
        h.get("/readyz").await == (200, "{\"ready\":true}".into())
    })
    .await;
    h.stop().await;
}

#[tokio::test]
async fn metrics_expose_key_ages_certificate_expiry_and_reload_failures() {
    let ca = Ca::new();
    let f = files();
    let (operator, leaf) = (ca.leaf(2031), ca.leaf(2030));
    write_pair(&f.operator_tls, &operator);
    write_pair(&f.ichor_tls, &leaf);
    std::fs::write(&f.keys, keys_json("k-1", "2025-01-01T00:00:00Z")).unwrap();
    let a = args(&f, true);
    let h = start(&ca, &strs(&a)).await;
    eventually("ready", 10, || async { h.get("/readyz").await.0 == 200 }).await;
    std::fs::write(&f.keys, b"{ broken").unwrap();
    eventually("the broken keys.json is counted", 10, || async {
        h.get_ops("/metrics")
            .await
            .1
            .contains("ichor_issuer_reload_failures_total{file=\"keys\"} 1")
    })
    .await;

    let r = h.client_ops.get(h.ops("/metrics")).send().await.unwrap();
    assert_eq!(
        r.headers()["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let text = r.text().await.unwrap();
    let value = |prefix: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in:\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let expected_age = jiff::Timestamp::now()
        .duration_since(ts("2025-01-01T00:00:00Z"))
        .as_secs_f64();
    for kind in ["rsa", "hmac"] {
        let age = value(&format!(
            "ichor_issuer_signing_key_age_seconds{{kind=\"{kind}\"}}"
        ));
        assert!(
            (age - expected_age).abs() < 60.0,
            "{kind} age {age} vs {expected_age}"
        );
    }
    assert_eq!(
        value("ichor_issuer_certificate_expiry_timestamp_seconds{listener=\"external\"}") as i64,
        operator.not_after
    );
    assert_eq!(
        value("ichor_issuer_certificate_expiry_timestamp_seconds{listener=\"internal\"}") as i64,
        leaf.not_after
    );
    assert_eq!(
        value("ichor_issuer_reload_failures_total{file=\"tls-internal\"}"),
        0.0
    );
    assert_eq!(
        value("ichor_issuer_file_loaded{file=\"keys\"}"),
        1.0,
        "the previous keys serve"
    );
    assert_eq!(value("ichor_issuer_tokens_issued_total"), 1.0);
    assert!(text.ends_with("# EOF\n"), "OpenMetrics ends with # EOF");
    h.stop().await;
}

#[tokio::test]
async fn the_external_listener_does_not_serve_metrics_and_the_metrics_listener_serves_the_probes_too() {
    let ca = Ca::new();
    let f = files();
    write_pair(&f.ichor_tls, &ca.leaf(2030));
    std::fs::write(&f.keys, keys_json("k-1", "2027-01-01T00:00:00Z")).unwrap();
    let a = args(&f, false);
    let h = start(&ca, &strs(&a)).await;
    eventually("ready", 10, || async { h.get("/readyz").await.0 == 200 }).await;

    assert_eq!(
        h.get("/metrics").await.0,
        404,
        "/metrics on the external listener"
    );
    assert_eq!(
        h.get("/healthz").await.0,
        200,
        "the probes stay on the external listener"
    );
    let (status, text) = h.get_ops("/metrics").await;
    assert_eq!(status, 200);
    assert!(text.contains("ichor_issuer_tokens_issued_total 1"), "{text}");
    assert_eq!(h.get_ops("/healthz").await.0, 200);
    assert_eq!(h.get_ops("/readyz").await, (200, "{\"ready\":true}".into()));
    assert_eq!(
        h.get_ops("/peer").await.0,
        404,
        "the OIDC routes are not on the metrics listener"
    );
    h.stop().await;
}

#[tokio::test]
async fn without_an_operator_certificate_both_listeners_serve_the_ichor_leaf() {
    let ca = Ca::new();
    let f = files();
    let leaf = ca.leaf(2030);
    write_pair(&f.ichor_tls, &leaf);
    std::fs::write(&f.keys, keys_json("k-1", "2027-01-01T00:00:00Z")).unwrap();
    let a = args(&f, false);
    let h = start(&ca, &strs(&a)).await;
    eventually("ready", 10, || async { h.get("/readyz").await.0 == 200 }).await;
    assert_eq!(presented_leaf(h.external, &ca.pem).await.unwrap(), leaf.der);
    assert_eq!(presented_leaf(h.internal, &ca.pem).await.unwrap(), leaf.der);
    h.stop().await;
}

#[tokio::test]
async fn the_internal_listener_serves_its_routes_only() {
    let ca = Ca::new();
    let f = files();
    write_pair(&f.operator_tls, &ca.leaf(2031));
    write_pair(&f.ichor_tls, &ca.leaf(2030));
    std::fs::write(&f.keys, keys_json("k-1", "2027-01-01T00:00:00Z")).unwrap();
    let a = args(&f, true);
    let h = start(&ca, &strs(&a)).await;
    let get = |p: &str| h.client_int.get(h.int(p)).send();
    assert_eq!(
        get("/.well-known/openid-configuration").await.unwrap().status(),
        200
    );
    for path in ["/healthz", "/readyz", "/metrics", "/peer"] {
        assert_eq!(
            get(path).await.unwrap().status(),
            404,
            "{path} on the internal listener"
        );
    }
    h.stop().await;
}

#[tokio::test]
async fn handlers_see_the_peer_address_over_http2() {
    let ca = Ca::new();
    let f = files();
    write_pair(&f.ichor_tls, &ca.leaf(2030));
    let a = args(&f, false);
    let h = start(&ca, &strs(&a)).await;
    let r = h.client_ext.get(h.ext("/peer")).send().await.unwrap();
    assert_eq!(r.version(), reqwest::Version::HTTP_2, "ALPN negotiates h2");
    let peer: SocketAddr = r.text().await.unwrap().parse().unwrap();
    assert_eq!(peer.ip(), std::net::IpAddr::from([127, 0, 0, 1]));
    assert_ne!(peer.port(), h.external.port());
    h.stop().await;
}

#[tokio::test]
async fn shutdown_lets_in_flight_requests_finish_and_refuses_new_connections() {
    let ca = Ca::new();
    let f = files();
    write_pair(&f.ichor_tls, &ca.leaf(2030));
    let a = args(&f, false);
    let h = start(&ca, &strs(&a)).await;
    let external = h.external;
    let slow = tokio::spawn({
        let client = h.client_ext.clone();
        let url = h.ext("/slow");
        async move {
            let r = client.get(url).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = std::time::Instant::now();
    h.stop().await;
    assert_eq!(slow.await.unwrap(), (200, "finished".to_owned()));
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "run waited for the request"
    );
    assert!(
        tokio::net::TcpStream::connect(external).await.is_err(),
        "the listener is closed"
    );
}

/// Writes `first` then `each` every 50 ms to a raw connection; how long until the server
/// closed it (`None`: still open after `limit`).
async fn trickled_until_closed<S>(
    io: S,
    first: &[u8],
    each: &'static [u8],
    limit: Duration,
) -> Option<Duration>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let (mut reader, mut writer) = tokio::io::split(io);
    writer.write_all(first).await.unwrap();
    let writing = tokio::spawn(async move {
        while writer.write_all(each).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let started = std::time::Instant::now();
    let closed = tokio::time::timeout(limit, async {
        let mut buf = [0u8; 4096];
        while matches!(reader.read(&mut buf).await, Ok(n) if n > 0) {}
    })
    .await;
    writing.abort();
    closed.ok().map(|()| started.elapsed())
}

#[tokio::test]
async fn slow_clients_are_dropped_after_their_bound_on_the_external_internal_and_metrics_listeners() {
    let ca = Ca::new();
    let f = files();
    write_pair(&f.ichor_tls, &ca.leaf(2030));
    std::fs::write(&f.keys, keys_json("k-1", "2025-01-01T00:00:00Z")).unwrap();
    let a = args(&f, false);
    let bound = Duration::from_millis(500);
    let serve = ServeOptions {
        header_read_timeout: bound,
        idle_timeout: bound,
        request_timeout: bound,
        ..ServeOptions::default()
    };
    let h = start_with(&ca, &strs(&a), serve).await;
    eventually("ready", 10, || async { h.get("/readyz").await.0 == 200 }).await;
    let limit = bound + Duration::from_secs(3);
    let head = b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n".as_slice();
    let post = b"POST /healthz HTTP/1.1\r\nhost: localhost\r\ncontent-length: 100000\r\n\r\n".as_slice();
    for (first, each, what) in [
        (head, b"x-a: b\r\n".as_slice(), "headers"),
        (post, b"a".as_slice(), "body"),
    ] {
        for (listener, addr) in [("external", h.external), ("internal", h.internal)] {
            let io = tls_connect(addr, &ca.pem).await.unwrap();
            let closed = trickled_until_closed(io, first, each, limit).await;
            assert!(
                closed.is_some(),
                "{listener}: trickled {what} dropped within the bound"
            );
        }
        let io = tokio::net::TcpStream::connect(h.metrics).await.unwrap();
        let closed = trickled_until_closed(io, first, each, limit).await;
        assert!(
            closed.is_some(),
            "metrics: trickled {what} dropped within the bound"
        );
    }
    assert_eq!(h.get("/healthz").await.0, 200, "still serving");
    h.stop().await;
}
