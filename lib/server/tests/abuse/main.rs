//! The abuse bounds of `serve` (TLS, the issuer's external and internal listeners) and
//! `serve_http` (plain, the metrics listener), on real loopback sockets with raw clients: slow
//! and silent clients dropped after their bound, oversize requests refused without being read,
//! HTTP/2 floods cut or absorbed without stopping service to others, and the connection and
//! request caps. Timeouts are shortened through `ServeOptions`; the assertions are about what
//! happens (closed, refused, served), with a generous slack where a bound is in time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod h2_frames;
mod harness;

mod floods;
mod sizes_and_caps;
mod slow_clients;
