//! [`UserBackend`]: the store the API reads users and credentials from, plus the writes of
//! `IchorUser` objects. [`LocalStore`] implements it for the embedded mode (one YAML file per
//! user); a Kubernetes implementation (writes of `IchorUser` objects as the caller) is the
//! lead's wiring and not here.

use async_trait::async_trait;
use ichor_renderers::crd::IchorUser;

use super::error::ApiError;
use crate::store::{
    UserStore,
    local::{LocalStore, UserFileError},
};

/// A user store that can also create, replace and delete `IchorUser` objects.
#[async_trait]
pub trait UserBackend: UserStore {
    /// Creates the user (name and spec).
    ///
    /// # Errors
    /// [`ApiError::AlreadyExists`] when it exists; others as the backend fails.
    async fn create_user(&self, user: &IchorUser) -> Result<(), ApiError>;

    /// Replaces the user's spec.
    ///
    /// # Errors
    /// [`ApiError::NotFound`] when it does not exist; others as the backend fails.
    async fn update_user(&self, user: &IchorUser) -> Result<(), ApiError>;

    /// Deletes the user object (not its credentials entry).
    ///
    /// # Errors
    /// [`ApiError::NotFound`] when it does not exist; others as the backend fails.
    async fn delete_user(&self, name: &str) -> Result<(), ApiError>;
}

#[async_trait]
impl UserBackend for LocalStore {
    async fn create_user(&self, user: &IchorUser) -> Result<(), ApiError> {
        LocalStore::create_user(self, user)
            .await
            .map(drop)
            .map_err(file_error)
    }

    async fn update_user(&self, user: &IchorUser) -> Result<(), ApiError> {
        LocalStore::update_user(self, user)
            .await
            .map(drop)
            .map_err(file_error)
    }

    async fn delete_user(&self, name: &str) -> Result<(), ApiError> {
        LocalStore::delete_user(self, name)
            .await
            .map(drop)
            .map_err(file_error)
    }
}

/// The API error of a refused or failed user-file write.
fn file_error(error: UserFileError) -> ApiError {
    match error {
        UserFileError::AlreadyExists { name, .. } => ApiError::AlreadyExists(name),
        UserFileError::NotFound { name, .. } => ApiError::NotFound(name),
        UserFileError::Invalid { .. } => ApiError::invalid("name", error.to_string()),
        UserFileError::SharedFile { .. } | UserFileError::Duplicate { .. } => {
            ApiError::FailedPrecondition(error.to_string())
        }
        UserFileError::Io { .. } => ApiError::Unavailable(error.to_string()),
    }
}
