//! The `UserService` calls that add a passkey (docs/mfa.md): `BeginPasskeyRegistration` over the
//! caller's current password, and `FinishPasskeyRegistration` with the authenticator's answer.
//!
//! Between the two calls the issuer keeps nothing: the relying party's registration state (the
//! challenge, the user handle, the caller's passkeys excluded) travels in a registration ticket
//! it signs ([`PasskeyEnrolClaims`]), bound to the caller and to the entry's `notBefore`, as the
//! authenticator app's enrolment ticket is. The answer is verified by `webauthn-rs`
//! ([`crate::passkeys`]); the passkey, and ten recovery codes when the caller has none, are
//! stored with one conditional write that also ends every session of the caller.
//!
//! A credential id is unique among one user's passkeys. It is not checked across users: a
//! sign-in names its user before the passkey step, the options list only that user's passkeys
//! and the answer is checked against the public key stored with them, so another user's copy of
//! an id proves nothing for this one.

use ichor_renderers::auth::credentials::AddPasskeyError;
use tonic::Request;

use super::factors::{CONCURRENT, no_password, required_password, ticket_unavailable};
use super::{Gate, UserApi};
use crate::{
    api::{
        access::AccessReview,
        auth::BearerVerifier,
        backend::UserBackend,
        error::ApiError,
        factors,
        proto::{
            BeginPasskeyRegistrationRequest, BeginPasskeyRegistrationResponse,
            FinishPasskeyRegistrationRequest, FinishPasskeyRegistrationResponse,
        },
    },
    oidc::limits::modify_own_credentials,
    passkeys::{RegistrationError, RelyingParty},
    store::Change,
    tokens::{self, PasskeyEnrolClaims, TOTP_ENROL_TTL, TokenError},
};

impl<B, A, V> UserApi<B, A, V>
where
    B: UserBackend,
    A: AccessReview,
    V: BearerVerifier,
{
    pub(super) async fn begin_passkey_registration_impl(
        &self,
        request: Request<BeginPasskeyRegistrationRequest>,
    ) -> Result<BeginPasskeyRegistrationResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::EnrolChange).await?;
        let source = self.source_of(&request);
        let req = request.into_inner();
        let password = required_password(req.password)?;
        let rp = self.relying_party()?;
        let entry = self.own_entry(&caller).await?;
        if entry.factors.passkeys.len() >= ichor_renderers::auth::credentials::MAX_PASSKEYS {
            return Err(ApiError::FailedPrecondition(AddPasskeyError::TooMany.to_string()));
        }
        let write = self.code_write(&caller, &entry)?;
        self.reverify(source, &caller, password, &entry).await?;
        self.use_code_if_protected(&caller, &entry, &req.code, write)
            .await?;
        let (options, state) = rp
            .begin_registration(&caller.name, &entry.factors.passkeys)
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        let options_json = serde_json::to_string(&options).map_err(|e| ApiError::Internal(e.to_string()))?;
        let now = self.inner.clock.now();
        let claims = PasskeyEnrolClaims {
            iss: self.inner.config.issuer_url.clone(),
            sub: caller.name.clone(),
            nb: entry.not_before.to_string(),
            state,
            iat: tokens::unix_seconds(now),
            exp: tokens::unix_seconds(now) + TOTP_ENROL_TTL.as_secs(),
        };
        let keys = self.signing_keys()?;
        let ticket = tokens::sign_artifact(&keys, &claims, now, now).map_err(ticket_unavailable)?;
        Ok(BeginPasskeyRegistrationResponse { options_json, ticket })
    }

    pub(super) async fn finish_passkey_registration_impl(
        &self,
        request: Request<FinishPasskeyRegistrationRequest>,
    ) -> Result<FinishPasskeyRegistrationResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::EnrolChange).await?;
        let req = request.into_inner();
        if req.ticket.is_empty() {
            return Err(ApiError::invalid(
                "ticket",
                "is required (the ticket of BeginPasskeyRegistration)",
            ));
        }
        if req.credential_json.is_empty() {
            return Err(ApiError::invalid(
                "credential_json",
                "is required (the browser's answer to navigator.credentials.create)",
            ));
        }
        let rp = self.relying_party()?;
        let _ = self.own_entry(&caller).await?;
        let now = self.inner.clock.now();
        let keys = self.signing_keys()?;
        let claims: PasskeyEnrolClaims =
            tokens::verify_artifact(&keys, &req.ticket, &self.inner.config.issuer_url, now)
                .map_err(bad_registration_ticket)?;
        if claims.sub != caller.name {
            return Err(ApiError::invalid(
                "ticket",
                "was not made for you: start again with BeginPasskeyRegistration",
            ));
        }
        let name = req.name.trim().to_owned();
        let passkey = rp
            .finish_registration(&claims.state, &req.credential_json, &name, now)
            .map_err(|e| match e {
                RegistrationError::Unstorable(_) => ApiError::Internal(e.to_string()),
                _ => ApiError::invalid("credential_json", e.to_string()),
            })?;
        let codes = factors::new_recovery_codes(now)?;
        let write = self.account_write(&caller.name)?;
        let (gave_codes, stored) =
            modify_own_credentials(self.inner.store.as_ref(), &caller.name, Some(write), |current| {
                let current = current.ok_or_else(|| no_password(&caller.name))?;
                // The ticket answers the entry it was made over: a password, reset or factor change
                // since (each moves notBefore) refuses it.
                if current.not_before.to_string() != claims.nb {
                    return Err(ApiError::invalid(
                        "ticket",
                        "is no longer valid: your password, second factors or sessions changed since it \
                     was made; start again with BeginPasskeyRegistration",
                    ));
                }
                let mut next = current
                    .revoke_all(now)
                    .add_passkey(passkey.clone())
                    .map_err(add_error)?;
                let give = factors::needs_recovery_codes(&current.factors);
                if give {
                    next.factors.recovery = Some(codes.stored.clone());
                }
                let stored = next.factors.clone();
                Ok(Change::Put(next, (give, stored)))
            })
            .await
            .map_err(|e| match e {
                ApiError::Conflict(_) => ApiError::Conflict(CONCURRENT.to_owned()),
                e => e,
            })?;
        self.forget(&caller.name);
        tracing::info!(
            user = %caller.name,
            passkey = %passkey.id,
            synced = passkey.backup_eligible,
            recovery_codes = gave_codes,
            "passkey added"
        );
        Ok(FinishPasskeyRegistrationResponse {
            recovery_codes: if gave_codes { codes.codes } else { Vec::new() },
            factors: Some(factors::message(&stored)),
        })
    }

    /// This issuer's relying party, or the refusal of an issuer whose URL names an IP address.
    fn relying_party(&self) -> Result<&RelyingParty, ApiError> {
        self.inner.relying_party.as_ref().ok_or_else(|| {
            ApiError::FailedPrecondition(format!(
                "passkeys need the issuer to be reached by a domain name, and its URL {} names an \
                 IP address: use an authenticator app, or serve Ichor under a DNS name",
                self.inner.config.issuer_url
            ))
        })
    }
}

/// A refused registration ticket, naming the field (never echoing the ticket).
fn bad_registration_ticket(e: TokenError) -> ApiError {
    match e {
        TokenError::Expired => {
            ApiError::invalid("ticket", "has expired: start again with BeginPasskeyRegistration")
        }
        _ => ApiError::invalid(
            "ticket",
            "is not a valid registration ticket of this issuer: start again with BeginPasskeyRegistration",
        ),
    }
}

/// Why the passkey cannot be added, naming the request's field.
fn add_error(e: AddPasskeyError) -> ApiError {
    match e {
        AddPasskeyError::TooMany | AddPasskeyError::Duplicate => ApiError::FailedPrecondition(e.to_string()),
        AddPasskeyError::Invalid { field, problem } if field.ends_with(".name") => {
            ApiError::invalid("name", problem)
        }
        AddPasskeyError::Invalid { field, problem } => {
            ApiError::invalid("credential_json", format!("{field} {problem}"))
        }
    }
}
