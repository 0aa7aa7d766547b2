//! Password hashing: argon2id with m=65536 KiB, t=3, p=4 (RFC 9106's second recommendation), as a
//! PHC string `$argon2id$v=19$m=65536,t=3,p=4$<salt>$<hash>` (16-byte salt, 32-byte output).
//!
//! The four lanes are computed on all cores (the `argon2` crate's `parallel` feature); the hash is
//! the same as on one core. Each hash holds 64 MiB while it runs, so callers admit at most two at
//! once (the issuer's semaphore).
//!
//! Timing. Whoever calls [`verify_password`] for a user that exists, and [`verify_dummy`] (or
//! [`verify_password_or_dummy`] with `None`) for one that does not, pays one argon2id computation
//! at the current parameters either way, so response time does not tell which user names exist.
//! A password longer than [`MAX_PASSWORD_BYTES`] is never hashed into a stored hash (the policy
//! refuses it), so no stored hash can match it: [`verify_password`] answers
//! [`Verification::Invalid`] after running the dummy on the first 128 bytes, which costs the same
//! as a normal verify and bounds the work an attacker can ask for with a huge password. A stored
//! hash with older parameters costs what those parameters cost until the next successful login
//! rehashes it ([`Verification::Valid::needs_rehash`]).
//!
//! Comparison of the computed and the stored output is constant-time (`subtle`).

use argon2::password_hash::phc::PasswordHash;
use argon2::{Algorithm, Argon2, Params, PasswordHasher, Version};
use subtle::ConstantTimeEq;

use super::password::Password;
pub use super::policy::MAX_PASSWORD_BYTES;

/// Memory cost of new hashes, in KiB (64 MiB).
pub const M_COST_KIB: u32 = 65_536;
/// Time cost (passes) of new hashes.
pub const T_COST: u32 = 3;
/// Parallelism (lanes) of new hashes.
pub const P_COST: u32 = 4;
/// Length of the hash output of new hashes, in bytes.
pub const OUTPUT_LEN: usize = 32;
/// Length of the salt of new hashes, in bytes.
pub const SALT_LEN: usize = 16;

/// The largest memory cost a stored hash may ask [`verify_password`] for, in KiB (256 MiB).
/// A larger one is refused rather than computed: the issuer budgets 64 MiB per hash, and whoever
/// can write the credentials Secret must not be able to exhaust its memory with one entry.
pub const MAX_VERIFY_M_COST_KIB: u32 = 262_144;
/// The largest time cost a stored hash may ask [`verify_password`] for.
pub const MAX_VERIFY_T_COST: u32 = 16;
/// The largest parallelism a stored hash may ask [`verify_password`] for.
pub const MAX_VERIFY_P_COST: u32 = 16;

/// A valid PHC string with the current parameters whose password nobody knows, verified when the
/// user does not exist so that an unknown user costs the same as a wrong password.
/// (Made once with [`hash_password`] from a throw-away password and a fixed salt; a test pins
/// that its parameters are the current ones.)
pub const DUMMY_PHC: &str = "$argon2id$v=19$m=65536,t=3,p=4$aWNob3ItZHVtbXktc2FsdA$\
                             vsCuZQ257nxGS2GVoK3VSXfVGO7nHV6naRdY925wNnc";

/// The result of verifying a password against a stored hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Verification {
    /// The password matches.
    Valid {
        /// The stored hash uses another algorithm, version or parameters than new hashes do:
        /// hash the password again with [`hash_password`] and a fresh salt, and store it.
        needs_rehash: bool,
    },
    /// The password does not match (or the user is unknown, or the password is over-long).
    Invalid,
}

impl Verification {
    /// Whether the password matched.
    pub fn is_valid(self) -> bool {
        matches!(self, Verification::Valid { .. })
    }
}

/// Hashing or verifying failed. Errors about a stored hash name its field, `hash`, of the
/// credentials entry, and are fixed by setting the user's password again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HashError {
    /// The password is longer than the policy allows; it is not hashed.
    #[error("password: must be at most {max} bytes (got {got})")]
    PasswordTooLong {
        /// [`MAX_PASSWORD_BYTES`].
        max: usize,
        /// The password's length in UTF-8 bytes.
        got: usize,
    },
    /// The stored string is not a usable PHC string.
    #[error("hash: not a valid argon2 PHC string ({reason}); set the user's password again")]
    Malformed {
        /// What is wrong with it.
        reason: String,
    },
    /// The stored string names an algorithm other than argon2id, argon2i or argon2d.
    #[error("hash: algorithm \"{algorithm}\" is not argon2id; set the user's password again")]
    UnsupportedAlgorithm {
        /// The algorithm the string names.
        algorithm: String,
    },
    /// The stored string's parameters are beyond what this build is willing to compute.
    #[error(
        "hash: parameters m={m},t={t},p={p} exceed what this build verifies \
         (m at most {MAX_VERIFY_M_COST_KIB} KiB, t at most {MAX_VERIFY_T_COST}, p at most \
         {MAX_VERIFY_P_COST}); set the user's password again"
    )]
    ParametersOutOfBounds {
        /// Memory cost in KiB.
        m: u32,
        /// Time cost.
        t: u32,
        /// Parallelism.
        p: u32,
    },
    /// The argon2 computation itself failed (for example, out of memory).
    #[error("argon2id hashing failed: {0}")]
    Argon2(String),
}

fn current_params() -> Result<Params, HashError> {
    Params::new(M_COST_KIB, T_COST, P_COST, Some(OUTPUT_LEN)).map_err(|e| HashError::Argon2(e.to_string()))
}

/// Hashes a password with the current parameters and the given salt: pure and deterministic.
/// Refuses a password over [`MAX_PASSWORD_BYTES`] (the policy's bound, which also bounds work);
/// it does not apply the minimum, which is [`super::policy::check_password`]'s job.
///
/// # Assumptions
/// A stored hash needs a salt of its own: the caller draws `salt` from the operating system's
/// random source for every new hash (the issuer's `hash_password_random` does).
pub fn hash_password(password: &Password, salt: &[u8; SALT_LEN]) -> Result<String, HashError> {
    hash_with_params(password, salt, current_params()?)
}

fn hash_with_params(password: &Password, salt: &[u8], params: Params) -> Result<String, HashError> {
    let got = password.len_bytes();
    if got > MAX_PASSWORD_BYTES {
        return Err(HashError::PasswordTooLong {
            max: MAX_PASSWORD_BYTES,
            got,
        });
    }
    let hasher = Argon2::new(Algorithm::Argon2id, Version::V0x13, params);
    let phc = hasher
        .hash_password_with_salt(password.expose().as_bytes(), salt)
        .map_err(|e| HashError::Argon2(e.to_string()))?;
    Ok(phc.to_string())
}

/// Verifies a password against a stored PHC string.
///
/// Returns an error, never a panic, when the stored string is malformed, names another algorithm
/// or asks for parameters over the `MAX_VERIFY_*` bounds; that is a broken entry, not a wrong
/// password. A password over [`MAX_PASSWORD_BYTES`] is [`Verification::Invalid`] at the cost of
/// one dummy verify (see the module documentation).
pub fn verify_password(password: &Password, phc: &str) -> Result<Verification, HashError> {
    let stored = StoredHash::parse(phc)?;
    if password.len_bytes() > MAX_PASSWORD_BYTES {
        return Ok(verify_dummy(password));
    }
    stored.verify(password.expose().as_bytes())
}

/// Verifies against [`DUMMY_PHC`] and always answers [`Verification::Invalid`]: the path for an
/// unknown (or otherwise refused) user, costing one argon2id computation at current parameters.
pub fn verify_dummy(password: &Password) -> Verification {
    let bytes = password.expose().as_bytes();
    let bounded = bytes.get(..MAX_PASSWORD_BYTES).unwrap_or(bytes);
    // The dummy string is a constant that a test proves valid; if it were not, the work is
    // skipped but the answer is the same.
    if let Ok(stored) = StoredHash::parse(DUMMY_PHC) {
        let outcome = stored.verify(bounded);
        std::hint::black_box(&outcome);
    }
    Verification::Invalid
}

/// [`verify_password`] for a known user's stored hash, [`verify_dummy`] for `None` (no such user,
/// or a user without a password), so both paths cost the same.
pub fn verify_password_or_dummy(password: &Password, phc: Option<&str>) -> Result<Verification, HashError> {
    match phc {
        Some(phc) => verify_password(password, phc),
        None => Ok(verify_dummy(password)),
    }
}

/// Whether a stored hash was made with other settings than new hashes, without verifying a
/// password (for reporting; a login learns it from [`Verification::Valid::needs_rehash`]).
pub fn needs_rehash(phc: &str) -> Result<bool, HashError> {
    Ok(StoredHash::parse(phc)?.needs_rehash)
}

/// A parsed and bounds-checked stored hash.
struct StoredHash {
    algorithm: Algorithm,
    version: Version,
    params: Params,
    salt: Vec<u8>,
    expected: Vec<u8>,
    needs_rehash: bool,
}

impl StoredHash {
    fn parse(phc: &str) -> Result<Self, HashError> {
        let malformed = |reason: String| HashError::Malformed { reason };
        let parsed = PasswordHash::new(phc).map_err(|e| malformed(e.to_string()))?;
        let algorithm = match parsed.algorithm.as_str() {
            "argon2id" => Algorithm::Argon2id,
            "argon2i" => Algorithm::Argon2i,
            "argon2d" => Algorithm::Argon2d,
            other => {
                return Err(HashError::UnsupportedAlgorithm {
                    algorithm: other.to_owned(),
                });
            }
        };
        let version = match parsed.version {
            Some(0x13) => Version::V0x13,
            Some(0x10) => Version::V0x10,
            Some(other) => return Err(malformed(format!("unknown argon2 version {other}"))),
            None => return Err(malformed("no version field (v=19)".to_owned())),
        };
        let salt = parsed
            .salt
            .as_ref()
            .map(|s| s.as_ref().to_vec())
            .unwrap_or_default();
        if salt.len() < argon2::MIN_SALT_LEN {
            return Err(malformed(format!(
                "salt is {} bytes, at least {} are needed",
                salt.len(),
                argon2::MIN_SALT_LEN
            )));
        }
        let expected = match &parsed.hash {
            Some(output) => output.as_bytes().to_vec(),
            None => return Err(malformed("no hash output".to_owned())),
        };
        let params = Params::try_from(&parsed).map_err(|e| malformed(e.to_string()))?;
        let (m, t, p) = (params.m_cost(), params.t_cost(), params.p_cost());
        if m > MAX_VERIFY_M_COST_KIB || t > MAX_VERIFY_T_COST || p > MAX_VERIFY_P_COST {
            return Err(HashError::ParametersOutOfBounds { m, t, p });
        }
        let needs_rehash = algorithm != Algorithm::Argon2id
            || version != Version::V0x13
            || (m, t, p) != (M_COST_KIB, T_COST, P_COST)
            || expected.len() != OUTPUT_LEN
            || !params.keyid().is_empty()
            || !params.data().is_empty();
        Ok(Self {
            algorithm,
            version,
            params,
            salt,
            expected,
            needs_rehash,
        })
    }

    fn verify(&self, password: &[u8]) -> Result<Verification, HashError> {
        let hasher = Argon2::new(self.algorithm, self.version, self.params.clone());
        let mut computed = vec![0u8; self.expected.len()];
        hasher
            .hash_password_into(password, &self.salt, &mut computed)
            .map_err(|e| HashError::Argon2(e.to_string()))?;
        if bool::from(computed.ct_eq(&self.expected)) {
            Ok(Verification::Valid {
                needs_rehash: self.needs_rehash,
            })
        } else {
            Ok(Verification::Invalid)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use argon2::password_hash::CustomizedPasswordHasher;

    const SALT: [u8; SALT_LEN] = *b"0123456789abcdef";

    /// Cheap parameters for tests that are about the plumbing, not the cost.
    fn cheap() -> Params {
        Params::new(64, 1, 1, Some(OUTPUT_LEN)).unwrap()
    }

    /// A hash made by the argon2 crate directly, with the parameters of the crate's default
    /// (OWASP's m=19456, t=2, p=1), as an older build could have stored.
    fn older_phc(password: &str) -> String {
        let params = Params::new(19_456, 2, 1, None).unwrap();
        Argon2::default()
            .hash_password_with_params(password.as_bytes(), &SALT, params)
            .unwrap()
            .to_string()
    }

    // Full-cost hashes in this module: hash, verify right and wrong, dummy, over-long, seed (6).

    const DUMMY_SEED_PASSWORD: &str = "ichor dummy password, never a user's";
    const DUMMY_SEED_SALT: &[u8; SALT_LEN] = b"ichor-dummy-salt";

    #[test]
    fn a_hash_at_current_parameters_verifies_its_password_and_not_another() {
        let password = Password::new("correct horse battery staple");
        let phc = hash_password(&password, &SALT).unwrap();
        assert!(phc.starts_with("$argon2id$v=19$m=65536,t=3,p=4$"), "{phc}");
        assert_eq!(needs_rehash(&phc), Ok(false));
        assert_eq!(
            verify_password(&password, &phc),
            Ok(Verification::Valid { needs_rehash: false })
        );
        let wrong = Password::new("correct horse battery stable");
        assert_eq!(verify_password(&wrong, &phc), Ok(Verification::Invalid));
    }

    #[test]
    fn hashing_is_deterministic_for_a_given_salt_and_differs_across_salts() {
        let password = Password::new("twelve bytes!");
        let a = hash_with_params(&password, &SALT, cheap()).unwrap();
        let b = hash_with_params(&password, &SALT, cheap()).unwrap();
        let c = hash_with_params(&password, b"fedcba9876543210", cheap()).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(
            a.starts_with("$argon2id$v=19$m=64,t=1,p=1$MDEyMzQ1Njc4OWFiY2RlZg$"),
            "{a}"
        );
    }

    #[test]
    fn a_hash_with_older_parameters_verifies_and_asks_for_a_rehash() {
        let phc = older_phc("an older password");
        assert!(phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{phc}");
        let verdict = verify_password(&Password::new("an older password"), &phc);
        assert_eq!(verdict, Ok(Verification::Valid { needs_rehash: true }));
        assert_eq!(
            verify_password(&Password::new("not the password"), &phc),
            Ok(Verification::Invalid)
        );
    }

    #[test]
    fn a_hash_with_another_argon2_variant_or_version_asks_for_a_rehash() {
        let cheap_params = Params::new(64, 1, 1, None).unwrap();
        let argon2i = Argon2::default()
            .hash_password_customized(
                b"a password here",
                &SALT,
                Some("argon2i"),
                None,
                cheap_params.clone(),
            )
            .unwrap()
            .to_string();
        let v16 = Argon2::default()
            .hash_password_customized(b"a password here", &SALT, None, Some(0x10), cheap_params)
            .unwrap()
            .to_string();
        for phc in [argon2i, v16] {
            let verdict = verify_password(&Password::new("a password here"), &phc);
            assert_eq!(verdict, Ok(Verification::Valid { needs_rehash: true }), "{phc}");
        }
    }

    #[test]
    fn a_malformed_stored_hash_is_an_error_not_a_panic() {
        let password = Password::new("whatever password");
        let cases = [
            "",
            "plain text",
            "$argon2id$v=19$m=65536,t=3,p=4$",
            "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHRzYWx0$",
            "$argon2id$m=65536,t=3,p=4$c2FsdHNhbHRzYWx0$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            "$argon2id$v=20$m=65536,t=3,p=4$c2FsdHNhbHRzYWx0$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            "$argon2id$v=19$m=65536,t=3,p=4,x=1$c2FsdHNhbHRzYWx0$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            "$argon2id$v=19$m=65536,t=0,p=4$c2FsdHNhbHRzYWx0$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            "$argon2id$v=19$m=65536,t=3,p=4$!!!$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        ];
        for phc in cases {
            let err = verify_password(&password, phc).unwrap_err();
            assert!(matches!(err, HashError::Malformed { .. }), "{phc:?}: {err:?}");
            assert!(
                err.to_string()
                    .starts_with("hash: not a valid argon2 PHC string ("),
                "{err}"
            );
        }
    }

    #[test]
    fn another_algorithm_is_refused_by_name() {
        let err = verify_password(
            &Password::new("whatever password"),
            "$scrypt$ln=16,r=8,p=1$c2FsdHNhbHQ$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        )
        .unwrap_err();
        assert_eq!(
            err,
            HashError::UnsupportedAlgorithm {
                algorithm: "scrypt".to_owned()
            }
        );
    }

    #[test]
    fn a_stored_hash_asking_for_too_much_memory_is_refused_without_computing_it() {
        let phc =
            "$argon2id$v=19$m=4194304,t=3,p=4$c2FsdHNhbHRzYWx0$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
        let err = verify_password(&Password::new("whatever password"), phc).unwrap_err();
        assert_eq!(
            err,
            HashError::ParametersOutOfBounds {
                m: 4_194_304,
                t: 3,
                p: 4
            }
        );
        assert!(err.to_string().contains("m at most 262144 KiB"), "{err}");
    }

    #[test]
    fn the_dummy_hash_has_the_current_parameters() {
        assert_eq!(needs_rehash(DUMMY_PHC), Ok(false));
    }

    #[test]
    fn the_dummy_verify_answers_invalid_for_any_password() {
        assert_eq!(
            verify_dummy(&Password::new("any password at all")),
            Verification::Invalid
        );
        assert_eq!(
            verify_password_or_dummy(&Password::new("x"), None),
            Ok(Verification::Invalid)
        );
    }

    #[test]
    fn refuses_to_hash_a_password_over_128_bytes() {
        let err = hash_password(&Password::new("a".repeat(129)), &SALT).unwrap_err();
        assert_eq!(err.to_string(), "password: must be at most 128 bytes (got 129)");
    }

    #[test]
    fn an_over_long_password_is_invalid_not_an_error() {
        // Even when the first 128 bytes are the right password: nothing over 128 bytes is stored.
        let password = "p".repeat(128);
        let phc = hash_with_params(&Password::new(password.clone()), &SALT, cheap()).unwrap();
        let longer = Password::new(format!("{password}!"));
        assert_eq!(verify_password(&longer, &phc), Ok(Verification::Invalid));
    }

    #[test]
    fn the_dummy_hash_is_what_hash_password_makes_from_its_seed() {
        // Pins determinism at the production parameters and that DUMMY_PHC is a real hash.
        let phc = hash_password(&Password::new(DUMMY_SEED_PASSWORD), DUMMY_SEED_SALT).unwrap();
        assert_eq!(phc, DUMMY_PHC);
    }
}
