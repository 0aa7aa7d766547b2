//! `POST /oidc/token` bodies through the real router (form parsing, grant dispatch, code and
//! refresh token verification, PKCE, the store updates), on a fresh issuer per input with a
//! fixed clock and keys. Placeholders expand to a valid code and refresh token of alice.
//!
//! Properties: no panic; the answer is 200 or a 4xx/503 OAuth error, never a 500 (the
//! in-memory store cannot fail), and always JSON.

use crate::fixtures::post_form;

/// One input of the target: returns normally or panics on a broken property.
pub fn run(data: &[u8]) {
    let (status, _, body) = post_form("/oidc/token", data);
    assert!(
        status.is_success() || status.is_client_error() || status.as_u16() == 503,
        "status {status}: {}",
        String::from_utf8_lossy(&body)
    );
    let json: serde_json::Value = serde_json::from_slice(&body).expect("the answer is JSON");
    if !status.is_success() {
        assert!(json["error"].is_string(), "an error answer names its error");
    }
}
