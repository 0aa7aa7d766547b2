//! PKCE (RFC 7636, S256 only), `state` and `nonce` values from the operating system's CSPRNG.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use sha2::{Digest, Sha256};

use super::error::AuthError;

/// A PKCE pair: the verifier stays here, the challenge goes in the authorization request.
#[derive(Clone)]
pub struct Pkce {
    /// 43 characters of `[A-Za-z0-9_-]` (a subset of the unreserved set), from 32 random bytes.
    pub verifier: String,
    /// `BASE64URL(SHA256(verifier))`.
    pub challenge: String,
}

impl std::fmt::Debug for Pkce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pkce")
            .field("challenge", &self.challenge)
            .finish_non_exhaustive()
    }
}

impl Pkce {
    /// Draws a new verifier.
    ///
    /// # Errors
    /// [`AuthError::Random`] when the random source fails.
    pub fn generate() -> Result<Self, AuthError> {
        let verifier = random_token()?;
        let challenge = challenge(&verifier);
        Ok(Self { verifier, challenge })
    }
}

/// The S256 challenge of a verifier.
pub fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// 256 random bits, base64url without padding (43 characters): for verifiers, `state`, `nonce`.
///
/// # Errors
/// [`AuthError::Random`] when the random source fails.
pub fn random_token() -> Result<String, AuthError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| AuthError::Random(e.to_string()))?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_challenge_matches_the_rfc_7636_appendix_b_example() {
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn a_verifier_is_43_unreserved_characters_and_never_repeats() {
        let a = Pkce::generate().unwrap();
        let b = Pkce::generate().unwrap();
        assert_eq!(a.verifier.len(), 43);
        assert!(
            a.verifier
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"-._~".contains(&c))
        );
        assert_ne!(a.verifier, b.verifier);
        assert_eq!(a.challenge, challenge(&a.verifier));
        assert!(!format!("{a:?}").contains(&a.verifier));
    }
}
