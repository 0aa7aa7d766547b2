//! An authenticator-app code as typed on the sign-in page's factor step (`totp::verify`, RFC
//! 6238), at any time and after any accepted step; the same text as a recovery code
//! (`recovery::normalise`).
//!
//! Input: 8 bytes of time (seconds, little endian, reduced into the years 1970 to about 2900), 8
//! bytes of the last accepted step, then the typed text (lossy UTF-8). A shorter input is all
//! text, checked at the fixed `now` with no step accepted before.
//!
//! Properties: no panic; an accepted code is exactly six ASCII digits once trimmed, its step is
//! the current or the previous one and after the last accepted step, and it is the code of that
//! step; a refusal as malformed is exactly the text that is not six digits; a normalised recovery
//! code is 16 base32 characters.

use ichor_renderers::auth::{recovery, totp};
use jiff::Timestamp;

/// RFC 6238's SHA-1 test secret, "12345678901234567890", in base32.
const SECRET: &str = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ";
/// About the year 2900, in seconds: every step time stays a valid timestamp.
const MAX_SECONDS: u64 = 30_000_000_000;

/// One input of the target: returns normally or panics on a broken property.
pub fn run(data: &[u8]) {
    let (now, last_step, text) = match (data.get(..8), data.get(8..16), data.get(16..)) {
        (Some(time), Some(last), Some(text)) => {
            let seconds = u64::from_le_bytes(time.try_into().expect("8 bytes")) % MAX_SECONDS;
            let now = Timestamp::from_second(seconds as i64).expect("in range");
            (now, u64::from_le_bytes(last.try_into().expect("8 bytes")), text)
        }
        _ => (crate::fixtures::now(), 0, data),
    };
    let code = String::from_utf8_lossy(text);
    let trimmed = code.trim();
    let well_formed = code.len() <= 64 && trimmed.len() == 6 && trimmed.bytes().all(|b| b.is_ascii_digit());
    let current = totp::current_step(now).expect("after 1970");
    match totp::verify(SECRET, &code, now, last_step) {
        Ok(step) => {
            assert!(well_formed, "accepted {code:?}");
            assert!(step > last_step, "step {step} not after {last_step}");
            assert!(step == current || step + 1 == current, "step {step} at {current}");
            let at = Timestamp::from_second((step * totp::STEP_SECONDS) as i64).expect("step time");
            assert_eq!(totp::code_at(SECRET, at).expect("code"), trimmed);
        }
        Err(totp::TotpError::Malformed) => assert!(!well_formed, "{code:?} refused as malformed"),
        Err(totp::TotpError::Wrong | totp::TotpError::Replayed) => assert!(well_formed),
        Err(other) => panic!("unexpected refusal of {code:?}: {other}"),
    }
    if let Some(normalised) = recovery::normalise(&code) {
        assert_eq!(normalised.len(), recovery::CODE_CHARS);
        assert!(
            normalised
                .bytes()
                .all(|b| b.is_ascii_uppercase() || (b'2'..=b'7').contains(&b))
        );
    }
}
