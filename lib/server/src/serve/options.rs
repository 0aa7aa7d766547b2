//! The limits and timeouts of [`serve`](super::serve) and [`serve_http`](super::serve_http), and
//! the hyper connection builder they configure. Every one bounds what a client that never
//! authenticates can make the process hold: SECURITY.md ("Abuse bounds") lists what each implies.

use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use std::time::Duration;

/// Limits and timeouts of [`serve`](super::serve) and [`serve_http`](super::serve_http).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeOptions {
    /// Longest TLS handshake; a slower client is dropped.
    pub handshake_timeout: Duration,
    /// Longest time to receive the request headers of an HTTP/1.1 request, counted from when
    /// the connection is ready for one (so it also closes idle keep-alive connections), and the
    /// longest time from the end of the TLS handshake (or the TCP accept) to a connection's first
    /// request, for both protocols: a client that sends nothing, or part of the HTTP/2 preface,
    /// is dropped after it.
    pub header_read_timeout: Duration,
    /// Longest time a connection may stay open with no request in flight after its first one
    /// (HTTP/2 connections, which hyper never closes on its own while the peer answers pings).
    pub idle_timeout: Duration,
    /// Longest time one request may take from its headers to the end of its response, body
    /// uploads and downloads included; past it the whole connection is dropped. Bounds a body
    /// trickled after its headers and a client that never reads its response (or never opens its
    /// HTTP/2 window). Generous, for people behind slow links: the largest answer is a few
    /// hundred KiB.
    pub request_timeout: Duration,
    /// Longest time an answer the handler has produced may wait for the connection to take its
    /// body; past it the whole connection is dropped. Only a client that never opens its HTTP/2
    /// stream window gets near it (any window at all lets the body into the connection's send
    /// buffer at once, and an HTTP/1.1 answer goes into the socket's), so it can be short: it
    /// bounds how long answers are held for such a client.
    pub answer_timeout: Duration,
    /// Largest HTTP/1.1 read buffer, which bounds the request line and headers.
    pub max_header_bytes: usize,
    /// Largest HTTP/2 header list.
    pub max_h2_header_list_bytes: u32,
    /// Most concurrent HTTP/2 streams per connection. A stream whose answer the client does not
    /// take stays open, so this times [`max_connections`](Self::max_connections) bounds the
    /// answers held for clients that never read: 8 × 4096 × about 2 KiB is 64 MiB. Browsers and
    /// Go's HTTP/2 client queue further requests or open another connection.
    pub max_h2_streams: u32,
    /// HTTP/2 streams the client may reset before they are accepted, at once, before the
    /// connection is closed with `ENHANCE_YOUR_CALM` (the rapid-reset attack, CVE-2023-44487).
    pub max_h2_pending_accept_reset_streams: usize,
    /// HTTP/2 streams this side may reset for the peer's protocol errors before the connection
    /// is closed (a peer provoking resets in a loop).
    pub max_h2_local_error_reset_streams: usize,
    /// HTTP/2 flow-control window per stream: the request body a stream may have sent and not
    /// yet been read. The largest body a route reads is well under it, read as it arrives.
    pub h2_stream_window_bytes: u32,
    /// HTTP/2 flow-control window per connection: unread request bodies of all its streams.
    pub h2_connection_window_bytes: u32,
    /// Most response bytes buffered per HTTP/2 stream for a client that does not read them.
    pub max_h2_send_buf_bytes: usize,
    /// Interval of the HTTP/2 keep-alive pings.
    pub h2_keep_alive_interval: Duration,
    /// How long an HTTP/2 keep-alive ping may go unanswered before the connection is closed.
    pub h2_keep_alive_timeout: Duration,
    /// Largest request body.
    pub max_body_bytes: usize,
    /// Most connections open at once; further connections wait in the kernel's backlog.
    pub max_connections: usize,
    /// Most requests being handled at once, over all connections; further requests are answered
    /// `503` with `Retry-After` at once. Bounds the request bodies held by handlers.
    pub max_requests_in_flight: usize,
    /// How long in-flight requests may run after the shutdown signal.
    pub shutdown_grace: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(120),
            answer_timeout: Duration::from_secs(10),
            max_header_bytes: 64 * 1024,
            max_h2_header_list_bytes: 64 * 1024,
            max_h2_streams: 8,
            max_h2_pending_accept_reset_streams: 20,
            max_h2_local_error_reset_streams: 64,
            h2_stream_window_bytes: 64 * 1024,
            h2_connection_window_bytes: 256 * 1024,
            max_h2_send_buf_bytes: 64 * 1024,
            h2_keep_alive_interval: Duration::from_secs(30),
            h2_keep_alive_timeout: Duration::from_secs(20),
            max_body_bytes: 1024 * 1024,
            max_connections: 4096,
            max_requests_in_flight: 1024,
            shutdown_grace: Duration::from_secs(20),
        }
    }
}

impl ServeOptions {
    /// The hyper builder for every connection: HTTP/1.1 and HTTP/2 with these limits.
    pub(super) fn builder(&self) -> Builder<TokioExecutor> {
        let mut builder = Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(self.header_read_timeout)
            .max_buf_size(self.max_header_bytes.max(8192));
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_header_list_size(self.max_h2_header_list_bytes)
            .max_concurrent_streams(self.max_h2_streams)
            .max_pending_accept_reset_streams(self.max_h2_pending_accept_reset_streams)
            .max_local_error_reset_streams(self.max_h2_local_error_reset_streams)
            .initial_stream_window_size(self.h2_stream_window_bytes)
            .initial_connection_window_size(self.h2_connection_window_bytes)
            .max_send_buf_size(self.max_h2_send_buf_bytes)
            .keep_alive_interval(self.h2_keep_alive_interval)
            .keep_alive_timeout(self.h2_keep_alive_timeout);
        builder
    }
}
