//! `GET /oidc/authorize?<query>` through the real router (query decoding, client and redirect
//! URI checks, state, nonce, scope, PKCE, audience, ticket minting), plus `Params::parse` on the
//! raw bytes (the decoder shared by every form and query).
//!
//! Properties: no panic; the answer is a 302 (to the client or the sign-in page), a 200 with the
//! ticket (JSON variant only) or a 400 (error page or JSON), never a 5xx; a redirect never leaves
//! for an unregistered URI.

use crate::fixtures::{ISSUER, send};
use axum::{
    body::Body,
    http::{Request, Uri, header},
};
use ichor_issuer::oidc::request::Params;

/// One input of the target: returns normally or panics on a broken property.
pub fn run(data: &[u8]) {
    let Some((&selector, query)) = data.split_first() else {
        return;
    };
    if let Ok(params) = Params::parse(query) {
        for name in ["client_id", "redirect_uri", "state", "nonce", "scope", "audience"] {
            let _ = params.get(name);
        }
    }
    let Ok(text) = std::str::from_utf8(query) else {
        return;
    };
    let Ok(uri) = format!("/oidc/authorize?{text}").parse::<Uri>() else {
        return; // hyper would have refused the request line
    };
    let json = selector & 1 == 1;
    let mut request = Request::get(uri);
    if json {
        request = request.header(header::ACCEPT, "application/json");
    }
    let (status, headers, body) = send(request.body(Body::empty()).expect("request"));
    assert!(
        (json && status.as_u16() == 200) || (!json && status.as_u16() == 302) || status.is_client_error(),
        "status {status}: {}",
        String::from_utf8_lossy(&body)
    );
    if let Some(location) = headers.get(header::LOCATION) {
        let location = location.to_str().expect("the Location header is ASCII");
        let trusted = location.starts_with("/oidc/login?ticket=")
            || location.starts_with(&format!("{ISSUER}/auth/callback?"))
            || (location.starts_with("http://127.0.0.1:") && location.contains("/callback?"));
        assert!(trusted, "redirect to an unregistered URI: {location}");
    }
}
