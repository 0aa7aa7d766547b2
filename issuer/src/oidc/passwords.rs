//! Password verification and hashing through the process's one argon2id gate
//! ([`HashGate`], in `hash_gate`), on the pools of [`super::hash_pools`] (a known device's check at
//! the process's priority, every other at a lower one); and the edge where a new hash gets its
//! salt and a generated password its random bytes, both read from the operating system's random
//! source (the pure rules in `ichor_renderers::auth` take them as input). The sign-in form, the
//! known devices' lane and the `UserService` all compute through [`check`], [`hash_new`] and
//! [`verify_then_hash`]: each moves its gate admission into the blocking task, so a computation
//! holds its place until it really ends, even when the request that asked for it is dropped.

use ichor_renderers::auth::{
    Password,
    hash::{HashError, SALT_LEN, Verification, hash_password, verify_dummy, verify_password_or_dummy},
    policy::{GENERATOR_RANDOM_BYTES, GenerateError, generate_password_from},
};

pub use super::hash_gate::{Admitted, ApiCaller, DEFAULT_MAX_WAITING, DEFAULT_PER_USER, GateError, HashGate};
use super::hash_pools::{self, Pool};

/// Hashing a new password failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NewHashError {
    /// The operating system's random source failed while making a salt.
    #[error("could not read {SALT_LEN} random bytes for a salt from the operating system: {0}")]
    Random(String),
    /// The password could not be hashed.
    #[error(transparent)]
    Hash(#[from] HashError),
}

/// The operating system's random source failed while generating a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("could not read random bytes from the operating system to generate a password: {0}")]
pub struct GeneratePasswordError(String);

/// Hashes a password with the current parameters and a fresh salt from the operating system's
/// random source (a new credentials entry, a set password, a rehash after sign-in).
///
/// # Errors
/// [`NewHashError::Random`] when no salt could be read, [`NewHashError::Hash`] when
/// [`hash_password`] refuses the password or argon2id fails.
pub fn hash_password_random(password: &Password) -> Result<String, NewHashError> {
    let mut salt = [0u8; SALT_LEN];
    getrandom::fill(&mut salt).map_err(|e| NewHashError::Random(e.to_string()))?;
    Ok(hash_password(password, &salt)?)
}

/// Generates a password from the operating system's random source with
/// [`generate_password_from`], drawing more bytes in the rare case the first ones are not enough.
/// It always satisfies the policy.
///
/// # Errors
/// The operating system's random source failed.
pub fn generate_password() -> Result<Password, GeneratePasswordError> {
    let mut random = Vec::with_capacity(GENERATOR_RANDOM_BYTES);
    let generated = loop {
        let drawn = random.len();
        random.resize(drawn + GENERATOR_RANDOM_BYTES, 0);
        let fresh = random.get_mut(drawn..).unwrap_or_default();
        if let Err(e) = getrandom::fill(fresh) {
            break Err(GeneratePasswordError(e.to_string()));
        }
        match generate_password_from(&random) {
            Ok(password) => break Ok(password),
            Err(GenerateError::NotEnoughRandomness { .. }) => continue,
        }
    };
    random.iter_mut().for_each(|b| *b = 0);
    std::hint::black_box(&random);
    generated
}

/// What a password check found.
#[derive(Debug)]
pub(crate) enum Checked {
    /// The password is right; `rehash` holds a new PHC string when the stored one used outdated
    /// parameters (and hashing it again succeeded).
    Valid { rehash: Option<String> },
    /// Wrong password, unknown user, or an unusable stored hash (logged; answered like a wrong
    /// password, at the same cost).
    Invalid,
}

/// Why no answer could be computed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CheckError {
    /// Too many checks are waiting already, or the user name holds its share of the gate.
    #[error("too many password checks are waiting; try again in {retry_after} s")]
    Busy {
        /// Seconds to wait before trying again.
        retry_after: u64,
    },
    /// The semaphore was closed or the blocking task failed.
    #[error("the password check could not run: {0}")]
    Internal(String),
}

/// Enters `gate` for a check of `user` (or, with `borrow`, the lane's
/// [`HashGate::enter_or_borrow`]), mapping a refusal.
async fn admit(gate: &HashGate, borrow: Option<&HashGate>, user: &str) -> Result<Admitted, CheckError> {
    let admitted = match borrow {
        Some(shared) => gate.enter_or_borrow(shared, user).await,
        None => gate.enter(user).await,
    };
    admitted.map_err(gate_error)
}

/// A gate's refusal as a check's.
fn gate_error(e: GateError) -> CheckError {
    match e {
        GateError::Busy { retry_after } => CheckError::Busy { retry_after },
        GateError::Closed => CheckError::Internal(e.to_string()),
    }
}

/// Runs `work` on `pool`'s threads in a blocking task that owns `admitted`, so the gate place is
/// given back when the argon2id work ends, whether or not anyone still waits for its answer.
async fn compute<R: Send + 'static>(
    admitted: Admitted,
    pool: Pool,
    work: impl FnOnce() -> R + Send + 'static,
) -> Result<R, CheckError> {
    tokio::task::spawn_blocking(move || {
        let _admitted = admitted;
        hash_pools::run(pool, work)
    })
    .await
    .map_err(|e| CheckError::Internal(e.to_string()))
}

/// Verifies `password` against `phc` (`None`: unknown user or no password set, verified against
/// the dummy hash) once through `gate` ([`CheckError::Busy`] when its queue is full or `user`
/// holds its share), or on a free permit of `borrow` ([`HashGate::enter_or_borrow`]), holding one
/// hash permit for the whole computation, including a rehash. The admission moves into the
/// blocking task, so it is held until the computation really ends even if the request is
/// dropped. A check that entered through a lane (`borrow` given) computes on [`Pool::Lane`],
/// every other on [`Pool::Shared`].
pub(crate) async fn check(
    gate: &HashGate,
    borrow: Option<&HashGate>,
    user: &str,
    password: Password,
    phc: Option<String>,
) -> Result<Checked, CheckError> {
    let admitted = admit(gate, borrow, user).await?;
    let user = user.to_owned();
    let pool = if borrow.is_some() {
        Pool::Lane
    } else {
        Pool::Shared
    };
    compute(admitted, pool, move || {
        match verify_password_or_dummy(&password, phc.as_deref()) {
            Ok(Verification::Valid { needs_rehash }) => {
                let rehash = if needs_rehash {
                    match hash_password_random(&password) {
                        Ok(h) => Some(h),
                        Err(e) => {
                            tracing::warn!(user = %user, error = %e, "rehash after sign-in failed; keeping the old hash");
                            None
                        }
                    }
                } else {
                    None
                };
                Checked::Valid { rehash }
            }
            Ok(Verification::Invalid) => Checked::Invalid,
            Err(e) => {
                tracing::warn!(user = %user, error = %e, "the stored password hash is unusable; refusing sign-in");
                // Spend the same work as any other refusal.
                let _ = verify_dummy(&password);
                Checked::Invalid
            }
        }
    })
    .await
}

/// Hashes `password` for the request of API caller `caller` (a new user's or a set password)
/// through `gate` in the caller's own place ([`HashGate::enter_caller`]), on [`Pool::Shared`],
/// the admission owned by the computation as in [`check`].
///
/// # Errors
/// [`CheckError::Busy`] when the gate refuses, [`CheckError::Internal`] when no salt could be
/// read, argon2id failed or the task did.
pub(crate) async fn hash_new(
    gate: &HashGate,
    caller: ApiCaller<'_>,
    password: Password,
) -> Result<String, CheckError> {
    let admitted = gate.enter_caller(caller).await.map_err(gate_error)?;
    compute(admitted, Pool::Shared, move || hash_password_random(&password))
        .await?
        .map_err(|e| CheckError::Internal(e.to_string()))
}

/// Verifies `old` against `phc` and, when it is right, hashes `new`, both in one admission of
/// `gate` for `user` (a password change: one computation at a time, never two places). `None`
/// when `old` is wrong or `phc` unusable (logged).
///
/// # Errors
/// As [`hash_new`].
pub(crate) async fn verify_then_hash(
    gate: &HashGate,
    user: &str,
    old: Password,
    phc: String,
    new: Password,
) -> Result<Option<String>, CheckError> {
    let admitted = gate
        .enter_caller(ApiCaller::User(user))
        .await
        .map_err(gate_error)?;
    let user = user.to_owned();
    compute(admitted, Pool::Shared, move || match verify_password_or_dummy(&old, Some(&phc)) {
        Ok(Verification::Valid { .. }) => hash_password_random(&new).map(Some),
        Ok(Verification::Invalid) => Ok(None),
        Err(e) => {
            tracing::warn!(user = %user, error = %e, "the stored password hash is unusable; refusing the change");
            Ok(None)
        }
    })
    .await?
    .map_err(|e| CheckError::Internal(e.to_string()))
}

/// Verifies `password` against `phc` in one admission of `gate` for `user` (a re-ask of the
/// current password before a change of the user's second factors: one computation in the
/// caller's own place, as [`verify_then_hash`]). False when it is wrong or `phc` is unusable
/// (logged).
///
/// # Errors
/// As [`hash_new`].
pub(crate) async fn verify_current(
    gate: &HashGate,
    user: &str,
    password: Password,
    phc: String,
) -> Result<bool, CheckError> {
    let admitted = gate
        .enter_caller(ApiCaller::User(user))
        .await
        .map_err(gate_error)?;
    let user = user.to_owned();
    compute(admitted, Pool::Shared, move || match verify_password_or_dummy(&password, Some(&phc)) {
        Ok(Verification::Valid { .. }) => true,
        Ok(Verification::Invalid) => false,
        Err(e) => {
            tracing::warn!(user = %user, error = %e, "the stored password hash is unusable; refusing the check");
            false
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = "correct horse battery staple";
    const NEW: &str = "a new passphrase of some length";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_computation_keeps_its_gate_place_after_its_request_is_dropped() {
        let gate = HashGate::new(1, 4);
        let phc = hash_password_random(&Password::new(OLD)).expect("hash");
        let asked = tokio::spawn({
            let gate = gate.clone();
            async move { verify_then_hash(&gate, "alice", Password::new(OLD), phc, Password::new(NEW)).await }
        });
        while gate.semaphore().available_permits() > 0 {
            tokio::task::yield_now().await;
        }
        // The request goes away (a client's deadline); the computation goes on, its place with it.
        asked.abort();
        assert!(asked.await.is_err());
        assert_eq!(
            gate.semaphore().available_permits(),
            0,
            "the permit left with the request"
        );
        assert_eq!(gate.places_of("alice"), 1);
        let next = hash_new(&gate, ApiCaller::User("carol"), Password::new(NEW))
            .await
            .expect("a hash once the computation has ended");
        assert!(next.starts_with("$argon2id$"));
        assert_eq!(gate.places_of("alice"), 0);
    }

    #[tokio::test]
    async fn a_password_change_hashes_the_new_password_only_over_the_right_old_one() {
        let gate = HashGate::new(1, 4);
        let phc = hash_password_random(&Password::new(OLD)).expect("hash");
        let wrong = verify_then_hash(
            &gate,
            "alice",
            Password::new(NEW),
            phc.clone(),
            Password::new(NEW),
        )
        .await;
        assert!(matches!(wrong, Ok(None)), "{wrong:?}");
        let changed = verify_then_hash(&gate, "alice", Password::new(OLD), phc, Password::new(NEW))
            .await
            .expect("check")
            .expect("the right old password");
        assert_eq!(
            ichor_renderers::auth::hash::verify_password(&Password::new(NEW), &changed),
            Ok(Verification::Valid { needs_rehash: false })
        );
    }

    #[test]
    fn a_new_hash_has_a_fresh_salt_and_verifies_its_password() {
        use ichor_renderers::auth::hash::verify_password;
        let password = Password::new("correct horse battery staple");
        let a = hash_password_random(&password).expect("hash");
        let b = hash_password_random(&password).expect("hash");
        assert!(a.starts_with("$argon2id$v=19$m=65536,t=3,p=4$"), "{a}");
        assert_ne!(a, b, "two salts were equal");
        assert_eq!(
            verify_password(&password, &a),
            Ok(Verification::Valid { needs_rehash: false })
        );
    }

    #[test]
    fn generates_24_characters_from_the_os_that_pass_the_policy() {
        use ichor_renderers::auth::policy::{GENERATED_PASSWORD_LEN, GENERATOR_ALPHABET, check_password};
        let a = generate_password().expect("a password");
        let b = generate_password().expect("a password");
        assert_eq!(a.expose().len(), GENERATED_PASSWORD_LEN);
        assert!(a.expose().bytes().all(|c| GENERATOR_ALPHABET.contains(&c)));
        assert_eq!(check_password(&a), Ok(()));
        assert_ne!(a.expose(), b.expose(), "two generated passwords were equal");
    }
}
