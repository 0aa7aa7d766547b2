//! [`ApiError`]: every refusal of the `UserService`, as a sentence naming the field or the
//! right, and its gRPC status code.

use ichor_renderers::auth::roles::{ActRefusal, GrantRefusal, LastAdminRefusal};
use tonic::{Code, Status};

use crate::store::StoreError;

/// The message of the must-change refusal (the SPA matches on it).
pub const CHANGE_PASSWORD_FIRST: &str = "change your password first";

/// Why a call was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No usable bearer token, or the token's user cannot act (unknown, disabled, revoked).
    #[error("{0}")]
    Unauthenticated(String),
    /// The caller's password must be changed before anything but `WhoAmI` and
    /// `ChangeOwnPassword`.
    #[error("change your password first")]
    MustChangePassword,
    /// RBAC does not allow the call.
    #[error("{user} may not {verb} {resource}{on}: ask an administrator for a role that allows it")]
    Forbidden {
        /// `ichor:<name>`.
        user: String,
        /// The verb asked for.
        verb: String,
        /// `resource` or `resource/subresource`.
        resource: String,
        /// ` "<name>"` when about one object, else empty.
        on: String,
    },
    /// The Kubernetes API refused a write made as the caller (RBAC, or the admission webhook's
    /// grant and last-admin rules): its message, passed through bounded.
    #[error("{0}")]
    Denied(String),
    /// The grant rule refused a role.
    #[error(transparent)]
    Grant(#[from] GrantRefusal),
    /// The caller may not act on this user (set its password, end its sessions, re-enable it):
    /// it could not grant one of the user's roles.
    #[error(transparent)]
    ActOn(#[from] ActRefusal),
    /// The last-enabled-admin rule refused the change.
    #[error(transparent)]
    LastAdmin(#[from] LastAdminRefusal),
    /// A request field is missing or invalid.
    #[error("{field}: {reason}")]
    InvalidArgument {
        /// The request field (`roles[2]` for an entry of a list).
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The user does not exist.
    #[error("user {0:?} does not exist")]
    NotFound(String),
    /// The user exists already.
    #[error("user {0:?} exists already")]
    AlreadyExists(String),
    /// The stored state does not allow the call (for example a user file shared with other
    /// objects, or a kubeconfig asked for with no cluster configured).
    #[error("{0}")]
    FailedPrecondition(String),
    /// A concurrent write won; the call may be repeated.
    #[error("{0}")]
    Conflict(String),
    /// The credentials store is full (no retry helps until an administrator makes room), or a
    /// limit holds the caller back for the time its message says.
    #[error("{0}")]
    ResourceExhausted(String),
    /// A backend (store, access review) is unreachable; try again later.
    #[error("{0}")]
    Unavailable(String),
    /// Something that should not happen (never carries secret material).
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// An invalid request field.
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::InvalidArgument {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The gRPC status code of this error.
    pub fn code(&self) -> Code {
        match self {
            ApiError::Unauthenticated(_) => Code::Unauthenticated,
            ApiError::MustChangePassword
            | ApiError::Forbidden { .. }
            | ApiError::Denied(_)
            | ApiError::Grant(_)
            | ApiError::ActOn(_) => Code::PermissionDenied,
            ApiError::LastAdmin(_) | ApiError::FailedPrecondition(_) => Code::FailedPrecondition,
            ApiError::InvalidArgument { .. } => Code::InvalidArgument,
            ApiError::NotFound(_) => Code::NotFound,
            ApiError::AlreadyExists(_) => Code::AlreadyExists,
            ApiError::Conflict(_) => Code::Aborted,
            ApiError::ResourceExhausted(_) => Code::ResourceExhausted,
            ApiError::Unavailable(_) => Code::Unavailable,
            ApiError::Internal(_) => Code::Internal,
        }
    }
}

impl From<ApiError> for Status {
    fn from(error: ApiError) -> Self {
        Status::new(error.code(), error.to_string())
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(_) | StoreError::Busy(_) => ApiError::Unavailable(error.to_string()),
            StoreError::Conflict(_) => ApiError::Conflict(error.to_string()),
            StoreError::Corrupt { .. } => ApiError::Internal(error.to_string()),
            StoreError::Missing(_) => ApiError::FailedPrecondition(error.to_string()),
            StoreError::Full(_) => ApiError::ResourceExhausted(error.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use tonic::Code;

    use super::ApiError;
    use crate::store::StoreError;

    #[test]
    fn a_full_store_is_resource_exhausted_and_an_unreachable_one_unavailable() {
        let full = ApiError::from(StoreError::Full("end unused sessions".to_owned()));
        assert_eq!(full.code(), Code::ResourceExhausted);
        assert!(full.to_string().contains("end unused sessions"), "{full}");
        let down = ApiError::from(StoreError::Unavailable("connection refused".to_owned()));
        assert_eq!(down.code(), Code::Unavailable);
    }
}
