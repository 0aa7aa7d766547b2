//! The check that a PKCS#8 `PrivateKeyInfo` holds an RSA key, and its modulus size, decoded with
//! the RustCrypto `pkcs8` and `pkcs1` crates (strict DER). The issuer loads the key with a real
//! crypto library; this check makes the `keys.json` parser refuse a wrong key at the controller
//! and the issuer alike, with a message.

use pkcs1::RsaPrivateKeyRef;
use pkcs8::PrivateKeyInfoRef;

/// Why a PKCS#8 document was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pkcs8Problem {
    /// The bytes are not a well-formed PKCS#8 `PrivateKeyInfo` (or the key in it is not a
    /// well-formed PKCS#1 `RSAPrivateKey`).
    Malformed,
    /// The algorithm is not rsaEncryption.
    NotRsa,
}

/// Checks a PKCS#8 `PrivateKeyInfo` holding an RSA key and returns the modulus size in bits.
pub(crate) fn pkcs8_rsa_modulus_bits(der: &[u8]) -> Result<u32, Pkcs8Problem> {
    use Pkcs8Problem::{Malformed, NotRsa};
    let info = PrivateKeyInfoRef::try_from(der).map_err(|_| Malformed)?;
    if info.algorithm.oid != pkcs1::ALGORITHM_OID {
        return Err(NotRsa);
    }
    let key = RsaPrivateKeyRef::try_from(info.private_key.as_bytes()).map_err(|_| Malformed)?;
    if key.public_exponent.is_empty() {
        return Err(Malformed);
    }
    // `UintRef` holds the magnitude without DER's leading zero byte.
    let modulus = key.modulus.as_bytes();
    let Some(&first) = modulus.first().filter(|b| **b != 0) else {
        return Err(Malformed);
    };
    let bytes = u32::try_from(modulus.len()).map_err(|_| Malformed)?;
    Ok((bytes - 1) * 8 + (8 - first.leading_zeros()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trust::testdata::{P256_PKCS8, RSA1024_PKCS8, RSA2048_PKCS1, RSA2048_PKCS8};

    fn der(pem: &str) -> Vec<u8> {
        pem::parse(pem).expect("a PEM fixture").into_contents()
    }

    #[test]
    fn reads_the_modulus_size_of_an_rsa_pkcs8_key() {
        assert_eq!(pkcs8_rsa_modulus_bits(&der(RSA2048_PKCS8)), Ok(2048));
        assert_eq!(pkcs8_rsa_modulus_bits(&der(RSA1024_PKCS8)), Ok(1024));
    }

    #[test]
    fn a_key_of_another_algorithm_is_not_rsa() {
        assert_eq!(
            pkcs8_rsa_modulus_bits(&der(P256_PKCS8)),
            Err(Pkcs8Problem::NotRsa)
        );
    }

    #[test]
    fn truncated_trailing_or_pkcs1_bytes_are_malformed() {
        let key = der(RSA2048_PKCS8);
        let mut trailing = key.clone();
        trailing.push(0);
        for bytes in [
            &key[..key.len() - 1],
            &trailing[..],
            &der(RSA2048_PKCS1)[..],
            &[0x30, 0x03, 0x02, 0x01, 0x00][..],
            &[][..],
        ] {
            assert_eq!(pkcs8_rsa_modulus_bits(bytes), Err(Pkcs8Problem::Malformed));
        }
    }
}
