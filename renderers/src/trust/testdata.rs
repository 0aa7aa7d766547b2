//! Test-only key fixtures (generated with openssl for these tests; never used elsewhere).

/// An RSA-2048 key, PKCS#8.
pub(crate) const RSA2048_PKCS8: &str = include_str!("testdata/rsa2048.pkcs8.pem");
/// The same key, PKCS#1.
pub(crate) const RSA2048_PKCS1: &str = include_str!("testdata/rsa2048.pkcs1.pem");
/// An RSA-1024 key, PKCS#8 (too small).
pub(crate) const RSA1024_PKCS8: &str = include_str!("testdata/rsa1024.pkcs8.pem");
/// A P-256 key, PKCS#8 (not RSA).
pub(crate) const P256_PKCS8: &str = include_str!("testdata/p256.pkcs8.pem");
