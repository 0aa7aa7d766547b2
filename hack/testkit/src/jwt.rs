//! Reading a JWT without verifying it, for assertions: verifying is the test's business, and
//! the real verifiers (the issuer's, go-oidc's, the apiserver's) do it where a test needs it.

use anyhow::Context as _;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

fn part(jwt: &str, index: usize, what: &str) -> anyhow::Result<serde_json::Value> {
    let text = jwt
        .split('.')
        .nth(index)
        .with_context(|| format!("not a JWT: no {what}"))?;
    let bytes = URL_SAFE_NO_PAD
        .decode(text)
        .with_context(|| format!("the JWT {what} is not base64url"))?;
    serde_json::from_slice(&bytes).with_context(|| format!("the JWT {what} is not JSON"))
}

/// A JWT's payload (its claims), decoded without verification.
///
/// # Errors
/// When `jwt` has no payload, or it is not base64url JSON.
pub fn try_claims(jwt: &str) -> anyhow::Result<serde_json::Value> {
    part(jwt, 1, "payload")
}

/// A JWT's claims, decoded without verification; panics when it is not a JWT.
pub fn claims(jwt: &str) -> serde_json::Value {
    try_claims(jwt).expect("a JWT with a JSON payload")
}

/// A JWT's JOSE header, decoded without verification; panics when it is not a JWT.
pub fn header(jwt: &str) -> serde_json::Value {
    part(jwt, 0, "header").expect("a JWT with a JSON header")
}
