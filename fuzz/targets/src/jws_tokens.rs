//! JWS/JWT decoding of every token type the issuer verifies (login ticket, authorization code,
//! second-factor ticket, authenticator-app enrolment ticket, refresh token: HS256 artifacts; ID
//! token: RS256) and the CLI's
//! unverified claim decoding.
//!
//! Input: one selector byte, then the token text. Selector bit 0x80 set: the rest is a claim
//! set (payload JSON) which the target wraps in a validly HMAC-signed header of the selected
//! artifact type (selector 0xff: the enrolment ticket; otherwise by the selector modulo 4), so
//! the claims deserialisation behind the signature check is reached too.
//! Placeholders (`@CODE@`, `@REFRESH@`, `@TICKET@`, `@ID_TOKEN@`) expand to valid tokens.
//!
//! Properties: no panic; an artifact that verifies re-signs to a token that verifies to the
//! same claims (round trip); a token verified as one type never verifies as another.

use crate::fixtures::{ISSUER, expand, hmac, keys, now};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use ichor_issuer::tokens::{
    self, Artifact, CodeClaims, FactorClaims, RefreshClaims, TicketClaims, TotpEnrolClaims,
};

fn round_trip<A: Artifact + PartialEq + std::fmt::Debug>(token: &str) -> bool {
    let keys = keys();
    let Ok(claims) = tokens::verify_artifact::<A>(&keys, token, ISSUER, now()) else {
        return false;
    };
    let again = tokens::sign_artifact(&keys, &claims, now(), now()).expect("re-sign a verified artifact");
    let back = tokens::verify_artifact::<A>(&keys, &again, ISSUER, now()).expect("verify re-signed");
    assert_eq!(back, claims);
    true
}

fn signed(typ: &str, payload: &[u8]) -> String {
    let header = format!(r#"{{"alg":"HS256","kid":"h-1","typ":"{typ}"}}"#);
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header),
        URL_SAFE_NO_PAD.encode(payload)
    );
    let sig = hmac(input.as_bytes());
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig))
}

/// One input of the target: returns normally or panics on a broken property.
pub fn run(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let token = if selector & 0x80 != 0 {
        let typ = match selector % 4 {
            _ if selector == 0xff => TotpEnrolClaims::TYP,
            0 => TicketClaims::TYP,
            1 => CodeClaims::TYP,
            2 => FactorClaims::TYP,
            _ => RefreshClaims::TYP,
        };
        signed(typ, rest)
    } else {
        let Ok(text) = std::str::from_utf8(rest) else {
            return;
        };
        expand(text)
    };
    let verified = [
        round_trip::<TicketClaims>(&token),
        round_trip::<CodeClaims>(&token),
        round_trip::<RefreshClaims>(&token),
        round_trip::<FactorClaims>(&token),
        round_trip::<TotpEnrolClaims>(&token),
    ];
    assert!(
        verified.iter().filter(|v| **v).count() <= 1,
        "one token verified as two types"
    );
    let keys = keys();
    for audience in ["ichor-ui", "ichor-kube"] {
        if let Ok(claims) = tokens::verify_id_token(&keys, &token, ISSUER, audience, now()) {
            assert_eq!(claims.aud, audience);
            assert!(verified.iter().all(|v| !v), "an ID token verified as an artifact");
        }
    }
    let _ = ichor_cli::commands::auth::claims::decode_unverified(&token);
}
