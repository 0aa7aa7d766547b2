//! The `UserService` calls on second factors (docs/mfa.md, "API, CLI, UI"): the caller's own
//! (`ListOwnFactors`, `BeginTotp`, `ConfirmTotp`, `RegenerateRecoveryCodes`, `RemoveFactor`) and
//! an administrator's view of a user's (`GetUserFactors`; the reset is `SetPassword` with
//! `reset_factors`, in `passwords`).
//!
//! Every change of one's own factors asks for the current password again, checked as a sign-in
//! attempt (the back-off and failure buckets of `ChangeOwnPassword`), or, for `ConfirmTotp`,
//! presents the enrolment ticket such a check produced. Each change is one conditional write of
//! the credentials entry over the password that was verified and, as a password change does,
//! ends every session of the caller (`notBefore` = now, every refresh family dropped), so a
//! session started before the change, by whoever, does not outlive it.
//!
//! Secrets leave the service only where they are meant to: `BeginTotp`'s secret, URI and
//! ticket, and the recovery codes of `ConfirmTotp` and `RegenerateRecoveryCodes`, once. None is
//! logged.

use std::net::IpAddr;

use ichor_renderers::auth::{
    Password,
    credentials::{CredentialsEntry, FactorAttempt, TotpFactor},
    totp,
};
use tonic::Request;

use super::{Gate, UserApi};
use crate::{
    api::{
        access::{self, AccessReview},
        auth::{BearerVerifier, Caller},
        backend::UserBackend,
        error::ApiError,
        factors::{self, Removal, TOTP_ISSUER_LABEL},
        proto::{
            BeginTotpRequest, BeginTotpResponse, ConfirmTotpRequest, ConfirmTotpResponse,
            GetUserFactorsRequest, GetUserFactorsResponse, ListOwnFactorsRequest, ListOwnFactorsResponse,
            RegenerateRecoveryCodesRequest, RegenerateRecoveryCodesResponse, RemoveFactorRequest,
            RemoveFactorResponse,
        },
        validate,
    },
    oidc::limits::{AccountWrite, modify_own_credentials},
    store::Change,
    tokens::{self, TOTP_ENROL_TTL, TokenError, TotpEnrolClaims},
};

/// The refusal of an own-factor call by a person of the external provider.
pub(super) const EXTERNAL: &str = "you signed in with your identity provider: Ichor holds no password or second factor of yours; manage them there";

/// The refusal of a write whose verified password changed meanwhile.
pub(super) const CONCURRENT: &str =
    "your password or second factors were changed concurrently: sign in again and retry";

impl<B, A, V> UserApi<B, A, V>
where
    B: UserBackend,
    A: AccessReview,
    V: BearerVerifier,
{
    pub(super) async fn list_own_factors_impl(
        &self,
        request: Request<ListOwnFactorsRequest>,
    ) -> Result<ListOwnFactorsResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::EnrolRead).await?;
        let entry = self.own_entry(&caller).await?;
        Ok(ListOwnFactorsResponse {
            factors: Some(factors::message(&entry.factors)),
        })
    }

    pub(super) async fn begin_totp_impl(
        &self,
        request: Request<BeginTotpRequest>,
    ) -> Result<BeginTotpResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::EnrolChange).await?;
        let source = self.source_of(&request);
        let req = request.into_inner();
        let password = required_password(req.password)?;
        let entry = self.own_entry(&caller).await?;
        if entry.factors.totp.is_some() {
            return Err(totp_exists());
        }
        let write = self.code_write(&caller, &entry)?;
        self.reverify(source, &caller, password, &entry).await?;
        self.use_code_if_protected(&caller, &entry, &req.code, write)
            .await?;
        let secret = factors::new_totp_secret()?;
        let otpauth_uri = totp::otpauth_uri(TOTP_ISSUER_LABEL, &caller.name, &secret)
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        let now = self.inner.clock.now();
        let claims = TotpEnrolClaims {
            iss: self.inner.config.issuer_url.clone(),
            sub: caller.name.clone(),
            nb: entry.not_before.to_string(),
            secret: secret.clone(),
            iat: tokens::unix_seconds(now),
            exp: tokens::unix_seconds(now) + TOTP_ENROL_TTL.as_secs(),
        };
        let keys = self.signing_keys()?;
        let ticket = tokens::sign_artifact(&keys, &claims, now, now).map_err(ticket_unavailable)?;
        Ok(BeginTotpResponse {
            secret,
            otpauth_uri,
            ticket,
        })
    }

    pub(super) async fn confirm_totp_impl(
        &self,
        request: Request<ConfirmTotpRequest>,
    ) -> Result<ConfirmTotpResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::EnrolChange).await?;
        let req = request.into_inner();
        if req.ticket.is_empty() {
            return Err(ApiError::invalid(
                "ticket",
                "is required (the ticket of BeginTotp)",
            ));
        }
        if req.code.is_empty() {
            return Err(ApiError::invalid(
                "code",
                "is required (the code the app shows now)",
            ));
        }
        if caller.external.is_some() {
            return Err(ApiError::FailedPrecondition(EXTERNAL.to_owned()));
        }
        let now = self.inner.clock.now();
        let keys = self.signing_keys()?;
        let claims: TotpEnrolClaims =
            tokens::verify_artifact(&keys, &req.ticket, &self.inner.config.issuer_url, now)
                .map_err(bad_ticket)?;
        if claims.sub != caller.name {
            return Err(ApiError::invalid(
                "ticket",
                "was not made for you: start again with BeginTotp",
            ));
        }
        let step = totp::verify(&claims.secret, &req.code, now, 0).map_err(|e| match e {
            totp::TotpError::InvalidSecret => {
                ApiError::invalid("ticket", "holds no usable secret: start again")
            }
            totp::TotpError::ClockBeforeEpoch => ApiError::Internal(e.to_string()),
            _ => ApiError::invalid(
                "code",
                "is not the authenticator app's current code: check that the secret was entered \
                 as shown and that the device's clock is right, then type the code shown now",
            ),
        })?;
        let codes = factors::new_recovery_codes(now)?;
        let secret = claims.secret;
        let write = self.account_write(&caller.name)?;
        let gave_codes =
            modify_own_credentials(self.inner.store.as_ref(), &caller.name, Some(write), |current| {
                let current = current.ok_or_else(|| no_password(&caller.name))?;
                // The ticket answers the entry it was made over: any password, reset or factor
                // change since (each moves notBefore) refuses it.
                if current.not_before.to_string() != claims.nb {
                    return Err(ApiError::invalid(
                        "ticket",
                        "is no longer valid: your password, second factors or sessions changed since it \
                     was made; start again with BeginTotp",
                    ));
                }
                if current.factors.totp.is_some() {
                    return Err(totp_exists());
                }
                let mut next = current.revoke_all(now);
                next.factors.totp = Some(TotpFactor {
                    secret: secret.clone(),
                    created_at: now,
                    last_step: step,
                });
                let give = factors::needs_recovery_codes(&current.factors);
                if give {
                    next.factors.recovery = Some(codes.stored.clone());
                }
                Ok(Change::Put(next, give))
            })
            .await?;
        self.forget(&caller.name);
        tracing::info!(user = %caller.name, recovery_codes = gave_codes, "authenticator app added");
        Ok(ConfirmTotpResponse {
            recovery_codes: if gave_codes { codes.codes } else { Vec::new() },
        })
    }

    pub(super) async fn regenerate_recovery_codes_impl(
        &self,
        request: Request<RegenerateRecoveryCodesRequest>,
    ) -> Result<RegenerateRecoveryCodesResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::Change).await?;
        let source = self.source_of(&request);
        let req = request.into_inner();
        let password = required_password(req.password)?;
        let entry = self.own_entry(&caller).await?;
        if !factors::has_real_factor(&entry.factors) {
            return Err(no_real_factor());
        }
        let code = required_code(&req.code)?;
        let write = self.account_write(&caller.name)?;
        self.reverify(source, &caller, password, &entry).await?;
        let now = self.inner.clock.now();
        let codes = factors::new_recovery_codes(now)?;
        modify_own_credentials(
            self.inner.store.as_ref(),
            &caller.name,
            Some(write),
            |current| match current {
                // Unchanged since the read: the same password and the same codes (two regenerations
                // at once: the second is refused, not shown codes the first replaced).
                Some(current)
                    if current.hash == entry.hash && current.factors.recovery == entry.factors.recovery =>
                {
                    if !factors::has_real_factor(&current.factors) {
                        return Err(no_real_factor());
                    }
                    with_code_used(current, code, now, |used| {
                        let mut next = used.revoke_all(now);
                        next.factors.recovery = Some(codes.stored.clone());
                        Ok((next, ()))
                    })
                }
                _ => Err(ApiError::Conflict(CONCURRENT.to_owned())),
            },
        )
        .await??;
        self.forget(&caller.name);
        tracing::info!(user = %caller.name, "recovery codes made anew");
        Ok(RegenerateRecoveryCodesResponse {
            recovery_codes: codes.codes,
        })
    }

    pub(super) async fn remove_factor_impl(
        &self,
        request: Request<RemoveFactorRequest>,
    ) -> Result<RemoveFactorResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::Change).await?;
        let source = self.source_of(&request);
        let req = request.into_inner();
        let password = required_password(req.password)?;
        let removal = Removal::of_request(req.kind, &req.passkey_id)?;
        let entry = self.own_entry(&caller).await?;
        factors::without(&entry.factors, removal)?;
        let code = required_code(&req.code)?;
        let write = self.account_write(&caller.name)?;
        self.reverify(source, &caller, password, &entry).await?;
        let now = self.inner.clock.now();
        let left = modify_own_credentials(self.inner.store.as_ref(), &caller.name, Some(write), |current| {
            match current {
                Some(current) if current.hash == entry.hash => {
                    factors::without(&current.factors, removal)?;
                    with_code_used(current, code, now, |used| {
                        let left = factors::without(&used.factors, removal)?;
                        let mut next = used.revoke_all(now);
                        next.factors = left.clone();
                        Ok((next, left))
                    })
                }
                _ => Err(ApiError::Conflict(CONCURRENT.to_owned())),
            }
        })
        .await??;
        self.forget(&caller.name);
        tracing::info!(user = %caller.name, factor = removal_kind(removal), "second factor removed");
        Ok(RemoveFactorResponse {
            factors: Some(factors::message(&left)),
        })
    }

    pub(super) async fn get_user_factors_impl(
        &self,
        request: Request<GetUserFactorsRequest>,
    ) -> Result<GetUserFactorsResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::Normal).await?;
        let name = validate::user_name("name", &request.get_ref().name)?;
        self.require(&caller, &[access::ichorusers("get", name.as_str())])
            .await?;
        // Unknown: answered as GetUser answers it.
        self.inner
            .store
            .get_user(name.as_str())
            .await?
            .ok_or_else(|| ApiError::NotFound(name.to_string()))?;
        let (entry, _) = self.inner.store.read_credentials(name.as_str()).await?;
        let factors = entry.map(|e| e.factors).unwrap_or_default();
        Ok(GetUserFactorsResponse {
            factors: Some(factors::message(&factors)),
        })
    }

    /// The caller's own credentials entry (refused for an external caller, or without one).
    pub(super) async fn own_entry(&self, caller: &Caller) -> Result<CredentialsEntry, ApiError> {
        if caller.external.is_some() {
            return Err(ApiError::FailedPrecondition(EXTERNAL.to_owned()));
        }
        let (entry, _) = self.inner.store.read_credentials(&caller.name).await?;
        entry.ok_or_else(|| no_password(&caller.name))
    }

    /// Checks the caller's current `password` against `entry` as a sign-in attempt from
    /// `source`; refused, naming the field, when it is wrong.
    pub(super) async fn reverify(
        &self,
        source: IpAddr,
        caller: &Caller,
        password: Password,
        entry: &CredentialsEntry,
    ) -> Result<(), ApiError> {
        if self
            .reauthenticate(source, &caller.name, password, entry.hash.clone())
            .await?
        {
            Ok(())
        } else {
            Err(ApiError::invalid(
                "password",
                "does not match your current password",
            ))
        }
    }

    /// The change [`Self::use_code_if_protected`] will write for `entry`, taken from the
    /// caller's budget before its password is checked; `None` when the caller has no factor
    /// (nothing is written then).
    pub(super) fn code_write(
        &self,
        caller: &Caller,
        entry: &CredentialsEntry,
    ) -> Result<Option<AccountWrite>, ApiError> {
        if factors::has_real_factor(&entry.factors) {
            self.account_write(&caller.name).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Uses up the typed `code` of a factor when the caller has one (an authenticator app or a
    /// passkey): adding a factor to a protected account takes the password and a factor, as
    /// removing one does, so a stolen session and password cannot add the thief's own. Counted
    /// and backed off like a sign-in's second step; nothing else is written. The write spends
    /// `write`, the change [`Self::code_write`] took.
    pub(super) async fn use_code_if_protected(
        &self,
        caller: &Caller,
        entry: &CredentialsEntry,
        code: &str,
        write: Option<AccountWrite>,
    ) -> Result<(), ApiError> {
        if !factors::has_real_factor(&entry.factors) {
            return Ok(());
        }
        let code = required_code(code)?;
        let now = self.inner.clock.now();
        modify_own_credentials(
            self.inner.store.as_ref(),
            &caller.name,
            write,
            |current| match current {
                Some(current) if current.hash == entry.hash => {
                    with_code_used(current, code, now, |used| Ok((used, ())))
                }
                _ => Err(ApiError::Conflict(CONCURRENT.to_owned())),
            },
        )
        .await?
    }

    /// The keys enrolment tickets are signed and checked with (the issuer's).
    pub(super) fn signing_keys(&self) -> Result<std::sync::Arc<crate::keys::LoadedKeys>, ApiError> {
        self.inner
            .config
            .keys
            .load()
            .ok_or_else(|| ticket_unavailable(TokenError::NoSigningKey))
    }
}

/// The current password of a request, required.
pub(super) fn required_password(password: String) -> Result<Password, ApiError> {
    let password = Password::new(password);
    if password.len_bytes() == 0 {
        return Err(ApiError::invalid(
            "password",
            "is required: your current password confirms the change",
        ));
    }
    Ok(password)
}

fn totp_exists() -> ApiError {
    ApiError::FailedPrecondition(
        "you have an authenticator app already: remove it first (RemoveFactor, kind totp) to add another"
            .to_owned(),
    )
}

fn no_real_factor() -> ApiError {
    ApiError::FailedPrecondition(
        "recovery codes stand beside an authenticator app or a passkey: add one first, and its \
         recovery codes come with it"
            .to_owned(),
    )
}

pub(super) fn no_password(name: &str) -> ApiError {
    ApiError::FailedPrecondition(format!(
        "user {name:?} has no password, so it has no second factors: ask an administrator to set a password"
    ))
}

pub(super) fn ticket_unavailable(e: TokenError) -> ApiError {
    ApiError::Unavailable(format!("no enrolment ticket can be signed now: {e}"))
}

/// A refused enrolment ticket, naming the field (never echoing the ticket).
fn bad_ticket(e: TokenError) -> ApiError {
    match e {
        TokenError::Expired => ApiError::invalid("ticket", "has expired: start again with BeginTotp"),
        _ => ApiError::invalid(
            "ticket",
            "is not a valid enrolment ticket of this issuer: start again with BeginTotp",
        ),
    }
}

fn removal_kind(removal: Removal<'_>) -> &'static str {
    match removal {
        Removal::Totp => "totp",
        Removal::Recovery => "recovery",
        Removal::Passkey(_) => "passkey",
    }
}

/// The `code` field of a change over a factor (of the factors, or of the password of a caller
/// who has one): required, and bounded like the sign-in's.
pub(super) fn required_code(code: &str) -> Result<&str, ApiError> {
    if code.trim().is_empty() {
        return Err(ApiError::invalid(
            "code",
            "required: a current code of your authenticator app or an unused recovery code (the password \
             alone does not change your second factors or your password)",
        ));
    }
    if code.len() > MAX_CODE_BYTES {
        return Err(ApiError::invalid("code", "is not a code"));
    }
    Ok(code)
}

/// The longest code field looked at.
const MAX_CODE_BYTES: usize = 64;

/// The change of a conditional write that needs the typed `code` of a factor: with the code
/// used (the TOTP step or the recovery digest recorded, the failures cleared), `change` makes
/// the entry to write and the value; a refused code writes the entry that counts it, and a code
/// held by the back-off writes nothing. The same rule, counter and back-off as the sign-in's
/// second step ([`CredentialsEntry::attempt_typed_factor`]).
pub(super) fn with_code_used<T>(
    current: &CredentialsEntry,
    code: &str,
    now: jiff::Timestamp,
    change: impl FnOnce(CredentialsEntry) -> Result<(CredentialsEntry, T), ApiError>,
) -> Result<Change<Result<T, ApiError>>, ApiError> {
    Ok(match current.attempt_typed_factor(code, now) {
        FactorAttempt::Accepted { entry, .. } => {
            let (next, value) = change(entry)?;
            Change::Put(next, Ok(value))
        }
        FactorAttempt::Refused { entry, .. } => Change::Put(
            entry,
            Err(ApiError::invalid("code", "is incorrect or was used already")),
        ),
        FactorAttempt::Wait { retry_after } => Change::Keep(Err(ApiError::FailedPrecondition(format!(
            "code: too many wrong codes; wait {} seconds and try again",
            retry_after.as_secs().max(1)
        )))),
    })
}
