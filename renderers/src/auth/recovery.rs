//! Recovery codes (docs/mfa.md): ten codes of 16 base32 characters (80 random bits each), shown
//! once as `XXXX-XXXX-XXXX-XXXX`, stored as the lowercase hex SHA-256 of the normalised code (a
//! random 80-bit code needs no slow hash: an offline search of 2^80 is out of reach). Each works
//! once: [`consume`] compares against every digest in constant time and removes the one used.
//!
//! Typed input is normalised before hashing: letters of either case, dashes and spaces ignored,
//! so "abcd efgh-ijkl mnop" is the code `ABCDEFGHIJKLMNOP`.
//!
//! Pure: the random bytes and `now` are passed in.

use std::collections::BTreeSet;
use std::fmt;

use jiff::Timestamp;
use sha2::{Digest as _, Sha256};
use subtle::{Choice, ConditionallySelectable as _, ConstantTimeEq as _};

use super::base32;
use super::credentials::{RECOVERY_CODE_COUNT, RecoveryCodes};

/// Characters of a code, without the dashes.
pub const CODE_CHARS: usize = 16;
/// Random bytes of one code (80 bits).
pub const CODE_BYTES: usize = 10;
/// Random bytes [`generate`] takes: [`CODE_BYTES`] for each of the [`RECOVERY_CODE_COUNT`]
/// codes.
pub const RANDOM_BYTES: usize = CODE_BYTES * RECOVERY_CODE_COUNT;
/// The longest typed input looked at, in bytes; anything longer matches no code.
pub const MAX_INPUT_BYTES: usize = 64;

/// Codes just made: `codes` to show the user once, `stored` to write in the entry.
#[derive(Clone, PartialEq, Eq)]
pub struct NewRecoveryCodes {
    /// The codes as shown, `XXXX-XXXX-XXXX-XXXX`. Secrets: never logged.
    pub codes: Vec<String>,
    /// Their digests, for the entry's `factors.recovery`.
    pub stored: RecoveryCodes,
}

impl fmt::Debug for NewRecoveryCodes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewRecoveryCodes")
            .field("codes", &format_args!("<{} redacted>", self.codes.len()))
            .field("stored", &self.stored)
            .finish()
    }
}

/// Making recovery codes failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecoveryError {
    /// Two codes came out equal: the random bytes cannot be from a working random source.
    #[error(
        "the random bytes gave the same recovery code twice; the random source is broken, no codes were made"
    )]
    RepeatedCode,
}

/// Ten new codes from `random` (the caller's CSPRNG bytes), made at `now`.
///
/// # Errors
/// [`RecoveryError::RepeatedCode`] when two codes are equal (e.g. bytes all zero).
pub fn generate(random: &[u8; RANDOM_BYTES], now: Timestamp) -> Result<NewRecoveryCodes, RecoveryError> {
    let mut codes = Vec::with_capacity(RECOVERY_CODE_COUNT);
    let mut digests = Vec::with_capacity(RECOVERY_CODE_COUNT);
    let mut seen = BTreeSet::new();
    for bytes in random.chunks(CODE_BYTES) {
        let code = base32::encode(bytes);
        if !seen.insert(code.clone()) {
            return Err(RecoveryError::RepeatedCode);
        }
        digests.push(digest_of_normalised(&code));
        codes.push(display(&code));
    }
    Ok(NewRecoveryCodes {
        codes,
        stored: RecoveryCodes {
            digests,
            created_at: now,
        },
    })
}

/// The code as typed, normalised: ASCII letters upper-cased, dashes and whitespace dropped;
/// `None` unless that leaves exactly [`CODE_CHARS`] base32 characters.
pub fn normalise(input: &str) -> Option<String> {
    if input.len() > MAX_INPUT_BYTES {
        return None;
    }
    let code: String = input
        .chars()
        .filter(|c| *c != '-' && !c.is_whitespace())
        .map(|c| c.to_ascii_uppercase())
        .collect();
    let valid = code.len() == CODE_CHARS
        && code
            .bytes()
            .all(|b| b.is_ascii_uppercase() || (b'2'..=b'7').contains(&b));
    valid.then_some(code)
}

/// The stored digest of a typed code (lowercase hex SHA-256 of [`normalise`]), or `None` when
/// the input is not a code.
pub fn digest(input: &str) -> Option<String> {
    normalise(input).map(|code| digest_of_normalised(&code))
}

/// Uses the code typed as `input`: when it matches an unused code, removes that digest from
/// `codes` and returns true (the caller writes the entry). Compares against every digest in
/// constant time, so the time taken does not tell which, or whether one, matched.
pub fn consume(codes: &mut RecoveryCodes, input: &str) -> bool {
    let Some(digest) = digest(input) else {
        return false;
    };
    let mut found = Choice::from(0);
    let mut index: u64 = 0;
    for (i, stored) in codes.digests.iter().enumerate() {
        let equal = stored.as_bytes().ct_eq(digest.as_bytes());
        index.conditional_assign(&(i as u64), equal);
        found |= equal;
    }
    if bool::from(found) {
        let Ok(index) = usize::try_from(index) else {
            return false;
        };
        codes.digests.remove(index);
        true
    } else {
        false
    }
}

fn digest_of_normalised(code: &str) -> String {
    hex::encode(Sha256::digest(code.as_bytes()))
}

/// `ABCDEFGHIJKLMNOP` as `ABCD-EFGH-IJKL-MNOP`.
fn display(code: &str) -> String {
    let groups: Vec<&str> = code
        .as_bytes()
        .chunks(4)
        .filter_map(|group| std::str::from_utf8(group).ok())
        .collect();
    groups.join("-")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::credentials::{CredentialsEntry, Factors};
    use proptest::prelude::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    fn random() -> [u8; RANDOM_BYTES] {
        std::array::from_fn(|i| (i * 37 + 11) as u8)
    }

    #[test]
    fn ten_codes_of_sixteen_base32_characters_in_four_groups() {
        let new = generate(&random(), at(1_000)).unwrap();
        assert_eq!(new.codes.len(), RECOVERY_CODE_COUNT);
        assert_eq!(new.stored.digests.len(), RECOVERY_CODE_COUNT);
        assert_eq!(new.stored.created_at, at(1_000));
        for (code, stored) in new.codes.iter().zip(&new.stored.digests) {
            assert_eq!(code.len(), 19, "{code}");
            let groups: Vec<&str> = code.split('-').collect();
            assert!(groups.len() == 4 && groups.iter().all(|g| g.len() == 4), "{code}");
            assert_eq!(digest(code).as_ref(), Some(stored));
        }
        // The first code is the base32 of the first ten bytes.
        assert_eq!(
            new.codes[0].replace('-', ""),
            base32::encode(&random()[..CODE_BYTES])
        );
    }

    #[test]
    fn the_digest_is_sha256_hex_of_the_normalised_code() {
        // sha256("AAAABBBBCCCCDDDD")
        let expected = "669c164f44198b43b7175ac0dff496fe43393717428747ccb44c294fbeaca6e0";
        for input in [
            "AAAABBBBCCCCDDDD",
            "aaaa-bbbb-cccc-dddd",
            " AaAa BBBB-cccc\tdddd\n",
            "a-a-a-a-b-b-b-b-c-c-c-c-d-d-d-d",
        ] {
            assert_eq!(digest(input).as_deref(), Some(expected), "{input:?}");
        }
    }

    #[test]
    fn what_is_not_a_code_has_no_digest() {
        let long = format!("{}AAAABBBBCCCCDDDD", " ".repeat(MAX_INPUT_BYTES));
        for input in [
            "",
            "AAAABBBBCCCCDDD",
            "AAAABBBBCCCCDDDDE",
            "AAAABBBBCCCCDDD1",
            "AAAABBBBCCCCDDD8",
            "AAAA_BBBB_CCCC_DDDD",
            "ÄAAABBBBCCCCDDDD",
            &long,
        ] {
            assert_eq!(normalise(input), None, "{input:?}");
            assert_eq!(digest(input), None, "{input:?}");
        }
    }

    #[test]
    fn each_code_works_once_and_removes_only_itself() {
        let new = generate(&random(), at(0)).unwrap();
        let mut stored = new.stored.clone();
        assert!(consume(&mut stored, &new.codes[4].to_lowercase()));
        assert_eq!(stored.digests.len(), 9);
        assert!(!stored.digests.contains(&new.stored.digests[4]));
        assert!(!consume(&mut stored, &new.codes[4]), "the same code again");
        assert_eq!(stored.digests.len(), 9);
        for code in new
            .codes
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 4)
            .map(|(_, c)| c)
        {
            assert!(consume(&mut stored, code), "{code}");
        }
        assert!(stored.digests.is_empty());
        assert!(!consume(&mut stored, &new.codes[0]));
    }

    #[test]
    fn a_wrong_or_malformed_code_changes_nothing() {
        let new = generate(&random(), at(0)).unwrap();
        let mut stored = new.stored.clone();
        for input in ["AAAA-AAAA-AAAA-AAAA", "", "not a code", &"A".repeat(10_000)] {
            assert!(!consume(&mut stored, input), "{input:?}");
        }
        assert_eq!(stored, new.stored);
    }

    #[test]
    fn bytes_that_repeat_a_code_are_refused() {
        assert_eq!(
            generate(&[0; RANDOM_BYTES], at(0)),
            Err(RecoveryError::RepeatedCode)
        );
    }

    #[test]
    fn the_stored_codes_are_a_valid_entry_and_debug_shows_no_code() {
        let new = generate(&random(), at(1_793_872_800)).unwrap();
        let mut entry = CredentialsEntry::new("$argon2id$x".to_owned(), at(1_793_872_800), false);
        entry.factors = Factors {
            recovery: Some(new.stored.clone()),
            ..Factors::default()
        };
        let json = entry.to_json("alice").unwrap();
        assert!(json.contains(&new.stored.digests[0]), "{json}");
        let printed = format!("{new:?}");
        for code in &new.codes {
            assert!(!printed.contains(code.as_str()), "{printed}");
        }
        assert!(!printed.contains(&new.stored.digests[0]), "{printed}");
    }

    proptest! {
        #[test]
        fn any_input_is_answered_without_panic(input in any::<String>()) {
            let new = generate(&random(), at(0)).unwrap();
            let mut stored = new.stored;
            let used = consume(&mut stored, &input);
            prop_assert_eq!(stored.digests.len(), if used { 9 } else { 10 });
        }

        #[test]
        fn every_generated_code_matches_however_it_is_typed(random in proptest::collection::vec(any::<u8>(), RANDOM_BYTES), lower in any::<bool>()) {
            let random: [u8; RANDOM_BYTES] = random.try_into().unwrap();
            let Ok(new) = generate(&random, at(0)) else {
                return Ok(());
            };
            let mut stored = new.stored.clone();
            for code in &new.codes {
                let typed = if lower { code.to_lowercase().replace('-', " ") } else { code.clone() };
                prop_assert!(consume(&mut stored, &typed));
            }
            prop_assert!(stored.digests.is_empty());
        }
    }
}
