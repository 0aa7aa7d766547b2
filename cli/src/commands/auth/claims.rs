//! The claims of an ID token the CLI reads: `exp` (when to refresh), `sub` and `groups` (for
//! `ichor auth status`), and the checks a client makes on a freshly issued token.
//!
//! The signature is not verified here: the token came from the issuer's token endpoint over the
//! connection the CLI checked (TLS, or the loopback), and the CLI only hands it to the
//! kube-apiserver, which verifies it fully. The checks below catch a misconfigured or confused
//! issuer and a replayed login (`nonce`), not a forger.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use jiff::Timestamp;
use serde::Deserialize;

/// The largest ID token accepted (a real one is about 1 KiB).
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// The claims the CLI uses.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IdTokenClaims {
    /// The issuer.
    pub iss: String,
    /// The user.
    pub sub: String,
    /// The audience: one string or a list.
    pub aud: Audience,
    /// Expiry, seconds since the epoch.
    pub exp: i64,
    /// The user's roles.
    #[serde(default)]
    pub groups: Vec<String>,
    /// The login's nonce.
    #[serde(default)]
    pub nonce: Option<String>,
}

/// The `aud` claim.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Audience {
    /// A single audience.
    One(String),
    /// Several audiences.
    Many(Vec<String>),
}

impl Audience {
    /// Whether `audience` is one of them.
    pub fn contains(&self, audience: &str) -> bool {
        match self {
            Self::One(a) => a == audience,
            Self::Many(all) => all.iter().any(|a| a == audience),
        }
    }
}

/// What a fresh ID token must say.
#[derive(Debug, Clone, Copy)]
pub struct Expected<'a> {
    /// The issuer URL (`iss`).
    pub issuer: &'a str,
    /// The audience asked for.
    pub audience: &'a str,
    /// The nonce sent with the authorization request (a refresh has none to check).
    pub nonce: Option<&'a str>,
}

/// Why an ID token is refused: a malformed token, or a claim that does not match the login.
#[derive(Debug, thiserror::Error)]
pub enum IdTokenError {
    /// The token is longer than any issuer sends.
    #[error("it is longer than {MAX_TOKEN_BYTES} bytes")]
    TooLong,
    /// The token is not `header.payload.signature`.
    #[error("it is not a compact JWS of three dot-separated parts")]
    NotCompact,
    /// The payload is not base64url.
    #[error("its payload is not base64url: {0}")]
    PayloadEncoding(#[source] base64::DecodeError),
    /// The payload is not the claim set.
    #[error("its payload is not a claim set with iss, sub, aud, exp: {0}")]
    Claims(#[source] serde_json::Error),
    /// Another issuer signed it.
    #[error("iss is {got:?}, not {expected:?}")]
    Issuer {
        /// The token's `iss`.
        got: String,
        /// The issuer logged in to.
        expected: String,
    },
    /// It is not for this audience.
    #[error("aud does not contain {0:?}")]
    Audience(String),
    /// It names no subject.
    #[error("sub is empty")]
    EmptySubject,
    /// It answers another login.
    #[error("nonce does not match the one this login sent")]
    Nonce,
    /// It expired before it was checked.
    #[error("it has already expired (is the clock right?)")]
    Expired,
}

/// Reads the payload of a compact JWS without verifying it (see the module comment).
///
/// # Errors
/// Which part is malformed.
pub fn decode_unverified(token: &str) -> Result<IdTokenClaims, IdTokenError> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(IdTokenError::TooLong);
    }
    let mut parts = token.split('.');
    let (Some(_header), Some(payload), Some(_sig), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(IdTokenError::NotCompact);
    };
    let bytes = URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(IdTokenError::PayloadEncoding)?;
    serde_json::from_slice(&bytes).map_err(IdTokenError::Claims)
}

/// Checks a freshly issued token's claims: issuer, audience, nonce and that it is not expired.
///
/// # Errors
/// The claim that does not match.
pub fn check(claims: &IdTokenClaims, expected: Expected<'_>, now: Timestamp) -> Result<(), IdTokenError> {
    if claims.iss.trim_end_matches('/') != expected.issuer {
        return Err(IdTokenError::Issuer {
            got: claims.iss.clone(),
            expected: expected.issuer.to_owned(),
        });
    }
    if !claims.aud.contains(expected.audience) {
        return Err(IdTokenError::Audience(expected.audience.to_owned()));
    }
    if claims.sub.is_empty() {
        return Err(IdTokenError::EmptySubject);
    }
    if let Some(nonce) = expected.nonce
        && claims.nonce.as_deref() != Some(nonce)
    {
        return Err(IdTokenError::Nonce);
    }
    if claims.exp <= now.as_second() {
        return Err(IdTokenError::Expired);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn jws(payload: &serde_json::Value) -> String {
        format!(
            "eyJhbGciOiJSUzI1NiJ9.{}.c2ln",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(payload).unwrap())
        )
    }

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn good() -> serde_json::Value {
        serde_json::json!({"iss": "https://i.example", "sub": "alice", "aud": "ichor-kube",
            "exp": 1_800_000_300, "groups": ["admin"], "nonce": "n1", "iat": 1})
    }

    const EXPECTED: Expected<'static> = Expected {
        issuer: "https://i.example",
        audience: "ichor-kube",
        nonce: Some("n1"),
    };

    #[test]
    fn reads_the_claims_of_a_token_and_accepts_a_matching_one() {
        let c = decode_unverified(&jws(&good())).unwrap();
        assert_eq!(c.sub, "alice");
        assert_eq!(c.groups, ["admin"]);
        assert_eq!(c.exp, 1_800_000_300);
        check(&c, EXPECTED, now()).unwrap();
    }

    #[test]
    fn accepts_an_audience_list_containing_the_audience() {
        let mut p = good();
        p["aud"] = serde_json::json!(["ichor-ui", "ichor-kube"]);
        check(&decode_unverified(&jws(&p)).unwrap(), EXPECTED, now()).unwrap();
    }

    #[test]
    fn refuses_a_wrong_issuer_audience_nonce_or_an_expired_token() {
        for (field, value, needle) in [
            ("iss", serde_json::json!("https://other.example"), "iss"),
            ("aud", serde_json::json!("ichor-ui"), "aud"),
            ("nonce", serde_json::json!("n2"), "nonce"),
            ("exp", serde_json::json!(1_800_000_000), "expired"),
            ("sub", serde_json::json!(""), "sub"),
        ] {
            let mut p = good();
            p[field] = value;
            let e = check(&decode_unverified(&jws(&p)).unwrap(), EXPECTED, now()).unwrap_err();
            assert!(e.to_string().contains(needle), "{field}: {e}");
        }
    }

    #[test]
    fn refuses_malformed_tokens_with_a_reason() {
        for t in ["", "a.b", "a.b.c.d", "a.!!!.c", "a.e30.c"] {
            assert!(decode_unverified(t).is_err(), "{t}");
        }
        assert!(
            decode_unverified(&"a".repeat(MAX_TOKEN_BYTES + 1))
                .unwrap_err()
                .to_string()
                .contains("longer")
        );
    }
}
