//! The generated `ichor.v1alpha1` protobuf messages, the `UserService` server trait and its
//! client, from `proto/ichor/v1alpha1/user.proto`.
//!
//! Messages that carry a password or a second-factor secret (an authenticator-app secret, its
//! URI or enrolment ticket, a code, recovery codes) have a hand-written `Debug` that prints
//! none of it, so a request or a response can never leak one into a log line.
#![allow(missing_docs, clippy::all, clippy::pedantic, clippy::unwrap_used)]

use std::fmt;

tonic::include_proto!("ichor.v1alpha1");

const REDACTED: &str = "<redacted>";

impl fmt::Debug for CreateUserRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let initial = match &self.initial_password {
            None => "none",
            Some(create_user_request::InitialPassword::Password(_)) => REDACTED,
            Some(create_user_request::InitialPassword::GeneratePassword(_)) => "generate",
        };
        f.debug_struct("CreateUserRequest")
            .field("name", &self.name)
            .field("display_name", &self.display_name)
            .field("email", &self.email)
            .field("roles", &self.roles)
            .field("disabled", &self.disabled)
            .field("initial_password", &initial)
            .finish()
    }
}

impl fmt::Debug for CreateUserResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CreateUserResponse")
            .field("user", &self.user)
            .field("generated_password", &REDACTED)
            .finish()
    }
}

impl fmt::Debug for SetPasswordRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let new = match &self.new_password {
            None => "none",
            Some(set_password_request::NewPassword::Password(_)) => REDACTED,
            Some(set_password_request::NewPassword::Generate(_)) => "generate",
        };
        f.debug_struct("SetPasswordRequest")
            .field("name", &self.name)
            .field("new_password", &new)
            .field("reset_factors", &self.reset_factors)
            .finish()
    }
}

impl fmt::Debug for SetPasswordResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SetPasswordResponse")
            .field("generated_password", &REDACTED)
            .finish()
    }
}

impl fmt::Debug for ChangeOwnPasswordRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChangeOwnPasswordRequest")
            .field("old_password", &REDACTED)
            .field("new_password", &REDACTED)
            .field("code", &REDACTED)
            .finish()
    }
}

impl fmt::Debug for BeginTotpRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BeginTotpRequest")
            .field("password", &REDACTED)
            .field("code", &REDACTED)
            .finish()
    }
}

impl fmt::Debug for BeginPasskeyRegistrationRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BeginPasskeyRegistrationRequest")
            .field("password", &REDACTED)
            .field("code", &REDACTED)
            .finish()
    }
}

impl fmt::Debug for BeginPasskeyRegistrationResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BeginPasskeyRegistrationResponse")
            .field(
                "options_json",
                &format_args!("<{} bytes>", self.options_json.len()),
            )
            .field("ticket", &REDACTED)
            .finish()
    }
}

impl fmt::Debug for FinishPasskeyRegistrationRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FinishPasskeyRegistrationRequest")
            .field("ticket", &REDACTED)
            .field("name", &self.name)
            .field(
                "credential_json",
                &format_args!("<{} bytes>", self.credential_json.len()),
            )
            .finish()
    }
}

impl fmt::Debug for FinishPasskeyRegistrationResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FinishPasskeyRegistrationResponse")
            .field(
                "recovery_codes",
                &format_args!("<{} redacted>", self.recovery_codes.len()),
            )
            .field("factors", &self.factors)
            .finish()
    }
}

impl fmt::Debug for BeginTotpResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BeginTotpResponse")
            .field("secret", &REDACTED)
            .field("otpauth_uri", &REDACTED)
            .field("ticket", &REDACTED)
            .finish()
    }
}

impl fmt::Debug for ConfirmTotpRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfirmTotpRequest")
            .field("ticket", &REDACTED)
            .field("code", &REDACTED)
            .finish()
    }
}

impl fmt::Debug for ConfirmTotpResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfirmTotpResponse")
            .field(
                "recovery_codes",
                &format_args!("<{} redacted>", self.recovery_codes.len()),
            )
            .finish()
    }
}

impl fmt::Debug for RegenerateRecoveryCodesRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegenerateRecoveryCodesRequest")
            .field("password", &REDACTED)
            .field("code", &REDACTED)
            .finish()
    }
}

impl fmt::Debug for RegenerateRecoveryCodesResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegenerateRecoveryCodesResponse")
            .field(
                "recovery_codes",
                &format_args!("<{} redacted>", self.recovery_codes.len()),
            )
            .finish()
    }
}

impl fmt::Debug for RemoveFactorRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoveFactorRequest")
            .field("password", &REDACTED)
            .field("kind", &self.kind)
            .field("passkey_id", &self.passkey_id)
            .field("code", &REDACTED)
            .finish()
    }
}
