//! The `UserService` calls on passwords and sessions: `SetPassword` (an administrator's, given
//! or generated, and with `reset_factors` the removal of every second factor of the user),
//! `ChangeOwnPassword` (the caller's, over the verified old one and, when the caller has an
//! authenticator app or a passkey, a typed code of a factor) and `RevokeSessions`.
//!
//! `SetPassword` and `RevokeSessions` act on another user, so besides RBAC an Ichor caller must
//! be able to grant every role of that user (`check_act_on`): an operator allowed to manage
//! users still may not take over, or log out, an admin.

use ichor_renderers::auth::{
    Password,
    credentials::CredentialsEntry,
    roles::{UserAct, check_act_on},
};
use tonic::Request;

use super::{
    Gate, UserApi,
    factors::{required_code, with_code_used},
};
use crate::{
    api::{
        access::{self, AccessReview},
        auth::BearerVerifier,
        backend::UserBackend,
        error::ApiError,
        factors::has_real_factor,
        proto::{
            ChangeOwnPasswordRequest, ChangeOwnPasswordResponse, RevokeSessionsRequest,
            RevokeSessionsResponse, SetPasswordRequest, SetPasswordResponse,
            set_password_request::NewPassword,
        },
        validate,
    },
    oidc::{limits::modify_own_credentials, passwords::generate_password},
    store::{Change, modify_credentials},
};

impl<B, A, V> UserApi<B, A, V>
where
    B: UserBackend,
    A: AccessReview,
    V: BearerVerifier,
{
    pub(super) async fn set_password_impl(
        &self,
        request: Request<SetPasswordRequest>,
    ) -> Result<SetPasswordResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::Change).await?;
        let req = request.into_inner();
        let name = validate::user_name("name", &req.name)?;
        let reset = req.reset_factors;
        let (password, generated) = match req.new_password {
            Some(NewPassword::Password(p)) => {
                let p = Password::new(p);
                validate::new_password("password", &p)?;
                (Some(p), false)
            }
            Some(NewPassword::Generate(true)) => (Some(generated_password()?), true),
            // A factor reset alone keeps the password.
            Some(NewPassword::Generate(false)) | None if reset => (None, false),
            Some(NewPassword::Generate(false)) | None => {
                return Err(ApiError::invalid(
                    "new_password",
                    "give a password or set generate: true",
                ));
            }
        };
        self.require(
            &caller,
            &[
                access::ichorusers("update", name.as_str()),
                access::password(name.as_str()),
            ],
        )
        .await?;
        if reset && caller.external.is_none() && caller.name == name.as_str() {
            // A token alone must not strip its own user's second factors: removing one's own
            // factor asks for the password (RemoveFactor).
            return Err(ApiError::Denied(
                "reset_factors: you may not reset your own second factors; remove one with RemoveFactor, \
                 which asks for your password, or ask another administrator"
                    .to_owned(),
            ));
        }
        if password.is_some() && caller.external.is_none() && caller.name == name.as_str() {
            // A token alone must not replace its own user's password either (the owner would be
            // locked out): one's own password changes over the current one and, with a second
            // factor, a code of it (ChangeOwnPassword).
            return Err(ApiError::Denied(
                "new_password: you may not set your own password with SetPassword; change it with                  ChangeOwnPassword (the account page), which asks for your current password, or ask                  another administrator"
                    .to_owned(),
            ));
        }
        let target = self.existing_user(name.as_str()).await?;
        // Like the grant rule, this limits Ichor's own users; RBAC is an external caller's gate.
        if caller.external.is_none() {
            if password.is_some() {
                check_act_on(&caller.roles, UserAct::SetPassword, name.as_str(), &target.roles)?;
            }
            if reset {
                check_act_on(&caller.roles, UserAct::ResetFactors, name.as_str(), &target.roles)?;
            }
        }
        let generated_password = match (&password, generated) {
            (Some(p), true) => p.expose().to_owned(),
            _ => String::new(),
        };
        let hash = match password {
            Some(p) => Some(self.hash(&caller, p).await?),
            None => None,
        };
        let now = self.inner.clock.now();
        // One write: the new password (if any) and, with `reset_factors`, no factor and no
        // session, so no sign-in or refresh from before survives it.
        let had_entry = modify_credentials(self.inner.store.as_ref(), name.as_str(), |current| {
            let had_entry = current.is_some();
            let entry = match (current, &hash) {
                (Some(current), Some(hash)) => current.with_new_password(hash.clone(), now, true),
                (None, Some(hash)) => CredentialsEntry::new(hash.clone(), now, true),
                (Some(current), None) => current.clone(),
                (None, None) => return Err(no_entry_to_reset(name.as_str())),
            };
            let entry = if reset {
                entry.with_factors_reset(now)
            } else {
                entry
            };
            Ok::<_, ApiError>(Change::Put(entry, had_entry))
        })
        .await?;
        self.forget(name.as_str());
        if reset && had_entry {
            tracing::info!(admin = %caller.name, user = %name, "factors reset");
        }
        Ok(SetPasswordResponse { generated_password })
    }

    pub(super) async fn change_own_password_impl(
        &self,
        request: Request<ChangeOwnPasswordRequest>,
    ) -> Result<ChangeOwnPasswordResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::AllowMustChange).await?;
        let source = self.source_of(&request);
        let req = request.into_inner();
        let old = Password::new(req.old_password);
        let new = Password::new(req.new_password);
        if old.len_bytes() == 0 {
            return Err(ApiError::invalid("old_password", "is required"));
        }
        validate::new_password("new_password", &new)?;
        if caller.external.is_some() {
            return Err(ApiError::FailedPrecondition(
                "you signed in with your identity provider: Ichor holds no password of yours; change it there"
                    .to_owned(),
            ));
        }
        let (entry, _) = self.inner.store.read_credentials(&caller.name).await?;
        let entry = entry.ok_or_else(|| {
            ApiError::FailedPrecondition(format!("user {:?} has no password to change", caller.name))
        })?;
        let verified_hash = entry.hash.clone();
        // A caller with a factor confirms the change with a code of it too, as a change of its
        // factors does: a stolen session and password do not lock the owner out.
        if has_real_factor(&entry.factors) {
            required_code(&req.code)?;
        }
        // Taken before the check, so a spent budget costs no argon2id; given back on failure.
        let write = self.account_write(&caller.name)?;
        // A sign-in attempt in all but name: the back-off and the source's failures apply.
        let Some(hash) = self
            .change_password(source, &caller.name, old, verified_hash.clone(), new)
            .await?
        else {
            return Err(ApiError::invalid(
                "old_password",
                "does not match your current password",
            ));
        };
        let now = self.inner.clock.now();
        modify_own_credentials(
            self.inner.store.as_ref(),
            &caller.name,
            Some(write),
            |current| match current {
                // Only over the password that was verified: a concurrent change wins.
                Some(current) if current.hash == verified_hash => {
                    password_change(current, &req.code, hash.clone(), now)
                }
                _ => Err(ApiError::Conflict(
                    "the password was changed concurrently: sign in again and retry".to_owned(),
                )),
            },
        )
        .await??;
        self.forget(&caller.name);
        Ok(ChangeOwnPasswordResponse {})
    }

    pub(super) async fn revoke_sessions_impl(
        &self,
        request: Request<RevokeSessionsRequest>,
    ) -> Result<RevokeSessionsResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::Change).await?;
        let name = validate::user_name("name", &request.get_ref().name)?;
        self.require(
            &caller,
            &[
                access::ichorusers("update", name.as_str()),
                access::password(name.as_str()),
            ],
        )
        .await?;
        let target = self.existing_user(name.as_str()).await?;
        if caller.external.is_none() {
            check_act_on(
                &caller.roles,
                UserAct::RevokeSessions,
                name.as_str(),
                &target.roles,
            )?;
        }
        self.end_sessions(name.as_str()).await?;
        Ok(RevokeSessionsResponse {})
    }

    /// Ends every session of `name`: `notBefore` moves to now (ID tokens issued before it are
    /// refused by the API) and every refresh family is dropped. Nothing to do without an entry.
    pub(super) async fn end_sessions(&self, name: &str) -> Result<(), ApiError> {
        let now = self.inner.clock.now();
        modify_credentials(self.inner.store.as_ref(), name, |current| {
            Ok::<_, ApiError>(match current {
                Some(current) => Change::Put(current.revoke_all(now), ()),
                None => Change::Keep(()),
            })
        })
        .await?;
        self.forget(name);
        Ok(())
    }
}

/// The write of a password change over `current`, the entry holding the verified password: the
/// new `hash`, with the typed `code` used in the same write when the entry has an authenticator
/// app or a passkey (judged on the entry written, so a factor added since the first read still
/// asks for its code). A refused code writes only its failure; a code held by the back-off
/// writes nothing. Without such a factor the code is not looked at.
fn password_change(
    current: &CredentialsEntry,
    code: &str,
    hash: String,
    now: jiff::Timestamp,
) -> Result<Change<Result<(), ApiError>>, ApiError> {
    if !has_real_factor(&current.factors) {
        return Ok(Change::Put(current.with_new_password(hash, now, false), Ok(())));
    }
    let code = required_code(code)?;
    with_code_used(current, code, now, |used| {
        Ok((used.with_new_password(hash, now, false), ()))
    })
}

/// The refusal of a factor reset of a user without a credentials entry.
fn no_entry_to_reset(name: &str) -> ApiError {
    ApiError::FailedPrecondition(format!(
        "user {name:?} has no password set, so it has no second factors to reset; set a password instead"
    ))
}

pub(super) fn generated_password() -> Result<Password, ApiError> {
    generate_password().map_err(|e| ApiError::Unavailable(e.to_string()))
}
