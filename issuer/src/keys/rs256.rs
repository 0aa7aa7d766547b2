//! RS256 signing (RSASSA-PKCS1-v1_5 with SHA-256, RFC 7518 3.3) through AWS-LC.
//!
//! The signature is the refresh grant's main cost, so the issuer signs with the fastest RSA
//! implementation this workspace can keep: `hack/bench/rsa.sh` sets AWS-LC (`aws-lc-rs`)
//! against OpenSSL (through josekit, the `openssl` crate and `openssl speed`) and ring. On a CPU
//! with AVX-512 IFMA AWS-LC's 3072-bit exponentiation signs 2.4 to 2.9 times as fast as the
//! system's OpenSSL 3.0 (measured on a quiet machine); without it, at OpenSSL's rate. OpenSSL still parses the PEM (PKCS#8 or
//! PKCS#1, as josekit accepts it), and josekit verifies.
//!
//! # Guarantees
//! - The signature is the RS256 signature of the input: PKCS#1 v1.5 is deterministic, so it is
//!   byte for byte the one josekit (or any RS256 signer) makes with the same key.
//! - The DER copy of the private key made while loading is zeroed when dropped.
//! - No error or `Debug` output contains key material.

use std::fmt;

use aws_lc_rs::{
    rand::SystemRandom,
    signature::{RSA_PKCS1_SHA256, RsaKeyPair},
};
use openssl::pkey::PKey;
use zeroize::Zeroizing;

/// Why a PEM private key cannot sign RS256. Says nothing of the key itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Rs256KeyError {
    /// The PEM is not a private key OpenSSL can parse, or the key is not RSA.
    #[error("the PEM is not an RSA private key")]
    NotRsa,
    /// AWS-LC refused the RSA key (its size is outside 2048-8192 bits, or its parts disagree).
    #[error("the RSA key is not one AWS-LC signs with (2048 to 8192 bits, consistent parts)")]
    Refused,
}

/// The signature could not be made (AWS-LC reported an internal failure).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("RS256 signing failed")]
pub struct Rs256SignError;

/// An RSA private key that signs RS256.
pub struct Rs256Signer {
    key: RsaKeyPair,
    rng: SystemRandom,
}

impl fmt::Debug for Rs256Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rs256Signer")
            .field("bits", &(self.key.public_modulus_len() * 8))
            .finish_non_exhaustive()
    }
}

impl Rs256Signer {
    /// The signer of a PEM private key (PKCS#8 or PKCS#1). AWS-LC checks the key here, so a key
    /// it cannot sign with is refused at load, not at the first signature.
    ///
    /// # Errors
    /// [`Rs256KeyError`], when the PEM is not an RSA private key AWS-LC signs with.
    pub fn from_pem(pem: &[u8]) -> Result<Self, Rs256KeyError> {
        let rsa = PKey::private_key_from_pem(pem)
            .and_then(|key| key.rsa())
            .map_err(|_| Rs256KeyError::NotRsa)?;
        let der = Zeroizing::new(rsa.private_key_to_der().map_err(|_| Rs256KeyError::NotRsa)?);
        let key = RsaKeyPair::from_der(&der).map_err(|_| Rs256KeyError::Refused)?;
        Ok(Self {
            key,
            rng: SystemRandom::new(),
        })
    }

    /// The RS256 signature of `input` (the JWS signing input).
    ///
    /// # Errors
    /// [`Rs256SignError`], when AWS-LC fails to sign.
    pub fn sign(&self, input: &[u8]) -> Result<Vec<u8>, Rs256SignError> {
        let mut signature = vec![0u8; self.key.public_modulus_len()];
        self.key
            .sign(&RSA_PKCS1_SHA256, &self.rng, input, &mut signature)
            .map_err(|_| Rs256SignError)?;
        Ok(signature)
    }
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
        assert_eq!(
            ours.sign(b"a.b").expect("again"),
            theirs.sign(b"a.b").expect("josekit")
        );
    }

    #[test]
    fn concurrent_signatures_are_all_the_same_signature() {
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
    }

    #[test]
    fn a_pkcs1_pem_signs_like_its_pkcs8_form() {
        let pkcs1 = PKey::private_key_from_pem(PEM.as_bytes())
            .and_then(|k| k.rsa())
            .and_then(|r| r.private_key_to_pem())
            .expect("pkcs1");
        assert!(String::from_utf8_lossy(&pkcs1).starts_with("-----BEGIN RSA PRIVATE KEY-----"));
        assert_eq!(
            Rs256Signer::from_pem(&pkcs1)
                .expect("pkcs1")
                .sign(b"a.b")
                .expect("sign"),
            Rs256Signer::from_pem(PEM.as_bytes())
                .expect("pkcs8")
                .sign(b"a.b")
                .expect("sign")
        );
    }

    #[test]
    fn a_key_under_2048_bits_is_refused_at_load() {
        let small = openssl::rsa::Rsa::generate(1024)
            .and_then(|r| r.private_key_to_pem())
            .expect("1024-bit key");
        assert_eq!(
            Rs256Signer::from_pem(&small).expect_err("refused"),
            Rs256KeyError::Refused
        );
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
        assert_eq!(
            Rs256Signer::from_pem(&pem).expect_err("ec"),
            Rs256KeyError::NotRsa
        );
        assert_eq!(
            Rs256Signer::from_pem(b"not a key").expect_err("garbage"),
            Rs256KeyError::NotRsa
        );
        let printed = format!("{:?}", Rs256Signer::from_pem(PEM.as_bytes()).expect("load"));
        assert!(
            printed.contains("3072") && !printed.contains("PRIVATE"),
            "{printed}"
        );
    }
}
