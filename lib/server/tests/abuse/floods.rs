//! HTTP/2 floods over TLS (the listeners the internet reaches): rapid reset, CONTINUATION,
//! PING and SETTINGS. Each is cut (GOAWAY or close) or held back by the server not reading,
//! and the server keeps answering other clients meanwhile.

use crate::h2_frames::{self, End};
use crate::harness::*;
use ichor_server::ServeOptions;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::io::AsyncWriteExt as _;

#[tokio::test]
async fn a_rapid_reset_flood_is_cut_with_enhance_your_calm_while_others_are_served() {
    let server = Server::start(Kind::Tls, patient()).await;
    const STREAMS: u32 = 10_000;
    let mut bytes = h2_frames::preface(&[]);
    for i in 0..STREAMS {
        let stream = 2 * i + 1;
        bytes.extend(h2_frames::get(stream, "/"));
        bytes.extend(h2_frames::frame(
            h2_frames::RST_STREAM,
            0,
            stream,
            &8u32.to_be_bytes(),
        ));
    }
    let mut io = server.connect(b"h2").await;
    let (mut reader, mut writer) = tokio::io::split(io.as_mut());
    let (_, (end, _)) = tokio::join!(
        async {
            let _ = writer.write_all(&bytes).await;
        },
        h2_frames::until_end(&mut reader, Duration::from_secs(20)),
    );
    assert_eq!(end, End::GoAway(h2_frames::ENHANCE_YOUR_CALM));
    let handled = server.handled.load(Ordering::SeqCst);
    assert!(
        handled < STREAMS as usize / 2,
        "most streams never reached a handler: {handled}"
    );
    still_serves(&server).await;
    server.stop().await;
}

#[tokio::test]
async fn a_continuation_flood_is_cut_before_it_is_all_read() {
    let server = Server::start(Kind::Tls, patient()).await;
    let mut io = server.connect(b"h2").await;
    let mut start = h2_frames::preface(&[]);
    start.extend(h2_frames::frame(
        h2_frames::HEADERS,
        0,
        1,
        &h2_frames::get_block("/"),
    ));
    // Literal headers without indexing, 16 KiB of them per frame, never ending: 64 MiB in all.
    let mut block = Vec::new();
    while block.len() < 16_000 {
        block.extend_from_slice(&[0x00, 0x03, b'x', b'-', b'a', 0x7f, 0x80, 0x01]);
        block.extend(std::iter::repeat_n(b'v', 255));
    }
    let continuation = h2_frames::frame(h2_frames::CONTINUATION, 0, 1, &block);
    let (mut reader, mut writer) = tokio::io::split(io.as_mut());
    let (written, (end, answers)) = tokio::join!(
        async {
            if writer.write_all(&start).await.is_err() {
                return false;
            }
            for _ in 0..4096 {
                if writer.write_all(&continuation).await.is_err() {
                    return false;
                }
            }
            true
        },
        h2_frames::until_end(&mut reader, Duration::from_secs(20)),
    );
    assert!(matches!(end, End::GoAway(_) | End::Closed), "{end:?}");
    assert!(!written, "the server stopped reading long before 64 MiB");
    assert_eq!(answers, 0);
    assert_eq!(server.handled.load(Ordering::SeqCst), 0);
    still_serves(&server).await;
    server.stop().await;
}

/// Writes `flood` (a million frames' worth) to a fresh HTTP/2 connection without ever reading;
/// true when all of it was accepted.
async fn unread_flood(server: &Server, frame: &[u8]) -> bool {
    let mut io = server.connect(b"h2").await;
    io.write_all(&h2_frames::preface(&[])).await.unwrap();
    let chunk = frame.repeat(64 * 1024 / frame.len());
    let total = 48 * 1024 * 1024;
    let mut sent = 0;
    while sent < total {
        match tokio::time::timeout(Duration::from_secs(10), io.write_all(&chunk)).await {
            Ok(Ok(())) => sent += chunk.len(),
            Ok(Err(_)) => return false,
            Err(_) => panic!("a write stayed blocked past the first-request bound"),
        }
    }
    true
}

#[tokio::test]
async fn ping_and_settings_floods_from_a_client_that_never_reads_are_not_absorbed() {
    let server = Server::start(
        Kind::Tls,
        ServeOptions {
            header_read_timeout: Duration::from_millis(500),
            ..patient()
        },
    )
    .await;
    let ping = h2_frames::frame(h2_frames::PING, 0, 0, &[7; 8]);
    let settings = h2_frames::frame(h2_frames::SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 100]);
    let (pings, settings) = tokio::join!(unread_flood(&server, &ping), unread_flood(&server, &settings));
    // The answers the server owes fill the unread socket, the server stops reading, and the
    // connection (with no request) is dropped after its bound: the flood never all got in.
    assert!(!pings, "the PING flood was cut");
    assert!(!settings, "the SETTINGS flood was cut");
    still_serves(&server).await;
    server.stop().await;
}
