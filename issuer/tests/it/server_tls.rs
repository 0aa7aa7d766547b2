//! TLS pairs: parsing of the accepted key formats, refusal of mismatched or broken pairs, and a
//! real server whose renewed certificate reaches new connections while a broken renewal keeps
//! the previous one serving.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::server_common::*;
use ichor_server::reload::{CheckOutcome, LoadError, WatchOptions};
use ichor_server::tls::{PairFiles, TlsPair, TlsPairError, server_config, watch_pair};
use ichor_server::{ServeOptions, serve};
use rcgen::KeyPair;
use std::time::Duration;

#[test]
fn parses_a_pair_with_a_pkcs8_ecdsa_key_and_reads_not_after() {
    let ca = Ca::new();
    let leaf = ca.leaf(2031);
    let pair = TlsPair::parse(leaf.cert_pem.as_bytes(), leaf.key_pem.as_bytes()).unwrap();
    assert_eq!(pair.not_after().as_second(), leaf.not_after);
    assert_eq!(pair.leaf_der().unwrap().as_ref(), leaf.der.as_slice());
}

#[test]
fn parses_a_pair_whose_key_is_pkcs1_rsa() {
    let ca = Ca::new();
    let leaf = ca.leaf_with_key(2031, KeyPair::from_pem(RSA_PKCS8).unwrap());
    assert!(TlsPair::parse(leaf.cert_pem.as_bytes(), RSA_PKCS1.as_bytes()).is_ok());
    assert!(TlsPair::parse(leaf.cert_pem.as_bytes(), RSA_PKCS8.as_bytes()).is_ok());
}

#[test]
fn parses_a_pair_whose_key_is_sec1_ecdsa() {
    let ca = Ca::new();
    let leaf = ca.leaf_with_key(2031, KeyPair::from_pem(P256_PKCS8).unwrap());
    assert!(TlsPair::parse(leaf.cert_pem.as_bytes(), P256_SEC1.as_bytes()).is_ok());
}

#[test]
fn parses_a_chain_with_the_leaf_first() {
    let ca = Ca::new();
    let leaf = ca.leaf(2031);
    let chain = format!("{}{}", leaf.cert_pem, ca.pem);
    let pair = TlsPair::parse(chain.as_bytes(), leaf.key_pem.as_bytes()).unwrap();
    assert_eq!(pair.certified_key().cert.len(), 2);
}

#[test]
fn refuses_a_key_that_is_not_the_certificates() {
    let ca = Ca::new();
    let (a, b) = (ca.leaf(2031), ca.leaf(2031));
    let err = TlsPair::parse(a.cert_pem.as_bytes(), b.key_pem.as_bytes()).unwrap_err();
    assert_eq!(err, TlsPairError::Mismatch);
}

#[test]
fn refuses_empty_or_garbage_files_naming_which() {
    let ca = Ca::new();
    let leaf = ca.leaf(2031);
    assert_eq!(
        TlsPair::parse(b"", leaf.key_pem.as_bytes()).unwrap_err(),
        TlsPairError::NoCertificate
    );
    assert_eq!(
        TlsPair::parse(leaf.cert_pem.as_bytes(), b"garbage").unwrap_err(),
        TlsPairError::NoKey
    );
    // The key file holds the certificate instead of the key.
    assert_eq!(
        TlsPair::parse(leaf.cert_pem.as_bytes(), leaf.cert_pem.as_bytes()).unwrap_err(),
        TlsPairError::NoKey
    );
    let bad_cert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    assert_eq!(
        TlsPair::parse(bad_cert.as_bytes(), leaf.key_pem.as_bytes()).unwrap_err(),
        TlsPairError::BadCertificate
    );
}

#[test]
fn a_pair_error_never_shows_key_material() {
    let ca = Ca::new();
    let (a, b) = (ca.leaf(2031), ca.leaf(2031));
    let texts = [
        TlsPair::parse(a.cert_pem.as_bytes(), b.key_pem.as_bytes())
            .unwrap_err()
            .to_string(),
        TlsPair::parse(a.cert_pem.as_bytes(), &b.key_pem.as_bytes()[..60])
            .unwrap_err()
            .to_string(),
    ];
    let key_line = b.key_pem.lines().nth(1).unwrap();
    for t in texts {
        assert!(!t.contains(key_line) && !t.contains("BEGIN"), "{t}");
    }
}

fn manual() -> WatchOptions {
    WatchOptions {
        poll_interval: Duration::from_secs(3600),
        file_events: false,
        ..WatchOptions::default()
    }
}

#[test]
fn a_watched_pair_refusing_a_mismatch_keeps_the_previous_pair() {
    let ca = Ca::new();
    let dir = tempfile::tempdir().unwrap();
    let first = ca.leaf(2031);
    write_pair(dir.path(), &first);
    let pair = watch_pair("tls", &PairFiles::in_secret_dir(dir.path()), manual()).unwrap();
    let other = ca.leaf(2032);
    write_atomic(&dir.path().join("tls.crt"), other.cert_pem.as_bytes());
    let outcome = pair.check_now();
    assert!(
        matches!(&outcome, CheckOutcome::Failed(LoadError::Parse { reason, .. }) if reason.contains("does not match")),
        "{outcome:?}"
    );
    assert_eq!(pair.current().unwrap().not_after().as_second(), first.not_after);
    assert_eq!(pair.reload_failures(), 1);
}

/// Starts a server over a watched pair in `dir`; returns its address and the shutdown trigger.
async fn start_server(
    dir: &std::path::Path,
    options: WatchOptions,
) -> (
    std::net::SocketAddr,
    ichor_server::reload::Watched<TlsPair>,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let pair = watch_pair("tls", &PairFiles::in_secret_dir(dir), options).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = axum::Router::new().route("/", axum::routing::get(|| async { "hello" }));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(serve(
        listener,
        server_config(pair.clone()).unwrap(),
        router,
        async {
            let _ = rx.await;
        },
        ServeOptions::default(),
    ));
    (addr, pair, tx, task)
}

#[tokio::test]
async fn a_renewed_certificate_reaches_new_connections_without_a_restart() {
    let ca = Ca::new();
    let dir = tempfile::tempdir().unwrap();
    let first = ca.leaf(2031);
    write_pair(dir.path(), &first);
    let options = WatchOptions {
        poll_interval: Duration::from_secs(3600),
        debounce: Duration::from_millis(20),
        ..WatchOptions::default()
    };
    let (addr, _pair, stop, task) = start_server(dir.path(), options).await;
    assert_eq!(presented_leaf(addr, &ca.pem).await.unwrap(), first.der);

    let renewed = ca.leaf(2032);
    write_pair(dir.path(), &renewed);
    eventually("the renewed certificate is served", 10, || async {
        presented_leaf(addr, &ca.pem).await.ok() == Some(renewed.der.clone())
    })
    .await;
    let _ = stop.send(());
    task.await.unwrap();
}

#[tokio::test]
async fn a_broken_renewal_keeps_the_previous_certificate_serving() {
    let ca = Ca::new();
    let dir = tempfile::tempdir().unwrap();
    let first = ca.leaf(2031);
    write_pair(dir.path(), &first);
    let (addr, pair, stop, task) = start_server(dir.path(), manual()).await;

    // A new certificate with the old key (half of a renewal), then a garbage key.
    let renewed = ca.leaf(2032);
    write_atomic(&dir.path().join("tls.crt"), renewed.cert_pem.as_bytes());
    assert!(matches!(pair.check_now(), CheckOutcome::Failed(_)));
    assert_eq!(presented_leaf(addr, &ca.pem).await.unwrap(), first.der);
    write_atomic(
        &dir.path().join("tls.key"),
        b"-----BEGIN PRIVATE KEY-----\nAAAA\n",
    );
    assert!(matches!(pair.check_now(), CheckOutcome::Failed(_)));
    assert_eq!(presented_leaf(addr, &ca.pem).await.unwrap(), first.der);
    assert_eq!(pair.reload_failures(), 2);

    // The renewal completes: the new pair serves.
    write_atomic(&dir.path().join("tls.key"), renewed.key_pem.as_bytes());
    assert_eq!(pair.check_now(), CheckOutcome::Loaded);
    assert_eq!(presented_leaf(addr, &ca.pem).await.unwrap(), renewed.der);
    let _ = stop.send(());
    task.await.unwrap();
}

#[tokio::test]
async fn handshakes_fail_until_a_pair_is_loaded() {
    let ca = Ca::new();
    let dir = tempfile::tempdir().unwrap();
    let (addr, pair, stop, task) = start_server(dir.path(), manual()).await;
    assert!(presented_leaf(addr, &ca.pem).await.is_err());
    let leaf = ca.leaf(2031);
    write_pair(dir.path(), &leaf);
    assert_eq!(pair.check_now(), CheckOutcome::Loaded);
    assert_eq!(presented_leaf(addr, &ca.pem).await.unwrap(), leaf.der);
    let _ = stop.send(());
    task.await.unwrap();
}

#[tokio::test]
async fn shutdown_drops_requests_still_running_after_the_grace_period() {
    let ca = Ca::new();
    let dir = tempfile::tempdir().unwrap();
    write_pair(dir.path(), &ca.leaf(2031));
    let pair = watch_pair("tls", &PairFiles::in_secret_dir(dir.path()), manual()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = axum::Router::new().route(
        "/hang",
        axum::routing::get(|| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            "never"
        }),
    );
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let options = ServeOptions {
        shutdown_grace: Duration::from_millis(300),
        ..ServeOptions::default()
    };
    let task = tokio::spawn(serve(
        listener,
        server_config(pair).unwrap(),
        router,
        async {
            let _ = rx.await;
        },
        options,
    ));
    let client = https_client(&ca.pem, addr);
    let hung = tokio::spawn(async move {
        client
            .get(format!("https://localhost:{}/hang", addr.port()))
            .send()
            .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = std::time::Instant::now();
    let _ = tx.send(());
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("serve returns")
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "bounded by the grace period"
    );
    assert!(hung.await.unwrap().is_err(), "the hung request was cut");
}
