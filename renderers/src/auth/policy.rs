//! The password policy (12 to 128 UTF-8 bytes, no composition rules) and the password generator
//! used by `ichor dev`, `ichor init` and `SetPassword --generate`.
//!
//! Length is counted in UTF-8 bytes, not characters, because the upper bound exists to bound the
//! work and memory of hashing, and argon2 consumes bytes. NIST SP 800-63B's advice is followed:
//! a minimum length and no composition rules.

use super::password::Password;

/// The shortest password accepted, in UTF-8 bytes.
pub const MIN_PASSWORD_BYTES: usize = 12;

/// The longest password accepted, in UTF-8 bytes. Also the most [`super::hash`] will hash.
pub const MAX_PASSWORD_BYTES: usize = 128;

/// The length of a generated password, in characters (each one ASCII byte).
pub const GENERATED_PASSWORD_LEN: usize = 24;

/// The alphabet of generated passwords: digits, upper- and lower-case letters without the
/// look-alikes `0 O o 1 I l`, so a password read off a terminal is typed correctly.
/// 56 symbols, so a 24-character password carries about 139 bits.
pub const GENERATOR_ALPHABET: &[u8; 56] = b"23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnpqrstuvwxyz";

/// How many random bytes a caller draws at a time for one generated password: 64 give 24 usable
/// ones except with negligible probability.
pub const GENERATOR_RANDOM_BYTES: usize = 64;

/// Random bytes at or above this value are skipped, so every symbol of the 56-symbol alphabet is
/// equally likely (224 = 4 × 56; `byte % 56` would otherwise favour the first 32 symbols).
const UNBIASED_LIMIT: u8 = 224;

/// A password that breaks the policy. Each message names the field and the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// Fewer than [`MIN_PASSWORD_BYTES`] bytes.
    #[error("password: must be at least {min} bytes (got {got})")]
    TooShort {
        /// The minimum, [`MIN_PASSWORD_BYTES`].
        min: usize,
        /// The password's length in UTF-8 bytes.
        got: usize,
    },
    /// More than [`MAX_PASSWORD_BYTES`] bytes.
    #[error("password: must be at most {max} bytes (got {got})")]
    TooLong {
        /// The maximum, [`MAX_PASSWORD_BYTES`].
        max: usize,
        /// The password's length in UTF-8 bytes.
        got: usize,
    },
}

/// Generating a password failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GenerateError {
    /// [`generate_password_from`] ran out of input before it had every character.
    #[error(
        "not enough random bytes to generate a password: {got} usable of {needed} needed \
         (bytes at or above 224 are skipped)"
    )]
    NotEnoughRandomness {
        /// How many characters could be made from the input.
        got: usize,
        /// [`GENERATED_PASSWORD_LEN`].
        needed: usize,
    },
}

/// Checks a new password against the policy: 12 to 128 UTF-8 bytes, nothing else.
pub fn check_password(password: &Password) -> Result<(), PolicyError> {
    check_length(password.len_bytes())
}

/// The policy on a length in UTF-8 bytes, for callers that only know the length.
pub fn check_length(got: usize) -> Result<(), PolicyError> {
    if got < MIN_PASSWORD_BYTES {
        Err(PolicyError::TooShort {
            min: MIN_PASSWORD_BYTES,
            got,
        })
    } else if got > MAX_PASSWORD_BYTES {
        Err(PolicyError::TooLong {
            max: MAX_PASSWORD_BYTES,
            got,
        })
    } else {
        Ok(())
    }
}

/// Generates a [`GENERATED_PASSWORD_LEN`]-character password from random bytes, uniformly over
/// [`GENERATOR_ALPHABET`]: each byte below 224 picks `GENERATOR_ALPHABET[byte % 56]`, other bytes
/// are skipped. The password always satisfies the policy.
///
/// # Assumptions
/// `random` comes from the operating system's random source: the caller draws
/// [`GENERATOR_RANDOM_BYTES`] bytes and, on [`GenerateError::NotEnoughRandomness`], appends as
/// many again and calls once more (the issuer's `generate_password` does).
pub fn generate_password_from(random: &[u8]) -> Result<Password, GenerateError> {
    let mut out = String::with_capacity(GENERATED_PASSWORD_LEN);
    fill_from(&mut out, random);
    if out.len() < GENERATED_PASSWORD_LEN {
        return Err(GenerateError::NotEnoughRandomness {
            got: out.len(),
            needed: GENERATED_PASSWORD_LEN,
        });
    }
    Ok(Password::new(out))
}

fn fill_from(out: &mut String, random: &[u8]) {
    for &byte in random {
        if out.len() == GENERATED_PASSWORD_LEN {
            return;
        }
        if byte < UNBIASED_LIMIT {
            let symbol = GENERATOR_ALPHABET[usize::from(byte) % GENERATOR_ALPHABET.len()];
            out.push(char::from(symbol));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn refuses_a_password_of_eleven_bytes() {
        let err = check_password(&Password::new("a".repeat(11))).unwrap_err();
        assert_eq!(err.to_string(), "password: must be at least 12 bytes (got 11)");
    }

    #[test]
    fn accepts_passwords_of_twelve_and_of_128_bytes() {
        assert_eq!(check_password(&Password::new("a".repeat(12))), Ok(()));
        assert_eq!(check_password(&Password::new("a".repeat(128))), Ok(()));
    }

    #[test]
    fn refuses_a_password_of_129_bytes() {
        let err = check_password(&Password::new("a".repeat(129))).unwrap_err();
        assert_eq!(err.to_string(), "password: must be at most 128 bytes (got 129)");
    }

    #[test]
    fn counts_bytes_not_characters() {
        // Six two-byte characters are 12 bytes: accepted although only six characters long.
        assert_eq!(check_password(&Password::new("éééééé")), Ok(()));
        // 65 two-byte characters are 130 bytes: refused although only 65 characters long.
        assert_eq!(
            check_password(&Password::new("é".repeat(65))),
            Err(PolicyError::TooLong { max: 128, got: 130 })
        );
    }

    #[test]
    fn has_no_composition_rules() {
        assert_eq!(check_password(&Password::new("aaaaaaaaaaaa")), Ok(()));
        assert_eq!(check_password(&Password::new("            ")), Ok(()));
    }

    #[test]
    fn the_alphabet_has_no_look_alikes_and_no_repeats() {
        for ambiguous in b"0Oo1Il" {
            assert!(
                !GENERATOR_ALPHABET.contains(ambiguous),
                "{}",
                char::from(*ambiguous)
            );
        }
        let mut sorted = GENERATOR_ALPHABET.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), GENERATOR_ALPHABET.len());
    }

    #[test]
    fn the_pure_generator_maps_bytes_and_skips_biased_ones() {
        let mut random = vec![224u8, 255, 0, 55, 56];
        random.extend(std::iter::repeat_n(1u8, 21));
        let password = generate_password_from(&random).unwrap();
        // 224 and 255 are skipped; 0 and 56 both give '2', 55 gives 'z', 1 gives '3'.
        assert_eq!(password.expose(), format!("2z2{}", "3".repeat(21)));
    }

    #[test]
    fn the_pure_generator_refuses_too_little_input() {
        let err = generate_password_from(&[0u8; 23]).unwrap_err();
        assert_eq!(err, GenerateError::NotEnoughRandomness { got: 23, needed: 24 });
        assert_eq!(
            generate_password_from(&[250u8; 100]).unwrap_err(),
            GenerateError::NotEnoughRandomness { got: 0, needed: 24 }
        );
    }

    proptest! {
        #[test]
        fn the_policy_accepts_exactly_12_to_128_bytes(s in "\\PC{0,140}") {
            let len = s.len();
            let verdict = check_password(&Password::new(s));
            prop_assert_eq!(verdict.is_ok(), (12..=128).contains(&len));
        }

        #[test]
        fn generated_passwords_always_pass_the_policy(random in proptest::collection::vec(any::<u8>(), 24..200)) {
            match generate_password_from(&random) {
                Ok(password) => {
                    prop_assert_eq!(password.expose().len(), GENERATED_PASSWORD_LEN);
                    prop_assert!(password.expose().bytes().all(|c| GENERATOR_ALPHABET.contains(&c)));
                    prop_assert!(check_password(&password).is_ok());
                }
                Err(GenerateError::NotEnoughRandomness { got, .. }) => {
                    prop_assert_eq!(got, random.iter().filter(|b| **b < 224).count());
                }
            }
        }
    }
}
