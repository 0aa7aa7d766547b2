//! [`UserBackend`]: the store the API reads users and credentials from, plus the writes of
//! `IchorUser` objects, each made on behalf of the authenticated caller. [`LocalStore`]
//! implements it for the embedded mode (one YAML file per user; the caller was authorized in
//! process before the write); [`KubeStore`](crate::store::kube::KubeStore) implements it in
//! [`super::kube_backend`] (writes as the caller, through Kubernetes impersonation, so the
//! apiserver's RBAC and the admission webhook decide).

use async_trait::async_trait;
use ichor_renderers::crd::IchorUser;

use super::{auth::Caller, error::ApiError};
use crate::store::{
    UserStore,
    local::{LocalStore, UserFileError},
};

/// A user store that can also create, replace and delete `IchorUser` objects. `caller` is who
/// the write is made for: a backend whose authority is external (Kubernetes) writes as that
/// identity; the local backend, authorized in process already, ignores it.
#[async_trait]
pub trait UserBackend: UserStore {
    /// Creates the user (name and spec).
    ///
    /// # Errors
    /// [`ApiError::AlreadyExists`] when it exists; others as the backend fails or refuses.
    async fn create_user(&self, caller: &Caller, user: &IchorUser) -> Result<Created, ApiError>;

    /// Removes the user `name` that this process just created (`created`) because the write that
    /// had to follow it failed. Conditioned on the object's identity where the backend has one,
    /// so a user of the same name that someone else created meanwhile is never removed.
    ///
    /// # Errors
    /// [`ApiError::Conflict`] when the object is no longer the one created; others as
    /// [`UserBackend::delete_user`].
    async fn undo_create(&self, caller: &Caller, name: &str, created: &Created) -> Result<(), ApiError>;

    /// Replaces the user's spec.
    ///
    /// # Errors
    /// [`ApiError::NotFound`] when it does not exist; others as the backend fails or refuses.
    async fn update_user(&self, caller: &Caller, user: &IchorUser) -> Result<(), ApiError>;

    /// Deletes the user object (not its credentials entry).
    ///
    /// # Errors
    /// [`ApiError::NotFound`] when it does not exist; others as the backend fails or refuses.
    async fn delete_user(&self, caller: &Caller, name: &str) -> Result<(), ApiError>;
}

/// What a backend gave a user it created: what identifies that very object afterwards.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Created {
    /// The object's `metadata.uid` (Kubernetes); `None` for a backend without one.
    pub uid: Option<String>,
}

#[async_trait]
impl UserBackend for LocalStore {
    async fn create_user(&self, _caller: &Caller, user: &IchorUser) -> Result<Created, ApiError> {
        LocalStore::create_user(self, user)
            .await
            .map(|_| Created::default())
            .map_err(file_error)
    }

    /// The local store's user files have one writer, this process: the file is removed.
    async fn undo_create(&self, caller: &Caller, name: &str, _created: &Created) -> Result<(), ApiError> {
        UserBackend::delete_user(self, caller, name).await
    }

    async fn update_user(&self, _caller: &Caller, user: &IchorUser) -> Result<(), ApiError> {
        LocalStore::update_user(self, user)
            .await
            .map(drop)
            .map_err(file_error)
    }

    async fn delete_user(&self, _caller: &Caller, name: &str) -> Result<(), ApiError> {
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
