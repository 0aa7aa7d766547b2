//! HTTP/2 frames written and read by hand (RFC 9113 section 4), for the attacks no
//! well-behaved client library would send.

use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt as _};

pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const CONTINUATION: u8 = 0x9;
pub const END_STREAM: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
/// `SETTINGS_INITIAL_WINDOW_SIZE`.
pub const INITIAL_WINDOW_SIZE: u16 = 0x4;

/// One frame.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap();
    let mut out = Vec::with_capacity(9 + payload.len());
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// The client preface with a SETTINGS frame of `settings` (identifier, value).
pub fn preface(settings: &[(u16, u32)]) -> Vec<u8> {
    let mut payload = Vec::new();
    for (id, value) in settings {
        payload.extend_from_slice(&id.to_be_bytes());
        payload.extend_from_slice(&value.to_be_bytes());
    }
    let mut out = PREFACE.to_vec();
    out.extend(frame(SETTINGS, 0, 0, &payload));
    out
}

/// An HPACK header block of a GET of `path` over `https` (RFC 7541 static table entries and a
/// literal path without indexing).
pub fn get_block(path: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x87];
    block.push(0x04);
    block.push(u8::try_from(path.len()).unwrap());
    block.extend_from_slice(path.as_bytes());
    block
}

/// A whole GET request on `stream`.
pub fn get(stream: u32, path: &str) -> Vec<u8> {
    frame(HEADERS, END_HEADERS | END_STREAM, stream, &get_block(path))
}

/// A received frame.
#[derive(Debug)]
pub struct Frame {
    pub kind: u8,
    pub payload: Vec<u8>,
}

/// The next frame, or `None` when the connection closed or nothing came within `limit`.
pub async fn next(io: &mut (impl AsyncRead + Unpin + ?Sized), limit: Duration) -> Option<Frame> {
    tokio::time::timeout(limit, async {
        let mut head = [0u8; 9];
        io.read_exact(&mut head).await.ok()?;
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0u8; len];
        io.read_exact(&mut payload).await.ok()?;
        Some(Frame {
            kind: head[3],
            payload,
        })
    })
    .await
    .ok()
    .flatten()
}

/// How a connection ended for a client reading it frame by frame.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    /// A GOAWAY with this error code came (the connection may close after).
    GoAway(u32),
    /// Closed without a GOAWAY.
    Closed,
    /// Still open after the limit.
    Open,
}

/// Reads frames until a GOAWAY, the end of the connection or `limit`; counts the HEADERS
/// frames seen on the way (answers).
pub async fn until_end(io: &mut (impl AsyncRead + Unpin + ?Sized), limit: Duration) -> (End, usize) {
    let deadline = tokio::time::Instant::now() + limit;
    let mut answers = 0;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return (End::Open, answers);
        }
        let Ok(next) = tokio::time::timeout(left, next(io, left)).await else {
            return (End::Open, answers);
        };
        match next {
            None if tokio::time::Instant::now() >= deadline => return (End::Open, answers),
            None => return (End::Closed, answers),
            Some(f) if f.kind == GOAWAY => {
                let code = f
                    .payload
                    .get(4..8)
                    .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                return (End::GoAway(code), answers);
            }
            Some(f) if f.kind == HEADERS => answers += 1,
            Some(_) => {}
        }
    }
}

/// `ENHANCE_YOUR_CALM`.
pub const ENHANCE_YOUR_CALM: u32 = 0xb;
/// `NO_ERROR` (a graceful GOAWAY).
pub const NO_ERROR: u32 = 0x0;
