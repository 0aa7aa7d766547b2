//! The tokens the issuer mints and checks, as compact JWS (RFC 7515) built by hand over
//! josekit's signers, so every header field is under this module's control.
//!
//! | token | alg | header `typ` | key | lifetime |
//! |---|---|---|---|---|
//! | ID token | RS256 | `JWT` | the RSA key signing at `now` | `tokenTTL` (settings) |
//! | login ticket | HS256 | `ichor-ticket+jwt` | the HMAC key signing at `now` | 5 minutes |
//! | authorization code | HS256 | `ichor-code+jwt` | the HMAC key signing at `now` | 60 seconds |
//! | second-factor ticket | HS256 | `ichor-factor+jwt` | the HMAC key signing at `now` | 5 minutes |
//! | authenticator-app enrolment ticket ([`enrol`]) | HS256 | `ichor-totp-enrol+jwt` | the HMAC key signing at `now` | 10 minutes |
//! | refresh token | HS256 | `ichor-refresh+jwt` | the HMAC key signing at the generation's instant | the family's absolute end |
//!
//! # Guarantees
//! - Verification checks, in this order: size, shape (three unpadded base64url segments, a
//!   header with exactly `alg`, `kid`, `typ`), `alg` equal to the one expected (`HS256` for
//!   artifacts, `RS256` for ID tokens; `none` and everything else refused), `typ` equal to the
//!   one expected (so no artifact passes as another), `kid` known and live at `now`, the
//!   signature (HMAC compared in constant time), then the payload: `iss`, expiry (`now < exp`).
//! - The refresh token of a (family, generation) is deterministic: its claims come from the
//!   family record and it is signed with the HMAC key that signed at the generation's instant,
//!   so the 10-second grace window can hand out the same successor without storing it.
//! - `iat` is `now` truncated to whole seconds, never in the future.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use subtle::ConstantTimeEq;

use crate::keys::{LoadedKeys, b64};

pub mod enrol;
pub mod factor;
pub use enrol::{PasskeyEnrolClaims, TOTP_ENROL_TTL, TYP_PASSKEY_ENROL, TYP_TOTP_ENROL, TotpEnrolClaims};
pub use factor::{FactorClaims, MAX_FACTOR_TICKET_BYTES, PasskeyChallenge, TYP_FACTOR};

/// The longest token accepted for verification, in bytes.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;
/// Lifetime of a login ticket.
pub const TICKET_TTL: SignedDuration = SignedDuration::from_mins(5);
/// Lifetime of an authorization code.
pub const CODE_TTL: SignedDuration = SignedDuration::from_secs(60);
/// Header `typ` of ID tokens.
pub const TYP_ID_TOKEN: &str = "JWT";
/// Header `typ` of login tickets.
pub const TYP_TICKET: &str = "ichor-ticket+jwt";
/// Header `typ` of authorization codes.
pub const TYP_CODE: &str = "ichor-code+jwt";
/// Header `typ` of refresh tokens.
pub const TYP_REFRESH: &str = "ichor-refresh+jwt";

/// Why a token could not be minted or was refused. Messages never contain the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The token is larger than its kind may be ([`MAX_TOKEN_BYTES`], or
    /// [`Artifact::MAX_BYTES`]).
    #[error("token: longer than a token of its kind may be")]
    TooLong,
    /// Not three base64url segments with a JSON header and payload.
    #[error("token: not a compact JWS ({0})")]
    Malformed(&'static str),
    /// The header `alg` is not the expected one.
    #[error("token: header alg {got:?} is refused; only {expected} is accepted here")]
    Algorithm {
        /// The accepted algorithm.
        expected: &'static str,
        /// The algorithm found (truncated).
        got: String,
    },
    /// The header `typ` is not the expected one.
    #[error("token: header typ {got:?} is refused; this endpoint accepts {expected}")]
    Type {
        /// The accepted type.
        expected: &'static str,
        /// The type found (truncated).
        got: String,
    },
    /// No live key has the header `kid`.
    #[error("token: no live key has kid {0:?}")]
    UnknownKey(String),
    /// The signature does not verify.
    #[error("token: the signature does not verify")]
    Signature,
    /// The payload is not the claims of this token type.
    #[error("token: the payload is not a valid claim set ({0})")]
    Claims(String),
    /// `iss` is not this issuer.
    #[error("token: iss is not this issuer")]
    Issuer,
    /// `aud` does not contain the expected audience.
    #[error("token: aud does not contain {0:?}")]
    Audience(String),
    /// The token's `exp` is past.
    #[error("token: expired")]
    Expired,
    /// No key signs at `now` (the keys document has no active key yet).
    #[error("no signing key is active now; the keys Secret has no key active at this instant")]
    NoSigningKey,
    /// The crypto library failed while signing.
    #[error("signing failed: {0}")]
    Sign(String),
}

/// The JOSE header of every token minted here, in this field order.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    alg: String,
    kid: String,
    typ: String,
}

/// The claims of an ID token (OIDC Core 2) as the kube-apiserver and `UserService` read them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdTokenClaims {
    /// The issuer (external URL).
    pub iss: String,
    /// The user name.
    pub sub: String,
    /// `ichor-kube` or `ichor-ui`.
    pub aud: String,
    /// Expiry, unix seconds.
    pub exp: i64,
    /// Issued at, unix seconds.
    pub iat: i64,
    /// The authorization request's nonce (code grant only; omitted on refresh, OIDC Core 12.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    /// When the user typed the password, unix seconds: on tokens of the code grant, which
    /// always follows a fresh sign-in (OIDC Core 2, required when the request carried
    /// `max_age`); omitted on refresh, whose session start the issuer does not keep to the second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_time: Option<i64>,
    /// The user's roles.
    pub groups: Vec<String>,
    /// How the user authenticated (RFC 8176): `["pwd"]`, or `["pwd","otp","mfa"]` after a typed
    /// second factor; on refresh, what the sign-in that started the session proved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub amr: Vec<String>,
}

/// Signs the refresh token of generation `family.generation` of `family` (id `fam`) of `sub`,
/// with the HMAC key of the instant that generation was made, so the grace window re-creates
/// exactly the token it handed out.
///
/// # Errors
/// No HMAC key was active at that instant.
pub fn sign_refresh(
    keys: &LoadedKeys,
    iss: &str,
    sub: &str,
    fam: &str,
    family: &ichor_renderers::auth::credentials::Family,
    now: Timestamp,
) -> Result<String, TokenError> {
    let claims = RefreshClaims {
        iss: iss.to_owned(),
        sub: sub.to_owned(),
        client_id: family.client.clone(),
        audience: family.aud.clone(),
        fam: fam.to_owned(),
        generation: family.generation,
        iat: family.iat.as_second(),
        exp: family.exp.as_second(),
    };
    sign_artifact(keys, &claims, family.rotated_at.unwrap_or(family.iat), now)
}

/// An HMAC artifact type: its header `typ`, its `iss` and its `exp`.
pub trait Artifact: Serialize + DeserializeOwned {
    /// The header `typ` of this artifact.
    const TYP: &'static str;
    /// The longest such artifact accepted for verification, in bytes.
    const MAX_BYTES: usize = MAX_TOKEN_BYTES;
    /// The issuer the artifact was minted by.
    fn iss(&self) -> &str;
    /// Expiry, unix seconds.
    fn exp(&self) -> i64;
}

/// The signed authorization request carried from `/oidc/authorize` to `/oidc/login`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TicketClaims {
    /// Issuer.
    pub iss: String,
    /// `ichor-ui` or `ichor-cli`.
    pub client_id: String,
    /// The checked redirect URI.
    pub redirect_uri: String,
    /// The client's state.
    pub state: String,
    /// The client's nonce.
    pub nonce: String,
    /// The PKCE S256 challenge.
    pub code_challenge: String,
    /// Whether `offline_access` was granted (a refresh token will be issued).
    pub offline_access: bool,
    /// The audience of the ID tokens to issue.
    pub audience: String,
    /// Issued at, unix seconds.
    pub iat: i64,
    /// Expiry, unix seconds.
    pub exp: i64,
}

impl Artifact for TicketClaims {
    const TYP: &'static str = TYP_TICKET;
    fn iss(&self) -> &str {
        &self.iss
    }
    fn exp(&self) -> i64 {
        self.exp
    }
}

/// The authorization code: the ticket's request plus the signed-in user and a single-use id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodeClaims {
    /// Issuer.
    pub iss: String,
    /// Single-use id (per-replica set).
    pub jti: String,
    /// The client the code was issued to.
    pub client_id: String,
    /// The redirect URI of the authorization request (must be presented again, exactly).
    pub redirect_uri: String,
    /// The user.
    pub sub: String,
    /// The nonce for the ID token.
    pub nonce: String,
    /// The PKCE S256 challenge.
    pub code_challenge: String,
    /// Whether a refresh token is issued.
    pub offline_access: bool,
    /// The audience of the ID token.
    pub audience: String,
    /// How the user authenticated (RFC 8176); omitted for the password alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub amr: Vec<String>,
    /// When the user signed in, unix seconds (the session start, compared with `notBefore`).
    pub iat: i64,
    /// Expiry, unix seconds.
    pub exp: i64,
}

impl Artifact for CodeClaims {
    const TYP: &'static str = TYP_CODE;
    fn iss(&self) -> &str {
        &self.iss
    }
    fn exp(&self) -> i64 {
        self.exp
    }
}

/// A refresh token: one generation of a family, all claims copied from the family record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefreshClaims {
    /// Issuer.
    pub iss: String,
    /// The user.
    pub sub: String,
    /// The client the family was issued to.
    pub client_id: String,
    /// The family's audience (the default audience of refreshed ID tokens).
    pub audience: String,
    /// Family id.
    pub fam: String,
    /// Generation.
    pub generation: u64,
    /// Session start (the family's `iat`), unix seconds.
    pub iat: i64,
    /// The family's absolute end, unix seconds.
    pub exp: i64,
}

impl Artifact for RefreshClaims {
    const TYP: &'static str = TYP_REFRESH;
    fn iss(&self) -> &str {
        &self.iss
    }
    fn exp(&self) -> i64 {
        self.exp
    }
}

fn truncated(s: &str) -> String {
    s.chars().take(32).collect()
}

fn encode<C: Serialize>(
    alg: &str,
    kid: &str,
    typ: &str,
    claims: &C,
    sign: impl FnOnce(&[u8]) -> Result<Vec<u8>, TokenError>,
) -> Result<String, TokenError> {
    let header = Header {
        alg: alg.to_owned(),
        kid: kid.to_owned(),
        typ: typ.to_owned(),
    };
    let header = serde_json::to_vec(&header).map_err(|e| TokenError::Sign(e.to_string()))?;
    let payload = serde_json::to_vec(claims).map_err(|e| TokenError::Sign(e.to_string()))?;
    let input = format!("{}.{}", b64(&header), b64(&payload));
    let signature = sign(input.as_bytes())?;
    Ok(format!("{input}.{}", b64(&signature)))
}

/// HMAC-SHA256 of `input` (the JWS `HS256` signature), computed in process: several per token
/// request, where building an OpenSSL HMAC key for each cost more than the MAC itself.
fn hmac(secret: &[u8], input: &[u8]) -> Result<Vec<u8>, TokenError> {
    use hmac::Mac as _;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret)
        .map_err(|_| TokenError::Sign("the HMAC key was refused".into()))?;
    mac.update(input);
    Ok(mac.finalize().into_bytes().to_vec())
}

/// A token split and decoded, before its signature is checked.
struct Parsed<'a> {
    header: Header,
    signing_input: &'a str,
    payload: Vec<u8>,
    signature: Vec<u8>,
}

fn parse(token: &str) -> Result<Parsed<'_>, TokenError> {
    parse_within(token, MAX_TOKEN_BYTES)
}

/// [`parse`] of a token that may be `max` bytes long.
fn parse_within(token: &str, max: usize) -> Result<Parsed<'_>, TokenError> {
    if token.len() > max {
        return Err(TokenError::TooLong);
    }
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(TokenError::Malformed("it must have exactly three segments"));
    };
    let decode = |seg: &str| {
        URL_SAFE_NO_PAD
            .decode(seg)
            .map_err(|_| TokenError::Malformed("bad base64url"))
    };
    let header: Header = serde_json::from_slice(&decode(h)?)
        .map_err(|_| TokenError::Malformed("the header is not {alg, kid, typ}"))?;
    let signing_input = &token[..h.len() + 1 + p.len()];
    Ok(Parsed {
        header,
        signing_input,
        payload: decode(p)?,
        signature: decode(s)?,
    })
}

fn check_header(header: &Header, alg: &'static str, typ: &'static str) -> Result<(), TokenError> {
    if header.alg != alg {
        return Err(TokenError::Algorithm {
            expected: alg,
            got: truncated(&header.alg),
        });
    }
    if header.typ != typ {
        return Err(TokenError::Type {
            expected: typ,
            got: truncated(&header.typ),
        });
    }
    Ok(())
}

fn check_exp(exp: i64, now: Timestamp) -> Result<(), TokenError> {
    if now.as_second() >= exp {
        return Err(TokenError::Expired);
    }
    Ok(())
}

/// `now` in whole unix seconds (JWT `iat`): truncated, so never in the future.
pub fn unix_seconds(now: Timestamp) -> i64 {
    now.as_second()
}

/// Signs an ID token with the RSA key signing at `now`.
///
/// # Errors
/// [`TokenError::NoSigningKey`] when no RSA key is active, [`TokenError::Sign`] on a crypto error.
pub fn sign_id_token(
    keys: &LoadedKeys,
    claims: &IdTokenClaims,
    now: Timestamp,
) -> Result<String, TokenError> {
    let key = keys.signing_key(now).ok_or(TokenError::NoSigningKey)?;
    encode("RS256", key.kid, TYP_ID_TOKEN, claims, |input| {
        key.signer
            .sign(input)
            .map_err(|_| TokenError::Sign("RS256 signing failed".into()))
    })
}

/// Verifies an ID token of this issuer for `audience` (the `UserService` bearer check uses
/// `ichor-ui`): RS256 only, `typ: JWT`, a published kid, the signature, `iss`, `aud`, `exp`.
///
/// # Errors
/// The first check that fails, as a [`TokenError`].
pub fn verify_id_token(
    keys: &LoadedKeys,
    token: &str,
    issuer: &str,
    audience: &str,
    now: Timestamp,
) -> Result<IdTokenClaims, TokenError> {
    let parsed = parse(token)?;
    check_header(&parsed.header, "RS256", TYP_ID_TOKEN)?;
    let verifier = keys
        .rsa_verifier(&parsed.header.kid, now)
        .ok_or_else(|| TokenError::UnknownKey(truncated(&parsed.header.kid)))?;
    verifier
        .verify(parsed.signing_input.as_bytes(), &parsed.signature)
        .map_err(|_| TokenError::Signature)?;
    let claims: IdTokenClaims =
        serde_json::from_slice(&parsed.payload).map_err(|e| TokenError::Claims(truncated(&e.to_string())))?;
    if claims.iss != issuer {
        return Err(TokenError::Issuer);
    }
    if claims.aud != audience {
        return Err(TokenError::Audience(audience.to_owned()));
    }
    check_exp(claims.exp, now)?;
    Ok(claims)
}

/// Signs an HMAC artifact with the HMAC key that signed at `key_at`, if that key is still live
/// at `now`, else with the key signing at `now`. Pass `key_at = now` for a fresh artifact, and
/// the generation's instant for a refresh token (determinism).
///
/// # Errors
/// [`TokenError::NoSigningKey`] when no HMAC key is active.
pub fn sign_artifact<A: Artifact>(
    keys: &LoadedKeys,
    claims: &A,
    key_at: Timestamp,
    now: Timestamp,
) -> Result<String, TokenError> {
    let key = keys
        .hmac_signing_at(key_at, now)
        .or_else(|| keys.signing_hmac(now))
        .ok_or(TokenError::NoSigningKey)?;
    encode("HS256", key.kid, A::TYP, claims, |input| hmac(key.secret, input))
}

/// Verifies an HMAC artifact of type `A`: HS256 only, header `typ` equal to `A::TYP`, a kid of
/// an HMAC key live at `now`, the MAC in constant time, then `iss` and `exp`.
///
/// # Errors
/// The first check that fails, as a [`TokenError`].
pub fn verify_artifact<A: Artifact>(
    keys: &LoadedKeys,
    token: &str,
    issuer: &str,
    now: Timestamp,
) -> Result<A, TokenError> {
    let parsed = parse_within(token, A::MAX_BYTES)?;
    check_header(&parsed.header, "HS256", A::TYP)?;
    let secret = keys
        .verifying_hmac(&parsed.header.kid, now)
        .ok_or_else(|| TokenError::UnknownKey(truncated(&parsed.header.kid)))?;
    let expected = hmac(secret, parsed.signing_input.as_bytes())?;
    if !bool::from(expected.as_slice().ct_eq(parsed.signature.as_slice())) {
        return Err(TokenError::Signature);
    }
    let claims: A =
        serde_json::from_slice(&parsed.payload).map_err(|e| TokenError::Claims(truncated(&e.to_string())))?;
    if claims.iss() != issuer {
        return Err(TokenError::Issuer);
    }
    check_exp(claims.exp(), now)?;
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mac_is_josekit_s_hs256_signature() {
        for (secret, input) in [
            (&[7u8; 32][..], &b"a.b"[..]),
            (&[1u8; 64][..], &[0u8; 0][..]),
            (&[9u8; 100][..], &[b'x'; 1000][..]),
        ] {
            let signer = josekit::jws::HS256.signer_from_bytes(secret).unwrap();
            let theirs = josekit::jws::JwsSigner::sign(&signer, input).unwrap();
            assert_eq!(hmac(secret, input).unwrap(), theirs);
        }
    }
    use ichor_renderers::trust::{HmacKey, KeysDocument, RsaKey, keys::HmacSecret, keys::PrivateKeyPem};

    const PEM: &str = include_str!("../tests/fixtures/rsa3072-1.pkcs8.pem");
    const ISS: &str = "https://ichor.example.com";

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    fn keys() -> LoadedKeys {
        let t = ts("2026-01-01T00:00:00Z");
        let rsa = RsaKey::new(
            "k-1".into(),
            PrivateKeyPem::new(PEM.into()).expect("pem"),
            t,
            t,
            None,
        );
        let h1 = HmacKey::new("h-1".into(), HmacSecret::new([1; 32]), t, t, None);
        let h2 = HmacKey::new(
            "h-2".into(),
            HmacSecret::new([2; 32]),
            ts("2026-02-01T00:00:00Z"),
            ts("2026-02-01T00:10:00Z"),
            None,
        );
        let doc = KeysDocument::new(vec![rsa.expect("rsa")], vec![h1.expect("h1"), h2.expect("h2")]);
        LoadedKeys::from_document(&doc.expect("doc")).expect("load")
    }

    fn refresh(exp: i64) -> RefreshClaims {
        RefreshClaims {
            iss: ISS.into(),
            sub: "alice".into(),
            client_id: "ichor-cli".into(),
            audience: "ichor-kube".into(),
            fam: "f1".into(),
            generation: 2,
            iat: 0,
            exp,
        }
    }

    #[test]
    fn a_refresh_token_is_the_same_when_signed_again_later_with_the_generation_instant() {
        let keys = keys();
        let at = ts("2026-02-01T00:09:59Z");
        let claims = refresh(ts("2026-02-02T00:00:00Z").as_second());
        let first = sign_artifact(&keys, &claims, at, at).expect("sign");
        // Ten seconds later the next HMAC key signs; the successor must still be identical.
        let later = ts("2026-02-01T00:10:09Z");
        let again = sign_artifact(&keys, &claims, at, later).expect("sign");
        assert_eq!(first, again);
        let fresh = sign_artifact(&keys, &claims, later, later).expect("sign");
        assert_ne!(first, fresh, "a fresh artifact uses the key signing now (h-2)");
        let back: RefreshClaims = verify_artifact(&keys, &again, ISS, later).expect("verify");
        assert_eq!(back, claims);
    }

    #[test]
    fn an_artifact_of_one_type_is_refused_as_another() {
        let keys = keys();
        let now = ts("2026-01-02T00:00:00Z");
        let token = sign_artifact(&keys, &refresh(now.as_second() + 60), now, now).expect("sign");
        let err = verify_artifact::<CodeClaims>(&keys, &token, ISS, now).expect_err("typ");
        assert!(matches!(err, TokenError::Type { .. }), "{err:?}");
    }

    #[test]
    fn an_expired_artifact_is_refused_at_its_exp_second() {
        let keys = keys();
        let now = ts("2026-01-02T00:00:00Z");
        let token = sign_artifact(&keys, &refresh(now.as_second() + 1), now, now).expect("sign");
        let later = ts("2026-01-02T00:00:01Z");
        let err = verify_artifact::<RefreshClaims>(&keys, &token, ISS, later).expect_err("exp");
        assert_eq!(err, TokenError::Expired);
    }

    #[test]
    fn a_token_with_a_fourth_segment_or_padding_is_malformed() {
        let keys = keys();
        let now = ts("2026-01-02T00:00:00Z");
        let token = sign_artifact(&keys, &refresh(now.as_second() + 60), now, now).expect("sign");
        for bad in [format!("{token}.x"), format!("{token}="), "a.b".to_owned()] {
            let err = verify_artifact::<RefreshClaims>(&keys, &bad, ISS, now).expect_err("bad");
            assert!(matches!(err, TokenError::Malformed(_)), "{bad}: {err:?}");
        }
        let long = "a".repeat(MAX_TOKEN_BYTES + 1);
        let err = verify_artifact::<RefreshClaims>(&keys, &long, ISS, now).expect_err("long");
        assert_eq!(err, TokenError::TooLong);
    }

    #[test]
    fn a_header_with_an_extra_field_is_refused() {
        let keys = keys();
        let now = ts("2026-01-02T00:00:00Z");
        let token = sign_artifact(&keys, &refresh(now.as_second() + 60), now, now).expect("sign");
        let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
        parts[0] = b64(br#"{"alg":"HS256","kid":"h-1","typ":"ichor-refresh+jwt","crit":["x"]}"#);
        let err = verify_artifact::<RefreshClaims>(&keys, &parts.join("."), ISS, now).expect_err("crit");
        assert!(matches!(err, TokenError::Malformed(_)), "{err:?}");
    }
}
