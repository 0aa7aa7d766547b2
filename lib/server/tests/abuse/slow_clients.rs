//! Slow and silent clients on both listener kinds: each holds a connection (and its place under
//! the connection cap) no longer than its bound.

use crate::h2_frames::{self, End};
use crate::harness::*;
use ichor_server::ServeOptions;
use std::time::Duration;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

const BOUND: Duration = Duration::from_millis(500);

#[tokio::test]
async fn a_tls_handshake_never_finished_is_dropped_after_the_handshake_bound() {
    let server = Server::start(
        Kind::Tls,
        ServeOptions {
            handshake_timeout: BOUND,
            ..patient()
        },
    )
    .await;
    // Nothing at all, then half a ClientHello's record header.
    let mut silent = TcpStream::connect(server.addr).await.unwrap();
    let mut partial = TcpStream::connect(server.addr).await.unwrap();
    partial.write_all(&[0x16, 0x03, 0x01, 0x02]).await.unwrap();
    for io in [&mut silent, &mut partial] {
        let read = read_for(io, BOUND + SLACK).await;
        assert!(read.closed_after.is_some(), "dropped within the bound");
        assert!(read.bytes.is_empty());
    }
    still_serves(&server).await;
    server.stop().await;
}

#[tokio::test]
async fn a_connection_that_sends_no_request_is_dropped_on_both_listeners() {
    for kind in KINDS {
        let server = Server::start(
            kind,
            ServeOptions {
                header_read_timeout: BOUND,
                ..patient()
            },
        )
        .await;
        // Silent after the handshake; part of the HTTP/2 preface (before hyper knows the
        // protocol); the whole preface and SETTINGS but no stream.
        let mut silent = server.connect(b"http/1.1").await;
        let mut half_preface = server.connect(b"h2").await;
        half_preface.write_all(&h2_frames::PREFACE[..10]).await.unwrap();
        let mut no_stream = server.connect(b"h2").await;
        no_stream.write_all(&h2_frames::preface(&[])).await.unwrap();
        for (what, io) in [
            ("silent", &mut silent),
            ("half a preface", &mut half_preface),
            ("no stream", &mut no_stream),
        ] {
            let read = read_for(io, BOUND + SLACK).await;
            assert!(
                read.closed_after.is_some(),
                "{kind:?} {what}: dropped within the bound"
            );
        }
        still_serves(&server).await;
        server.stop().await;
    }
}

#[tokio::test]
async fn headers_trickled_are_dropped_after_the_header_bound_on_both_listeners() {
    for kind in KINDS {
        let server = Server::start(
            kind,
            ServeOptions {
                header_read_timeout: BOUND,
                ..patient()
            },
        )
        .await;
        let mut io = server.connect(b"http/1.1").await;
        io.write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\n")
            .await
            .unwrap();
        let read = trickle(io, b"x-a: b\r\n", Duration::from_millis(50), BOUND + SLACK).await;
        assert!(read.closed_after.is_some(), "{kind:?}: dropped within the bound");
        assert_ne!(status(&read.bytes), 200, "{kind:?}: never answered as a request");
        assert_eq!(server.handled.load(std::sync::atomic::Ordering::SeqCst), 0);
        still_serves(&server).await;
        server.stop().await;
    }
}

#[tokio::test]
async fn a_body_trickled_after_its_headers_is_dropped_after_the_request_bound_on_both_listeners() {
    for kind in KINDS {
        let server = Server::start(
            kind,
            ServeOptions {
                request_timeout: BOUND,
                ..patient()
            },
        )
        .await;
        let mut io = server.connect(b"http/1.1").await;
        io.write_all(b"POST /echo HTTP/1.1\r\nhost: localhost\r\ncontent-length: 100000\r\n\r\n")
            .await
            .unwrap();
        let read = trickle(io, b"a", Duration::from_millis(50), BOUND + SLACK).await;
        assert!(read.closed_after.is_some(), "{kind:?}: dropped within the bound");
        assert_ne!(status(&read.bytes), 200, "{kind:?}: the body never completed");
        still_serves(&server).await;
        server.stop().await;
    }
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_its_bound_on_both_protocols() {
    for kind in KINDS {
        let server = Server::start(
            kind,
            ServeOptions {
                header_read_timeout: BOUND,
                idle_timeout: BOUND,
                ..patient()
            },
        )
        .await;
        // HTTP/1.1: one request answered, then hyper's head timer runs for the next one.
        let mut h1 = server.connect(b"http/1.1").await;
        h1.write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\n")
            .await
            .unwrap();
        let read = read_for(&mut h1, BOUND + SLACK).await;
        assert_eq!(status(&read.bytes), 200, "{kind:?}: the request was answered");
        assert!(read.closed_after.is_some(), "{kind:?} h1: closed when idle");
        // HTTP/2: one request answered, then nothing; pings are answered by any client
        // library, which would keep it open for ever without the idle bound.
        let mut h2 = server.connect(b"h2").await;
        let mut bytes = h2_frames::preface(&[]);
        bytes.extend(h2_frames::get(1, "/"));
        h2.write_all(&bytes).await.unwrap();
        let (end, answers) = h2_frames::until_end(&mut h2, BOUND + SLACK).await;
        assert_eq!(answers, 1, "{kind:?}: the request was answered");
        assert_eq!(
            end,
            End::GoAway(h2_frames::NO_ERROR),
            "{kind:?} h2: closed when idle"
        );
        assert!(read_for(&mut h2, SLACK).await.closed_after.is_some());
        server.stop().await;
    }
}

#[tokio::test]
async fn a_client_that_never_reads_its_answer_is_dropped_on_both_protocols() {
    for kind in KINDS {
        let server = Server::start(
            kind,
            ServeOptions {
                request_timeout: BOUND,
                idle_timeout: BOUND,
                ..patient()
            },
        )
        .await;
        // HTTP/2 with a stream window of zero: no DATA may ever be sent.
        let mut h2 = server.connect(b"h2").await;
        let mut bytes = h2_frames::preface(&[(h2_frames::INITIAL_WINDOW_SIZE, 0)]);
        bytes.extend(h2_frames::get(1, "/big"));
        h2.write_all(&bytes).await.unwrap();
        // HTTP/1.1: the answer left unread in the socket.
        let mut h1 = server.connect(b"http/1.1").await;
        h1.write_all(b"GET /big HTTP/1.1\r\nhost: localhost\r\n\r\n")
            .await
            .unwrap();
        tokio::time::sleep(BOUND + SLACK).await;
        for (what, io) in [("h2", &mut h2), ("h1", &mut h1)] {
            let read = read_for(io, SLACK).await;
            assert!(read.closed_after.is_some(), "{kind:?} {what}: dropped");
            assert!(
                read.bytes.len() < BIG + 1024 || what == "h1",
                "{kind:?} {what}: window kept"
            );
        }
        still_serves(&server).await;
        server.stop().await;
    }
}

#[tokio::test]
async fn an_answer_never_taken_drops_the_connection_at_the_answer_bound_not_the_request_bound() {
    let server = Server::start(
        Kind::Tls,
        ServeOptions {
            answer_timeout: BOUND,
            ..patient()
        },
    )
    .await;
    // A stream window of zero: the answer is produced and its headers sent, its body never.
    let mut h2 = server.connect(b"h2").await;
    let mut bytes = h2_frames::preface(&[(h2_frames::INITIAL_WINDOW_SIZE, 0)]);
    bytes.extend(h2_frames::get(1, "/"));
    h2.write_all(&bytes).await.unwrap();
    let (end, answers) = h2_frames::until_end(&mut h2, BOUND + SLACK).await;
    assert_eq!(answers, 1, "the answer was produced");
    assert_ne!(
        end,
        End::Open,
        "held past the answer bound (the request bound is a minute)"
    );
    still_serves(&server).await;
    server.stop().await;
}
