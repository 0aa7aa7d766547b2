//! Base32 (RFC 4648, upper case, no padding) through `data-encoding`, held to whole 5-byte
//! groups: the TOTP secret (20 bytes, 32 characters) and the recovery codes (10 bytes, 16
//! characters) are such groups, so no padding case arises. Authenticator apps read this alphabet.

use data_encoding::BASE32_NOPAD;

/// `bytes` in base32; `bytes.len()` must be a multiple of 5 (the callers pass fixed arrays).
pub(crate) fn encode(bytes: &[u8]) -> String {
    debug_assert!(bytes.len().is_multiple_of(5), "whole 5-byte groups only");
    BASE32_NOPAD.encode(bytes)
}

/// The bytes of `text`, which must be upper-case base32 of whole 8-character groups; `None`
/// otherwise.
pub(crate) fn decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(8) {
        return None;
    }
    BASE32_NOPAD.decode(text.as_bytes()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_rfc_4648_test_vectors_of_whole_groups() {
        // RFC 4648 section 10: BASE32("fooba") = "MZXW6YTB".
        assert_eq!(encode(b"fooba"), "MZXW6YTB");
        assert_eq!(decode("MZXW6YTB").as_deref(), Some(&b"fooba"[..]));
        assert_eq!(
            encode(b"12345678901234567890"),
            "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"
        );
    }

    #[test]
    fn refuses_lower_case_padding_and_partial_groups() {
        for text in ["mzxw6ytb", "MZXW6Y==", "MZXW6YT", "MZXW6YT1", "MZXW6YT8"] {
            assert_eq!(decode(text), None, "{text:?}");
        }
    }

    #[test]
    fn every_byte_value_round_trips() {
        let bytes: Vec<u8> = (0..=255).chain(0..4).collect();
        assert_eq!(decode(&encode(&bytes)), Some(bytes));
    }
}
