//! The issuer as the `UserService`'s [`BearerVerifier`]: a bearer token is an ID token of this
//! issuer for audience `ichor-ui`, checked with the same keys, issuer and clock as the token
//! endpoint signs with (so a key rotation reaches both at once).

use std::sync::Arc;

use jiff::Timestamp;

use super::Issuer;
use crate::api::auth::{API_AUDIENCE, BearerClaims, BearerError, BearerVerifier};

fn instant(field: &str, seconds: i64) -> Result<Timestamp, BearerError> {
    Timestamp::from_second(seconds).map_err(|_| BearerError(format!("claim {field} is out of range")))
}

impl BearerVerifier for Issuer {
    /// Verifies with [`Issuer::verify_id_token`] for `ichor-ui` at the issuer's own clock (`now`
    /// is the API's clock, the same system clock outside tests).
    fn verify(&self, token: &str, _now: Timestamp) -> Result<BearerClaims, BearerError> {
        let claims = self
            .verify_id_token(token, API_AUDIENCE)
            .map_err(|e| BearerError(e.to_string()))?;
        Ok(BearerClaims {
            iat: instant("iat", claims.iat)?,
            exp: instant("exp", claims.exp)?,
            sub: claims.sub,
            groups: claims.groups,
            amr: claims.amr,
        })
    }
}

/// The shared issuer verifies as the issuer does (the routers and the API share one `Arc`).
impl BearerVerifier for Arc<Issuer> {
    fn verify(&self, token: &str, now: Timestamp) -> Result<BearerClaims, BearerError> {
        Issuer::verify(self, token, now)
    }
}
