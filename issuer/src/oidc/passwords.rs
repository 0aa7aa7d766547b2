//! Password verification under the process-wide limit of [`super::HASH_PERMITS`] concurrent
//! argon2id computations, on tokio's blocking pool.

use std::sync::Arc;

use ichor_renderers::auth::{
    Password,
    hash::{Verification, hash_password_random, verify_dummy, verify_password_or_dummy},
};
use tokio::sync::Semaphore;

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
    /// The semaphore was closed or the blocking task failed.
    #[error("the password check could not run: {0}")]
    Internal(String),
}

/// Verifies `password` against `phc` (`None`: unknown user or no password set, verified against
/// the dummy hash), holding one hash permit for the whole computation, including a rehash. The
/// permit moves into the blocking task, so it is held until the computation really ends even if
/// the request is dropped.
pub(crate) async fn check(
    permits: &Arc<Semaphore>,
    user: &str,
    password: Password,
    phc: Option<String>,
) -> Result<Checked, CheckError> {
    let permit = Arc::clone(permits)
        .acquire_owned()
        .await
        .map_err(|e| CheckError::Internal(e.to_string()))?;
    let user = user.to_owned();
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
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
    .map_err(|e| CheckError::Internal(e.to_string()))
}
