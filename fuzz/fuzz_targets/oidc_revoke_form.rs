//! `POST /oidc/revoke` bodies through the real router (form parsing, client check, refresh
//! token verification, family revocation), on a fresh issuer per input. `@REFRESH@` expands
//! to a valid refresh token of alice's family.
//!
//! Properties: no panic; the answer is 200 or a 4xx OAuth error, never a 5xx (the in-memory
//! store cannot fail).
#![no_main]

use axum::{
    body::Body,
    http::{Request, header},
};
use ichor_fuzz::{expand, send};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let body = match std::str::from_utf8(data) {
        Ok(text) => expand(text).into_bytes(),
        Err(_) => data.to_vec(),
    };
    let request = Request::post("/oidc/revoke")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(body))
        .expect("request");
    let (status, _, body) = send(request);
    assert!(
        status.is_success() || status.is_client_error(),
        "status {status}: {}",
        String::from_utf8_lossy(&body)
    );
});
