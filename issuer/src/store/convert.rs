//! From the `IchorUser` object to the [`StoredUser`] the issuer works with, refusing objects no
//! valid user can come from (a name that is not a DNS label, a bad role list) and objects being
//! deleted, so both stores apply the same rules whether or not the CRD's own validation ran.
//!
//! A user being deleted (`metadata.deletionTimestamp` set, held by a finalizer) is no user: its
//! deletion was asked for, so it signs in, refreshes and calls the API exactly as a name nobody
//! has — not as a disabled user, which would tell a caller that the name exists.

use ichor_renderers::{
    auth::{
        UserName,
        roles::{RoleError, validate_roles},
        user_name::UserNameError,
    },
    crd::IchorUser,
};

use super::{StoreError, StoredUser};

/// Why an `IchorUser` object cannot be a user: the object is left out (and logged) as if absent.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotAUser {
    /// The object is being deleted (a finalizer can hold it for as long as its holder wants;
    /// its deletion was asked for, so its access ends now).
    #[error("it is being deleted (metadata.deletionTimestamp is set), so it is no longer a user")]
    BeingDeleted,
    /// `metadata.name` is not a user name.
    #[error("{0}")]
    Name(#[from] UserNameError),
    /// `spec.roles` is not a valid role list.
    #[error("{0}")]
    Roles(#[from] RoleError),
}

/// The user described by `object`, or why the object cannot be a user (names the field).
pub(crate) fn stored_user(object: &IchorUser) -> Result<StoredUser, NotAUser> {
    if object.metadata.deletion_timestamp.is_some() {
        return Err(NotAUser::BeingDeleted);
    }
    let name = object.metadata.name.as_deref().unwrap_or_default();
    let name = UserName::parse(name)?;
    validate_roles(&object.spec.roles)?;
    Ok(StoredUser {
        name: name.as_str().to_owned(),
        roles: object.spec.roles.clone(),
        disabled: object.spec.disabled,
        display_name: object.spec.display_name.clone(),
        email: object.spec.email.clone(),
    })
}

/// Refuses a name no user can have before it becomes a key of a credentials store (the
/// contract has no dedicated variant; [`StoreError::Corrupt`] says no entry can exist there).
pub(crate) fn check_user_name(name: &str) -> Result<(), StoreError> {
    UserName::parse(name)
        .map(|_| ())
        .map_err(|_| StoreError::Corrupt {
            user: name.chars().take(64).collect(),
            reason: "the user name is not a lower-case DNS label, so no credentials can be stored under it"
                .to_owned(),
        })
}
