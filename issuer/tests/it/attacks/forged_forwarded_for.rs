//! Forging `X-Forwarded-For`: a pod inside the installation sends the header to be taken for
//! another client (to escape its own bucket, or to empty someone else's). From a peer that is no
//! trusted proxy the header is ignored, and the issuer warns once that an internal peer sends
//! it (an ingress left out of `--trusted-proxy`, behind which everyone shares one address); a
//! trusted network wider than a /24 is warned about at start-up, since anyone inside it can forge.

use std::net::SocketAddr;

use crate::common::*;
use axum::{
    body::Body,
    extract::ConnectInfo,
    http::{Request, StatusCode, header},
};
use ichor_issuer::oidc::TrustedProxies;
use ichor_testkit::issuer::logs;

async fn garbage_from(h: &Harness, peer: &str, forwarded_for: &str) -> StatusCode {
    let mut req = Request::post("/oidc/token")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header("x-forwarded-for", forwarded_for)
        .body(Body::from(
            "grant_type=refresh_token&refresh_token=garbage&client_id=ichor-cli",
        ))
        .expect("req");
    let peer: SocketAddr = peer.parse().expect("addr");
    req.extensions_mut().insert(ConnectInfo(peer));
    h.send(req).await.status
}

#[tokio::test(flavor = "current_thread")]
async fn a_pod_forging_forwarded_for_keeps_its_own_bucket_and_is_warned_about_once() {
    let log = logs::capture();
    let h = Harness::with_proxies(TrustedProxies::parse(&["10.0.12.7/32"]).expect("proxies"));
    // A pod at 10.0.9.9 names a new client in every request: all of them are its own.
    for n in 0..60 {
        let status = garbage_from(&h, "10.0.9.9:1", &format!("198.51.100.{n}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "request {n}");
    }
    assert_eq!(
        garbage_from(&h, "10.0.9.9:1", "198.51.100.200").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // The trusted proxy's header is believed: its client has a bucket of its own.
    assert_eq!(
        garbage_from(&h, "10.0.12.7:1", "203.0.113.5").await,
        StatusCode::BAD_REQUEST
    );
    let text = log.text();
    let warnings = text.matches("carries X-Forwarded-For or Forwarded").count();
    assert_eq!(warnings, 1, "{text}");
    assert!(
        text.contains("10.0.9.9/32"),
        "the exact address to trust is named: {text}"
    );
    assert!(!text.contains("198.51.100."), "no header value is logged: {text}");
}

#[tokio::test(flavor = "current_thread")]
async fn trusting_a_whole_private_range_is_warned_about_at_start_up() {
    let log = logs::capture();
    let _h = Harness::with_proxies(TrustedProxies::parse(&["10.0.0.0/8", "10.0.12.7/32"]).expect("proxies"));
    let text = log.text();
    assert!(
        text.contains("trusted proxy network 10.0.0.0/8 holds more than 256"),
        "{text}"
    );
    assert!(!text.contains("10.0.12.7/32 holds"), "{text}");
}
