//! `POST /oidc/revoke` bodies through the real router (form parsing, client check, refresh
//! token verification, family revocation), on a fresh issuer per input. `@REFRESH@` expands
//! to a valid refresh token of alice's family.
//!
//! Properties: no panic; the answer is 200 or a 4xx OAuth error, never a 5xx (the in-memory
//! store cannot fail).

use crate::fixtures::post_form;

/// One input of the target: returns normally or panics on a broken property.
pub fn run(data: &[u8]) {
    let (status, _, body) = post_form("/oidc/revoke", data);
    assert!(
        status.is_success() || status.is_client_error(),
        "status {status}: {}",
        String::from_utf8_lossy(&body)
    );
}
