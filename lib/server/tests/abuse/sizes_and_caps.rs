//! Oversize requests refused with their status before being read, and the connection and
//! request-in-flight caps.

use crate::harness::*;
use ichor_server::ServeOptions;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

#[tokio::test]
async fn an_oversize_body_is_refused_with_413_from_its_length_alone() {
    for kind in KINDS {
        let server = Server::start(kind, patient()).await;
        let mut io = server.connect(b"http/1.1").await;
        // Headers only: the 10 MiB never follow, so an answer proves none of it was awaited.
        io.write_all(b"POST /echo HTTP/1.1\r\nhost: localhost\r\ncontent-length: 10485760\r\n\r\n")
            .await
            .unwrap();
        let read = read_for(&mut io, Duration::from_secs(5)).await;
        assert_eq!(status(&read.bytes), 413, "{kind:?}");
        assert_eq!(
            server.handled.load(Ordering::SeqCst),
            0,
            "{kind:?}: no handler ran"
        );
        server.stop().await;
    }
}

#[tokio::test]
async fn a_chunked_body_past_the_limit_is_refused_with_413() {
    let server = Server::start(Kind::Tls, patient()).await;
    let mut io = server.connect(b"http/1.1").await;
    io.write_all(b"POST /echo HTTP/1.1\r\nhost: localhost\r\ntransfer-encoding: chunked\r\n\r\n")
        .await
        .unwrap();
    let chunk = format!("10000\r\n{}\r\n", "a".repeat(0x10000));
    let (mut reader, mut writer) = tokio::io::split(io.as_mut());
    let (_, read) = tokio::join!(
        async {
            // 32 MiB offered; the server stops after the 1 MiB limit.
            for _ in 0..512 {
                if writer.write_all(chunk.as_bytes()).await.is_err() {
                    return;
                }
            }
        },
        read_for(&mut reader, Duration::from_secs(10)),
    );
    assert_eq!(status(&read.bytes), 413);
    server.stop().await;
}

#[tokio::test]
async fn oversize_headers_and_query_strings_are_refused_with_431() {
    for kind in KINDS {
        let server = Server::start(kind, patient()).await;
        let header = format!("GET / HTTP/1.1\r\nx-big: {}", "a".repeat(70 * 1024));
        assert_eq!(server.status_of(&header).await, 431, "{kind:?} header");
        let query = format!("GET /?q={} HTTP/1.1", "a".repeat(70 * 1024));
        assert_eq!(server.status_of(&query).await, 431, "{kind:?} query");
        assert_eq!(server.handled.load(Ordering::SeqCst), 0);
        still_serves(&server).await;
        server.stop().await;
    }
}

#[tokio::test]
async fn connections_past_the_cap_wait_until_one_closes() {
    let server = Server::start(
        Kind::Tls,
        ServeOptions {
            max_connections: 2,
            ..patient()
        },
    )
    .await;
    let first = server.connect(b"http/1.1").await;
    let _second = server.connect(b"http/1.1").await;
    // The third is in the kernel's backlog: its handshake is not answered while two are open.
    let tcp = TcpStream::connect(server.addr).await.unwrap();
    let waiting = tokio::time::timeout(Duration::from_millis(500), server.tls_over(tcp, b"http/1.1")).await;
    assert!(waiting.is_err(), "no handshake past the cap");
    drop(first);
    let tcp = TcpStream::connect(server.addr).await.unwrap();
    let admitted = tokio::time::timeout(Duration::from_secs(5), server.tls_over(tcp, b"http/1.1")).await;
    assert!(matches!(admitted, Ok(Ok(_))), "admitted once one closed");
    server.stop().await;
}

#[tokio::test]
async fn requests_past_the_in_flight_cap_are_answered_503_at_once() {
    let server = Server::start(
        Kind::Tls,
        ServeOptions {
            max_requests_in_flight: 2,
            request_timeout: Duration::from_secs(1),
            ..patient()
        },
    )
    .await;
    let mut hung = Vec::new();
    for _ in 0..2 {
        let mut io = server.connect(b"http/1.1").await;
        io.write_all(b"GET /hang HTTP/1.1\r\nhost: localhost\r\n\r\n")
            .await
            .unwrap();
        hung.push(io);
    }
    let mut tries = 0;
    while server.handled.load(Ordering::SeqCst) < 2 {
        tries += 1;
        assert!(tries < 500, "the two hanging requests started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut io = server.connect(b"http/1.1").await;
    io.write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let read = read_for(&mut io, Duration::from_secs(5)).await;
    assert_eq!(status(&read.bytes), 503);
    assert!(
        String::from_utf8_lossy(&read.bytes)
            .to_lowercase()
            .contains("retry-after: 1")
    );
    assert_eq!(
        server.handled.load(Ordering::SeqCst),
        2,
        "the third never reached the router"
    );
    drop(hung);
    // The permits come back when the request bound drops the hanging requests.
    let mut tries = 0;
    loop {
        if server.status_of("GET / HTTP/1.1").await == 200 {
            break;
        }
        tries += 1;
        assert!(tries < 100, "served again once the hanging requests ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.stop().await;
}

#[tokio::test]
async fn answers_a_client_never_takes_do_not_hold_the_in_flight_cap() {
    let server = Server::start(
        Kind::Tls,
        ServeOptions {
            max_requests_in_flight: 2,
            ..patient()
        },
    )
    .await;
    // Ten answers produced for a stream window of zero: none can be sent.
    let mut h2 = server.connect(b"h2").await;
    let mut bytes = crate::h2_frames::preface(&[(crate::h2_frames::INITIAL_WINDOW_SIZE, 0)]);
    for i in 0..10 {
        bytes.extend(crate::h2_frames::get(2 * i + 1, "/big"));
    }
    h2.write_all(&bytes).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    for _ in 0..3 {
        still_serves(&server).await;
    }
    drop(h2);
    server.stop().await;
}

#[tokio::test]
async fn a_connection_holds_no_more_answers_a_client_never_takes_than_its_stream_cap() {
    use crate::h2_frames::{HEADERS, INITIAL_WINDOW_SIZE, RST_STREAM, get, next, preface};
    // The default cap: with the connection cap it bounds what such clients make the server hold.
    let cap = usize::try_from(ServeOptions::default().max_h2_streams).unwrap();
    assert_eq!(cap, 8);
    let server = Server::start(Kind::Tls, patient()).await;
    // Forty requests whose answers can never be sent (a stream window of zero).
    let mut h2 = server.connect(b"h2").await;
    let mut bytes = preface(&[(INITIAL_WINDOW_SIZE, 0)]);
    for i in 0..40 {
        bytes.extend(get(2 * i + 1, "/"));
    }
    h2.write_all(&bytes).await.unwrap();
    let (mut answered, mut refused) = (0, 0);
    while let Some(frame) = next(&mut h2, Duration::from_secs(1)).await {
        match frame.kind {
            HEADERS => answered += 1,
            // REFUSED_STREAM: never processed, the client may retry it.
            RST_STREAM if frame.payload == [0, 0, 0, 7] => refused += 1,
            _ => {}
        }
    }
    assert_eq!(answered, cap, "answers held on one connection");
    assert_eq!(refused, 40 - cap, "the streams past the cap were refused");
    assert_eq!(server.handled.load(Ordering::SeqCst), cap);
    drop(h2);
    still_serves(&server).await;
    server.stop().await;
}
