//! RS256 signing (RSASSA-PKCS1-v1_5 with SHA-256, RFC 7518 3.3) through OpenSSL, with the
//! signing context prepared once and reused.
//!
//! A fresh OpenSSL 3 signing context per signature (what `EVP_DigestSignInit` does, and so what
//! josekit's signer does on every call) looks up the algorithm implementations in the provider
//! tables each time: measured, a few per cent of a refresh grant's CPU on top of the RSA
//! arithmetic. [`Rs256Signer`] hashes the signing input itself and signs the digest with a
//! context made once (`EVP_PKEY_sign_init`, PKCS#1 v1.5 padding, SHA-256), the way `openssl
//! speed` signs; contexts are kept in a small pool because one context serves one signature at
//! a time.
//!
//! # Guarantees
//! - The signature is the RS256 signature of the input: PKCS#1 v1.5 is deterministic, so it is
//!   byte for byte the one josekit (or any RS256 signer) makes with the same key.
//! - A context whose signature failed is dropped, never reused.
//! - No error or `Debug` output contains key material.

use std::{
    fmt,
    sync::{Mutex, PoisonError},
};

use openssl::{
    error::ErrorStack,
    md::Md,
    pkey::{PKey, Private},
    pkey_ctx::PkeyCtx,
    rsa::Padding,
};
use sha2::{Digest as _, Sha256};

/// At most this many prepared contexts are kept per key: one per signature in flight, and the
/// signatures in flight are bounded by the runtime's threads.
const MAX_POOLED_CONTEXTS: usize = 64;

/// An RSA private key that signs RS256, reusing its prepared OpenSSL contexts.
pub struct Rs256Signer {
    key: PKey<Private>,
    pool: Mutex<Vec<PkeyCtx<Private>>>,
}

impl fmt::Debug for Rs256Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rs256Signer")
            .field("bits", &self.key.bits())
            .finish_non_exhaustive()
    }
}

impl Rs256Signer {
    /// The signer of a PEM private key (PKCS#8 or PKCS#1). One context is prepared here, so a
    /// key OpenSSL cannot sign with is refused at load, not at the first signature.
    ///
    /// # Errors
    /// OpenSSL's, when the PEM is not an RSA private key it can sign with.
    pub fn from_pem(pem: &[u8]) -> Result<Self, ErrorStack> {
        let key = PKey::private_key_from_pem(pem)?;
        key.rsa()?;
        let first = prepared(&key)?;
        Ok(Self {
            key,
            pool: Mutex::new(vec![first]),
        })
    }

    /// The RS256 signature of `input` (the JWS signing input).
    ///
    /// # Errors
    /// OpenSSL's, when signing fails.
    pub fn sign(&self, input: &[u8]) -> Result<Vec<u8>, ErrorStack> {
        let digest = Sha256::digest(input);
        let pooled = self.pool.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let mut ctx = match pooled {
            Some(ctx) => ctx,
            None => prepared(&self.key)?,
        };
        let mut signature = vec![0u8; self.key.size()];
        let len = ctx.sign(&digest, Some(&mut signature))?;
        signature.truncate(len);
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        if pool.len() < MAX_POOLED_CONTEXTS {
            pool.push(ctx);
        }
        Ok(signature)
    }
}

/// A context ready to sign SHA-256 digests with PKCS#1 v1.5 padding.
fn prepared(key: &PKey<Private>) -> Result<PkeyCtx<Private>, ErrorStack> {
    let mut ctx = PkeyCtx::new(key)?;
    ctx.sign_init()?;
    ctx.set_rsa_padding(Padding::PKCS1)?;
    ctx.set_signature_md(Md::sha256())?;
    Ok(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use josekit::jws::{JwsSigner as _, JwsVerifier as _, RS256};

    const PEM: &str = include_str!("../../tests/fixtures/rsa3072-1.pkcs8.pem");

    #[test]
    fn signs_exactly_what_josekit_signs_and_the_signature_verifies() {
        let ours = Rs256Signer::from_pem(PEM.as_bytes()).expect("load");
        let theirs = RS256.signer_from_pem(PEM).expect("josekit");
        let pair = josekit::jwk::alg::rsa::RsaKeyPair::from_pem(PEM).expect("pair");
        let verifier = RS256
            .verifier_from_der(pair.to_der_public_key())
            .expect("verifier");
        for input in [&b""[..], b"a.b", &[b'x'; 1000][..]] {
            let signature = ours.sign(input).expect("sign");
            assert_eq!(signature.len(), 384);
            assert_eq!(signature, theirs.sign(input).expect("josekit sign"));
            verifier.verify(input, &signature).expect("verifies");
        }
        // Reused contexts sign on: the pool's context gives the same signature again.
        assert_eq!(
            ours.sign(b"a.b").expect("again"),
            theirs.sign(b"a.b").expect("josekit")
        );
    }

    #[test]
    fn concurrent_signatures_each_get_a_context_and_the_pool_stays_bounded() {
        let ours = std::sync::Arc::new(Rs256Signer::from_pem(PEM.as_bytes()).expect("load"));
        let expected = ours.sign(b"same input").expect("sign");
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let ours = std::sync::Arc::clone(&ours);
                std::thread::spawn(move || {
                    (0..3)
                        .map(|_| ours.sign(b"same input").expect("sign"))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for t in threads {
            for signature in t.join().expect("join") {
                assert_eq!(signature, expected);
            }
        }
        let pooled = ours.pool.lock().expect("pool").len();
        assert!((1..=4).contains(&pooled), "{pooled} contexts kept");
    }

    #[test]
    fn a_key_that_is_not_rsa_is_refused_and_debug_shows_no_key() {
        let ec = openssl::ec::EcKey::generate(
            &openssl::ec::EcGroup::from_curve_name(openssl::nid::Nid::X9_62_PRIME256V1).expect("group"),
        )
        .expect("ec");
        let pem = PKey::from_ec_key(ec)
            .expect("pkey")
            .private_key_to_pem_pkcs8()
            .expect("pem");
        assert!(Rs256Signer::from_pem(&pem).is_err());
        assert!(Rs256Signer::from_pem(b"not a key").is_err());
        let printed = format!("{:?}", Rs256Signer::from_pem(PEM.as_bytes()).expect("load"));
        assert!(
            printed.contains("3072") && !printed.contains("PRIVATE"),
            "{printed}"
        );
    }
}
