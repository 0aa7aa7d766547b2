//! Just enough DER to check that a PKCS#8 `PrivateKeyInfo` holds an RSA key and to read its
//! modulus size. The issuer loads the key with a real crypto library; this check makes the
//! `keys.json` parser refuse a wrong key at the controller and the issuer alike, with a message.

/// DER tag of SEQUENCE.
const SEQUENCE: u8 = 0x30;
/// DER tag of INTEGER.
const INTEGER: u8 = 0x02;
/// DER tag of OCTET STRING.
const OCTET_STRING: u8 = 0x04;
/// DER tag of OBJECT IDENTIFIER.
const OID: u8 = 0x06;
/// Content octets of the rsaEncryption OID, 1.2.840.113549.1.1.1.
const RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];

/// Why a PKCS#8 document was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pkcs8Problem {
    /// The bytes are not a well-formed PKCS#8 `PrivateKeyInfo`.
    Malformed,
    /// The algorithm is not rsaEncryption.
    NotRsa,
}

/// A cursor over DER bytes.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Reads one element (tag, content); `None` on truncated or over-long input.
    fn element(&mut self) -> Option<(u8, &'a [u8])> {
        let (&tag, rest) = self.rest.split_first()?;
        let (&first, mut rest) = rest.split_first()?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let count = usize::from(first & 0x7f);
            if count == 0 || count > 3 {
                return None;
            }
            let (len_bytes, after) = rest.split_at_checked(count)?;
            rest = after;
            len_bytes
                .iter()
                .fold(0usize, |acc, b| (acc << 8) | usize::from(*b))
        };
        let (content, after) = rest.split_at_checked(len)?;
        self.rest = after;
        Some((tag, content))
    }

    /// Reads one element and requires its tag.
    fn expect(&mut self, tag: u8) -> Option<&'a [u8]> {
        match self.element()? {
            (t, content) if t == tag => Some(content),
            _ => None,
        }
    }
}

/// Checks a PKCS#8 `PrivateKeyInfo` holding an RSA key and returns the modulus size in bits.
pub(crate) fn pkcs8_rsa_modulus_bits(der: &[u8]) -> Result<u32, Pkcs8Problem> {
    use Pkcs8Problem::{Malformed, NotRsa};
    let mut outer = Reader { rest: der };
    let info = outer.expect(SEQUENCE).ok_or(Malformed)?;
    if !outer.rest.is_empty() {
        return Err(Malformed);
    }
    let mut info = Reader { rest: info };
    let version = info.expect(INTEGER).ok_or(Malformed)?;
    if version != [0] && version != [1] {
        return Err(Malformed);
    }
    let mut algorithm = Reader {
        rest: info.expect(SEQUENCE).ok_or(Malformed)?,
    };
    let oid = algorithm.expect(OID).ok_or(Malformed)?;
    if oid != RSA_ENCRYPTION {
        return Err(NotRsa);
    }
    let mut outer_key = Reader {
        rest: info.expect(OCTET_STRING).ok_or(Malformed)?,
    };
    let key = outer_key.expect(SEQUENCE).ok_or(Malformed)?;
    let mut key = Reader { rest: key };
    key.expect(INTEGER).ok_or(Malformed)?;
    let modulus = key.expect(INTEGER).ok_or(Malformed)?;
    let exponent = key.expect(INTEGER).ok_or(Malformed)?;
    if exponent.is_empty() {
        return Err(Malformed);
    }
    let significant = modulus
        .iter()
        .position(|b| *b != 0)
        .map_or(&[][..], |i| &modulus[i..]);
    let Some(first) = significant.first() else {
        return Err(Malformed);
    };
    let bytes = u32::try_from(significant.len()).map_err(|_| Malformed)?;
    Ok((bytes - 1) * 8 + (8 - first.leading_zeros()))
}
