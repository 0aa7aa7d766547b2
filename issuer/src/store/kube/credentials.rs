//! The credentials reads and writes of [`KubeStore`]: the I/O that carries out the decisions of
//! [`layout`] on the user's own Secret ([`per_user`]) and the legacy Secret ([`legacy`]).

use base64::Engine as _;
use ichor_renderers::{auth::credentials::CredentialsEntry, contract::user_credentials_secret};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::params::GetParams;
use tokio::time::Instant;

use super::layout::{self, AfterLegacy, Found, Phase, Step, UserNow};
use super::per_user::{self, Call, UserSecret};
use super::{FIELD_MANAGER, KubeStore, legacy};
use crate::store::group_commit::EntryWrite;
use crate::store::{StoreError, USER_CACHE_TTL, Version, convert, redact};

/// How many times a read gives a legacy Secret without a phase the phase `legacy` (each time
/// another replica changed it in between) before it gives up as unavailable.
const MAX_PHASE_ATTEMPTS: usize = 4;

impl KubeStore {
    /// The user's entry and the version to write it against (never cached).
    pub(super) async fn read_entry(
        &self,
        name: &str,
    ) -> Result<(Option<CredentialsEntry>, Version), StoreError> {
        if ichor_renderers::auth::UserName::parse(name).is_err() {
            // No Secret and no key can be named after it: do not ask.
            return Ok((None, Found::Nowhere.version()));
        }
        if let Some(own) = self.get_user_secret(name).await? {
            return own_entry(name, own);
        }
        // The uid of the user's IchorUser, read before the legacy Secret once a read finds the
        // entry to be moved (see `Found::Moving`).
        let mut user_uid: Option<String> = None;
        for _ in 0..MAX_PHASE_ATTEMPTS + 1 {
            let secret = if self.legacy_recently_absent() {
                None
            } else {
                self.get_legacy().await?
            };
            let view = secret.as_ref().map(|s| legacy::view(s, name)).transpose()?;
            match layout::after_legacy(view.as_ref()) {
                AfterLegacy::AddPhase(resource_version) => {
                    let patch = layout::add_phase_patch(&resource_version);
                    match legacy::merge(&self.client, &self.size, &patch, name).await {
                        // Added, or changed by another replica since the read: read it again.
                        Ok(_) | Err(StoreError::Conflict(_)) => {}
                        Err(e) => return Err(e),
                    }
                }
                AfterLegacy::UnknownPhase => {
                    return Err(StoreError::Unavailable(format!(
                        "{} is in a migration phase this issuer does not know (a newer release set it); \
                         upgrade the issuer",
                        legacy::secret_ref()
                    )));
                }
                AfterLegacy::Found(Found::Moving { .. }) if user_uid.is_none() => {
                    // Read the user first, then the legacy Secret again: a user deleted and
                    // made again after this uid is another object.
                    user_uid = Some(self.live_user_uid(name).await?.unwrap_or_default());
                }
                AfterLegacy::Found(found) => {
                    let found = match (found, &user_uid) {
                        (Found::Moving { read, .. }, Some(uid)) => Found::Moving {
                            read,
                            user: uid.clone(),
                        },
                        (found, _) => found,
                    };
                    let bytes = secret
                        .as_ref()
                        .and_then(|s| s.data.as_ref())
                        .and_then(|data| data.get(name))
                        .map(|bytes| bytes.0.as_slice())
                        .unwrap_or_default();
                    let entry =
                        CredentialsEntry::parse(name, bytes).map_err(|e| redact::corrupt(name, &e))?;
                    return Ok((Some(entry), found.version()));
                }
                AfterLegacy::AskAgain(found) => {
                    return match self.get_user_secret(name).await? {
                        Some(own) => own_entry(name, own),
                        None => Ok((None, found.version())),
                    };
                }
            }
        }
        Err(StoreError::Unavailable(format!(
            "{} kept changing while this issuer gave it its migration phase; try again",
            legacy::secret_ref()
        )))
    }

    /// Writes (`Some`) or removes (`None`) the user's entry where the read at `expected` found it.
    pub(super) async fn write_entry(
        &self,
        name: &str,
        expected: &Version,
        entry: Option<&CredentialsEntry>,
    ) -> Result<Version, StoreError> {
        convert::check_user_name(name)?;
        let value = match entry {
            Some(entry) => {
                let json = entry.to_json(name).map_err(|e| redact::corrupt(name, &e))?;
                Some(base64::engine::general_purpose::STANDARD.encode(json))
            }
            None => None,
        };
        // Not a version this store hands out: it cannot be current.
        let found = Found::parse(expected).ok_or_else(|| StoreError::Conflict(name.to_owned()))?;
        let mut version = Found::Nowhere.version();
        for step in layout::plan(&found, value) {
            match step {
                Step::LegacyPatch { phase, read, value } => {
                    version = self.legacy_patch(name, phase, read, value).await?;
                }
                Step::LegacyMerge {
                    resource_version,
                    value,
                } => {
                    let patch = legacy::merge_patch(name, &resource_version, value);
                    let secret = legacy::merge(&self.client, &self.size, &patch, name).await?;
                    version = legacy::version_in(&secret, name)?;
                }
                Step::RemoveLegacy { read, after_create } => {
                    match self
                        .legacy_patch(name, Some(Phase::Migrating), read.clone(), None)
                        .await
                    {
                        Ok(_) => {}
                        Err(StoreError::Conflict(_) | StoreError::Missing(_)) if after_create.is_some() => {
                            let user_read = after_create.as_deref().unwrap_or_default();
                            if !self.keep_refused_move(name, &read, user_read).await {
                                self.undo_stale_create(name, &version).await;
                                return Err(StoreError::Conflict(name.to_owned()));
                            }
                        }
                        Err(error) if after_create.is_some() => {
                            // The entry is in its own Secret, which readers take first; the
                            // controller's sweep removes the copy left behind.
                            tracing::warn!(user = %name, %error, "the legacy copy of a moved credentials entry was left behind");
                        }
                        Err(StoreError::Missing(_)) => return Err(StoreError::Conflict(name.to_owned())),
                        Err(error) => return Err(error),
                    }
                }
                Step::RemoveLegacyCopy => self.remove_legacy_copy(name).await?,
                Step::CreateUser(value) => version = self.create_user_secret(name, &value).await?,
                Step::ChangeUser {
                    resource_version,
                    value,
                } => version = self.change_user_secret(name, &resource_version, &value).await?,
                Step::DeleteUser {
                    uid,
                    resource_version,
                } => {
                    self.delete_user_secret(name, &uid, &resource_version).await?;
                    version = Found::Nowhere.version();
                }
                Step::DeleteUserIfAny => {
                    if let Some(own) = self.get_user_secret(name).await? {
                        self.delete_user_secret(name, &own.uid, &own.resource_version)
                            .await?;
                    }
                    version = Found::Nowhere.version();
                }
            }
        }
        Ok(version)
    }

    /// Whether a move whose create succeeded but whose removal of the legacy key (read as
    /// `read`, the user's uid read before it as `user_read`) was refused keeps what it created
    /// ([`layout::keep_after_refused_removal`], on a fresh read of the legacy Secret and of the
    /// `IchorUser`). When either read fails, not: the write is undone and retried, as before
    /// this check (a deleted user's entry must never come back).
    async fn keep_refused_move(&self, name: &str, read: &str, user_read: &str) -> bool {
        let legacy_now = match self.get_legacy().await {
            Ok(Some(secret)) => match legacy::view(&secret, name) {
                Ok(view) => view.value,
                Err(_) => return false,
            },
            Ok(None) => None,
            Err(_) => return false,
        };
        let user_now = match self.live_user_uid(name).await {
            Ok(Some(uid)) => UserNow::Live(uid),
            Ok(None) => UserNow::Gone,
            Err(error) => {
                tracing::warn!(user = %name, %error, "the IchorUser could not be read to settle a move");
                return false;
            }
        };
        let keep = layout::keep_after_refused_removal(read, legacy_now.as_deref(), user_read, &user_now);
        if keep {
            tracing::info!(user = %name, "a moved credentials entry's legacy copy was removed by another writer; the move stands");
        }
        keep
    }

    /// The uid of the user's `IchorUser`, read by quorum; `None` when there is none or it is
    /// being deleted.
    async fn live_user_uid(&self, name: &str) -> Result<Option<String>, StoreError> {
        match self.users.get_opt(name).await {
            Ok(Some(u)) if u.metadata.deletion_timestamp.is_none() => Ok(u.metadata.uid),
            Ok(_) => Ok(None),
            Err(e) => Err(super::user_error(&e, name)),
        }
    }

    /// Deletes the user's own Secret this write created at `created` (its version), unless
    /// something changed it since; what cannot be deleted is logged.
    async fn undo_stale_create(&self, name: &str, created: &Version) {
        let Some(Found::User {
            uid,
            resource_version,
        }) = Found::parse(created)
        else {
            return;
        };
        if let Err(error) = self.delete_user_secret(name, &uid, &resource_version).await {
            tracing::warn!(user = %name, %error, "a credentials entry moved from a stale read could not be deleted again");
        }
    }

    /// Whether this replica saw the legacy Secret answer 404 within [`USER_CACHE_TTL`].
    fn legacy_recently_absent(&self) -> bool {
        let seen = *self
            .legacy_absent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.is_some_and(|at| Instant::now().saturating_duration_since(at) < USER_CACHE_TTL)
    }

    /// GETs the legacy Secret, remembering when it is absent.
    async fn get_legacy(&self) -> Result<Option<Secret>, StoreError> {
        let secret = legacy::get(&self.client, &self.size).await?;
        *self
            .legacy_absent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = secret.is_none().then(Instant::now);
        Ok(secret)
    }

    /// One JSON Patch of the user's legacy key, through the group commit.
    async fn legacy_patch(
        &self,
        name: &str,
        phase: Option<Phase>,
        read: String,
        value: Option<String>,
    ) -> Result<Version, StoreError> {
        let write = EntryWrite {
            name: name.to_owned(),
            phase,
            read,
            value,
        };
        let (client, size) = (self.client.clone(), self.size.clone());
        self.writes
            .submit(write, move |batch| {
                legacy::commit(client.clone(), size.clone(), batch)
            })
            .await
    }

    /// Removes the user's key from the legacy Secret if it holds one (testing the phase and the
    /// value read), so a stale copy cannot be read once the user's own Secret is gone.
    async fn remove_legacy_copy(&self, name: &str) -> Result<(), StoreError> {
        if self.legacy_recently_absent() {
            return Ok(());
        }
        let Some(secret) = self.get_legacy().await? else {
            return Ok(());
        };
        let view = legacy::view(&secret, name)?;
        let Some(read) = view.value else {
            return Ok(());
        };
        let phase = view.phase.as_deref().and_then(Phase::parse);
        match self.legacy_patch(name, phase, read, None).await {
            Ok(_) | Err(StoreError::Missing(_)) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// GETs the user's own Secret; `None` when it does not exist.
    async fn get_user_secret(&self, name: &str) -> Result<Option<UserSecret>, StoreError> {
        let request = self
            .user_secrets
            .get(&user_credentials_secret(name), &GetParams::default())
            .map_err(|e| build_error(name, &e))?;
        match self.client.request_text(request).await {
            Ok(text) => per_user::parse(name, &text).map(Some),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
            Err(e) => Err(per_user::error(&e, name, Call::Read)),
        }
    }

    /// Creates the user's own Secret holding `value`.
    async fn create_user_secret(&self, name: &str, value: &str) -> Result<Version, StoreError> {
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        };
        let body = per_user::new_secret(name, value).to_string().into_bytes();
        let request = self
            .user_secrets
            .create(&params, body)
            .map_err(|e| build_error(name, &e))?;
        self.user_write(name, request, Call::Create).await
    }

    /// Sets the entry in the user's own Secret, if it is still at `resource_version`.
    async fn change_user_secret(
        &self,
        name: &str,
        resource_version: &str,
        value: &str,
    ) -> Result<Version, StoreError> {
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        let patch = per_user::change_patch(resource_version, value);
        let request = self
            .user_secrets
            .patch(&user_credentials_secret(name), &params, &Patch::Merge(&patch))
            .map_err(|e| build_error(name, &e))?;
        self.user_write(name, request, Call::Change).await
    }

    /// Deletes the user's own Secret, if it is still the one read at the version read.
    async fn delete_user_secret(
        &self,
        name: &str,
        uid: &str,
        resource_version: &str,
    ) -> Result<(), StoreError> {
        let request = self
            .user_secrets
            .delete(
                &user_credentials_secret(name),
                &per_user::delete_params(uid, resource_version),
            )
            .map_err(|e| build_error(name, &e))?;
        self.client
            .request_text(request)
            .await
            .map_err(|e| per_user::error(&e, name, Call::Delete))?;
        Ok(())
    }

    /// Sends a create or change of the user's own Secret; the version of its answer.
    async fn user_write(
        &self,
        name: &str,
        request: http::Request<Vec<u8>>,
        call: Call,
    ) -> Result<Version, StoreError> {
        let text = self
            .client
            .request_text(request)
            .await
            .map_err(|e| per_user::error(&e, name, call))?;
        let own = per_user::parse(name, &text)?;
        Ok(per_user::version(&own.uid, &own.resource_version))
    }
}

/// The entry of the user's own Secret and its version.
fn own_entry(name: &str, own: UserSecret) -> Result<(Option<CredentialsEntry>, Version), StoreError> {
    let entry = own
        .entry
        .map(|bytes| CredentialsEntry::parse(name, &bytes).map_err(|e| redact::corrupt(name, &e)))
        .transpose()?;
    Ok((entry, per_user::version(&own.uid, &own.resource_version)))
}

fn build_error(name: &str, e: &kube::core::request::Error) -> StoreError {
    StoreError::Unavailable(format!(
        "cannot build the request for {}: {e}",
        per_user::secret_ref(name)
    ))
}
