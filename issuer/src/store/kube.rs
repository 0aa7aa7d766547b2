//! The cluster-mode store: `IchorUser` objects through the Kubernetes API, credentials in the
//! Secret `ichor-user-credentials` (one data key per user, the value the entry's JSON), both in
//! `ichor-system`.
//!
//! # Guarantees
//! - User reads (one user, and the list) are cached in memory for at most the configured TTL
//!   (default and maximum [`USER_CACHE_TTL`]); [`UserStore::invalidate`] drops a user at once.
//!   The cache holds at most [`MAX_CACHED_USERS`] names, so probing random names cannot grow it.
//! - Credentials are never cached: every read is a `GET` of the Secret, and every write touches
//!   exactly one data key, compared against what was read of that key alone, so writes for
//!   different users never conflict while no replica ever overwrites another's rotation:
//!   - when the user had an entry, its [`Version`] carries the entry's value as read, and the
//!     write is a JSON Patch (`application/json-patch+json`, RFC 6902) `test` of `/data/<user>`
//!     against that value followed by `replace` (or `remove`). The API server applies the
//!     operations atomically and refuses the whole patch with 422 when the test fails
//!     ([`StoreError::Conflict`]). Such writes made while one is in flight are sent together as
//!     one patch ([`super::group_commit`]): one write of the Secret in flight per replica;
//!   - when the user had none (a test cannot assert absence), the [`Version`] carries the
//!     Secret's `resourceVersion` and the write is a JSON merge patch
//!     (`application/merge-patch+json`) of the one key carrying `metadata.resourceVersion`, which
//!     the API server refuses with 409 when any replica wrote the Secret since the read.
//! - One user's changes take turns in this replica ([`super::UserQueue`]): the writes of a
//!   batch are of different users, so a busy user's rotations are not conflicts of one patch.
//! - The Secret is read and written through the client's raw text calls and parsed here, so a
//!   response that fails to parse is never logged (the client's typed calls log the whole body
//!   at `warn` on a parse failure, which for this Secret would be every hash).
//! - Errors name the object and the HTTP status, never a value from the Secret.
//! - The Secret's size is measured each time the store holds it whole (every read, every
//!   write's answer) and exported ([`size`]). A write the API server refuses because the Secret
//!   would pass its 1 MiB of data is [`StoreError::Full`], not a transient failure: the JSON
//!   Patch or merge patch is refused whole, so nothing of it is written, and writes that shrink
//!   the Secret keep succeeding. A group of writes refused as too large is sent again one write
//!   at a time, so one growing entry does not fail the others.

pub mod size;

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::Duration,
};

use async_trait::async_trait;
use base64::Engine as _;
use ichor_renderers::{
    auth::credentials::{CREDENTIALS_SECRET_NAME, CredentialsEntry},
    crd::{IchorUser, NAMESPACE},
};
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, Client, Resource,
    api::{ListParams, Patch, PatchParams},
    core::{Request, params::GetParams},
};
use tokio::time::Instant;

use self::size::{SECRET_DATA_LIMIT, SecretSize};
use super::group_commit::{self, Batch, EntryWrite, Queue};
use super::{
    FULL_REMEDY, StoreError, StoredUser, USER_CACHE_TTL, UserStore, Version, convert::stored_user, redact,
};

/// The field manager named on every credentials write (audit logs show who wrote).
pub const FIELD_MANAGER: &str = "ichor-issuer";
/// The most user names (found or not) kept in the cache; past it, expired ones are dropped, then
/// all.
pub const MAX_CACHED_USERS: usize = 4096;
/// Users listed per page.
const LIST_PAGE: u32 = 500;
/// The most pages read for one list (so at most 10 000 users).
const MAX_LIST_PAGES: usize = 20;
/// The longest text of a transport error kept in a [`StoreError::Unavailable`].
const MAX_ERROR_TEXT: usize = 300;
/// The prefix of a [`Version`] that carries the user's entry value (base64, as in the Secret).
const ENTRY_VERSION_PREFIX: &str = "entry:";
/// The prefix of a [`Version`] that carries the Secret's `resourceVersion` (the user had no entry).
const ABSENT_VERSION_PREFIX: &str = "absent@";
/// The media type of a JSON Patch (RFC 6902).
const JSON_PATCH: &str = "application/json-patch+json";

/// The cluster-mode [`UserStore`].
pub struct KubeStore {
    client: Client,
    users: Api<IchorUser>,
    secrets: Request,
    ttl: Duration,
    cache: Mutex<Cache>,
    writes: Queue,
    user_queue: super::UserQueue,
    size: SecretSize,
}

impl std::fmt::Debug for KubeStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeStore")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

/// Cached user reads, each with the instant it was fetched.
#[derive(Default)]
struct Cache {
    users: HashMap<String, (Instant, Option<StoredUser>)>,
    list: Option<(Instant, Vec<StoredUser>)>,
}

impl KubeStore {
    /// A store using `client`, in namespace `ichor-system`, caching user reads for
    /// [`USER_CACHE_TTL`].
    pub fn new(client: Client) -> Self {
        Self {
            users: Api::namespaced(client.clone(), NAMESPACE),
            secrets: Request::new(Secret::url_path(&(), Some(NAMESPACE))),
            client,
            ttl: USER_CACHE_TTL,
            cache: Mutex::new(Cache::default()),
            writes: Queue::default(),
            user_queue: super::UserQueue::default(),
            size: SecretSize::default(),
        }
    }

    /// The credentials Secret's size as last measured by this store.
    pub fn secret_size(&self) -> &SecretSize {
        &self.size
    }

    /// The same store with user reads cached for `ttl` (capped at [`USER_CACHE_TTL`]; zero
    /// disables the cache).
    #[must_use]
    pub fn with_user_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl.min(USER_CACHE_TTL);
        self
    }

    /// The client (the issuer's ServiceAccount), for the `IchorUser` writes made as the caller
    /// (`crate::api::kube_backend`).
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    fn fresh(&self, fetched: Instant, now: Instant) -> bool {
        now.saturating_duration_since(fetched) < self.ttl
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn remember(&self, name: &str, user: Option<StoredUser>, at: Instant) {
        if self.ttl.is_zero() {
            return;
        }
        let mut cache = self.cache();
        if cache.users.len() >= MAX_CACHED_USERS && !cache.users.contains_key(name) {
            let ttl = self.ttl;
            cache
                .users
                .retain(|_, (fetched, _)| at.saturating_duration_since(*fetched) < ttl);
            if cache.users.len() >= MAX_CACHED_USERS {
                cache.users.clear();
            }
        }
        cache.users.insert(name.to_owned(), (at, user));
    }

    /// GETs the Secret (uncached).
    async fn get_secret(&self) -> Result<Secret, StoreError> {
        let request = self
            .secrets
            .get(CREDENTIALS_SECRET_NAME, &GetParams::default())
            .map_err(|e| {
                StoreError::Unavailable(format!("cannot build the request for {}: {e}", secret_ref()))
            })?;
        let text = self
            .client
            .request_text(request)
            .await
            .map_err(|e| secret_error(&e, None, &self.size))?;
        let secret = parse_secret(&text)?;
        self.size.observe(&secret);
        Ok(secret)
    }
}

#[async_trait]
impl UserStore for KubeStore {
    async fn get_user(&self, name: &str) -> Result<Option<StoredUser>, StoreError> {
        if ichor_renderers::auth::UserName::parse(name).is_err() {
            // No object can have this name; do not ask (or cache) it.
            return Ok(None);
        }
        let now = Instant::now();
        if let Some((fetched, user)) = self.cache().users.get(name)
            && self.fresh(*fetched, now)
        {
            return Ok(user.clone());
        }
        let object = self.users.get_opt(name).await.map_err(|e| user_error(&e, name))?;
        let user = object.and_then(|object| match stored_user(&object) {
            Ok(user) => Some(user),
            Err(reason) => {
                tracing::warn!(user = %name, %reason, "IchorUser not usable; it is treated as absent");
                None
            }
        });
        self.remember(name, user.clone(), now);
        Ok(user)
    }

    async fn list_users(&self) -> Result<Vec<StoredUser>, StoreError> {
        let now = Instant::now();
        if let Some((fetched, users)) = &self.cache().list
            && self.fresh(*fetched, now)
        {
            return Ok(users.clone());
        }
        let mut users = Vec::new();
        let mut params = ListParams::default().limit(LIST_PAGE);
        for page in 1..=MAX_LIST_PAGES {
            let list = self
                .users
                .list(&params)
                .await
                .map_err(|e| user_error(&e, "(list)"))?;
            for object in &list.items {
                match stored_user(object) {
                    Ok(user) => users.push(user),
                    Err(reason) => {
                        let name = object.metadata.name.as_deref().unwrap_or_default();
                        tracing::warn!(user = %name, %reason, "IchorUser not usable; it is left out");
                    }
                }
            }
            match list.metadata.continue_.as_deref() {
                Some(token) if !token.is_empty() => {
                    if page == MAX_LIST_PAGES {
                        tracing::warn!(
                            max = LIST_PAGE as usize * MAX_LIST_PAGES,
                            "more IchorUser objects than listed; the rest are left out"
                        );
                    }
                    params = params.continue_token(token);
                }
                _ => break,
            }
        }
        users.sort_by(|a, b| a.name.cmp(&b.name));
        users.dedup_by(|a, b| a.name == b.name);
        if !self.ttl.is_zero() {
            let mut cache = self.cache();
            cache.list = Some((now, users.clone()));
        }
        for user in &users {
            self.remember(&user.name, Some(user.clone()), now);
        }
        Ok(users)
    }

    async fn read_credentials(&self, name: &str) -> Result<(Option<CredentialsEntry>, Version), StoreError> {
        let secret = self.get_secret().await?;
        let resource_version = secret_version(&secret)?;
        match secret.data.as_ref().and_then(|data| data.get(name)) {
            Some(bytes) => {
                let entry = CredentialsEntry::parse(name, &bytes.0).map_err(|e| redact::corrupt(name, &e))?;
                Ok((Some(entry), entry_version(&bytes.0)))
            }
            None => Ok((
                None,
                Version(format!("{ABSENT_VERSION_PREFIX}{}", resource_version.0)),
            )),
        }
    }

    async fn write_credentials(
        &self,
        name: &str,
        expected: &Version,
        entry: Option<&CredentialsEntry>,
    ) -> Result<Version, StoreError> {
        super::convert::check_user_name(name)?;
        let value = match entry {
            Some(entry) => {
                let json = entry.to_json(name).map_err(|e| redact::corrupt(name, &e))?;
                Some(base64::engine::general_purpose::STANDARD.encode(json))
            }
            None => None,
        };
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        if let Some(read) = expected.0.strip_prefix(ENTRY_VERSION_PREFIX) {
            let write = EntryWrite {
                name: name.to_owned(),
                read: read.to_owned(),
                value,
            };
            let client = self.client.clone();
            let size = self.size.clone();
            return self
                .writes
                .submit(write, move |batch| commit(client.clone(), size.clone(), batch))
                .await;
        }
        let request = {
            match expected.0.strip_prefix(ABSENT_VERSION_PREFIX) {
                // An empty resourceVersion is no precondition at all to the API server: the write
                // would overwrite blindly. No read ever returns one, so it cannot be current.
                Some(resource_version) if !resource_version.is_empty() => {
                    let patch = merge_patch(name, resource_version, value);
                    self.secrets
                        .patch(CREDENTIALS_SECRET_NAME, &params, &Patch::Merge(&patch))
                }
                // Not a version this store hands out: it cannot be current.
                _ => return Err(StoreError::Conflict(name.to_owned())),
            }
        }
        .map_err(|e| {
            StoreError::Unavailable(format!("cannot build the request for {}: {e}", secret_ref()))
        })?;
        let text = self
            .client
            .request_text(request)
            .await
            .map_err(|e| secret_error(&e, Some(name), &self.size))?;
        let secret = parse_secret(&text)?;
        self.size.observe(&secret);
        version_in(&secret, name)
    }

    fn invalidate(&self, name: &str) {
        let mut cache = self.cache();
        cache.users.remove(name);
        cache.list = None;
    }

    fn user_queue(&self) -> Option<&super::UserQueue> {
        Some(&self.user_queue)
    }

    fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.size.register(registry);
    }
}

/// The version of a user whose entry has these (decoded) bytes: the value as the Secret holds it.
fn entry_version(bytes: &[u8]) -> Version {
    Version(format!(
        "{ENTRY_VERSION_PREFIX}{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    ))
}

/// The merge patch setting (or, with `None`, removing) exactly one key, guarded by the Secret's
/// `resourceVersion`.
fn merge_patch(name: &str, resource_version: &str, value: Option<String>) -> serde_json::Value {
    let mut data = serde_json::Map::new();
    data.insert(
        name.to_owned(),
        value.map_or(serde_json::Value::Null, serde_json::Value::String),
    );
    serde_json::json!({
        "metadata": { "resourceVersion": resource_version },
        "data": data,
    })
}

/// The version of `name` in the Secret as the API returned it.
fn version_in(secret: &Secret, name: &str) -> Result<Version, StoreError> {
    let resource_version = secret_version(secret)?;
    Ok(match secret.data.as_ref().and_then(|data| data.get(name)) {
        Some(bytes) => entry_version(&bytes.0),
        None => Version(format!("{ABSENT_VERSION_PREFIX}{}", resource_version.0)),
    })
}

/// Commits a batch of entry writes: a user's repeated write is a conflict at once (it read the
/// value the first replaces); two or more are one patch, and when its tests fail or the Secret
/// would be too large, each is sent alone so only the stale or growing ones fail.
async fn commit(client: Client, size: SecretSize, batch: Batch) {
    let (first, repeats) = group_commit::split_repeats(batch);
    for (write, reply) in repeats {
        let _ = reply.send(Err(StoreError::Conflict(write.name)));
    }
    if first.len() > 1 {
        match send_entry_writes(&client, &size, first.iter().map(|(w, _)| w), "(several users)").await {
            Ok(secret) => {
                for (write, reply) in first {
                    let _ = reply.send(version_in(&secret, &write.name));
                }
                return;
            }
            Err(StoreError::Conflict(_) | StoreError::Full(_)) => {}
            Err(error) => {
                for (_, reply) in first {
                    let _ = reply.send(Err(error.clone()));
                }
                return;
            }
        }
    }
    for (write, reply) in first {
        let result = send_entry_writes(&client, &size, [&write], &write.name)
            .await
            .and_then(|secret| version_in(&secret, &write.name));
        let _ = reply.send(result);
    }
}

/// PATCHes the Secret with the JSON Patch of `writes`; `user` names the conflict when a test fails.
async fn send_entry_writes<'a>(
    client: &Client,
    size: &SecretSize,
    writes: impl IntoIterator<Item = &'a EntryWrite>,
    user: &str,
) -> Result<Secret, StoreError> {
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let patch = group_commit::patch_of(writes);
    let request = Request::new(Secret::url_path(&(), Some(NAMESPACE)))
        .patch(CREDENTIALS_SECRET_NAME, &params, &Patch::Merge(&patch))
        .map(|mut request| {
            // The body is the operations array as given; only the media type differs.
            request.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static(JSON_PATCH),
            );
            request
        })
        .map_err(|e| {
            StoreError::Unavailable(format!("cannot build the request for {}: {e}", secret_ref()))
        })?;
    let text = client
        .request_text(request)
        .await
        .map_err(|e| secret_error(&e, Some(user), size))?;
    let secret = parse_secret(&text)?;
    size.observe(&secret);
    Ok(secret)
}

fn secret_ref() -> String {
    format!("Secret {NAMESPACE}/{CREDENTIALS_SECRET_NAME}")
}

/// Parses the Secret from the API's text, with an error that carries no content.
fn parse_secret(text: &str) -> Result<Secret, StoreError> {
    serde_json::from_str(text).map_err(|e| {
        StoreError::Unavailable(format!(
            "the Kubernetes API answered with a {} that cannot be parsed: line {} column {}",
            secret_ref(),
            e.line(),
            e.column()
        ))
    })
}

fn secret_version(secret: &Secret) -> Result<Version, StoreError> {
    match secret.metadata.resource_version.as_deref() {
        Some(v) if !v.is_empty() => Ok(Version(v.to_owned())),
        _ => Err(StoreError::Unavailable(format!(
            "the Kubernetes API answered with a {} without metadata.resourceVersion",
            secret_ref()
        ))),
    }
}

/// Maps a failed Secret call: 404 is a missing Secret; on a write for `user`, 409 (the
/// `resourceVersion` moved) and a 422 without field causes (a JSON Patch `test` failed) are
/// conflicts, and a 422 saying the data is too long is a full Secret; anything else is
/// unavailable. Only the status code and reason are kept from an API answer.
fn secret_error(error: &kube::Error, user: Option<&str>, size: &SecretSize) -> StoreError {
    match (error, user) {
        (kube::Error::Api(status), _) if status.code == 404 => StoreError::Missing(format!(
            "{} does not exist; the controller (or `ichor init`) creates it",
            secret_ref()
        )),
        (kube::Error::Api(status), Some(_)) if status.code == 422 && is_too_long(status) => full(size),
        (kube::Error::Api(status), Some(user)) if status.code == 409 => StoreError::Conflict(user.to_owned()),
        (kube::Error::Api(status), Some(user)) if status.code == 422 && !is_validation_failure(status) => {
            StoreError::Conflict(user.to_owned())
        }
        (kube::Error::Api(status), _) => StoreError::Unavailable(format!(
            "{}: the Kubernetes API answered {} {}",
            secret_ref(),
            status.code,
            status.reason
        )),
        (other, _) => StoreError::Unavailable(format!("{}: {}", secret_ref(), transport_text(other))),
    }
}

/// Whether a 422 refuses the Secret's `data` as longer than the API server allows (a field cause
/// `FieldValueTooLong` on `data`).
fn is_too_long(status: &kube::core::Status) -> bool {
    status.details.as_ref().is_some_and(|details| {
        details
            .causes
            .iter()
            .any(|cause| cause.reason == "FieldValueTooLong" && cause.field == "data")
    })
}

/// The error of a write refused because the Secret would pass the API server's limit.
fn full(size: &SecretSize) -> StoreError {
    let held = size
        .bytes()
        .map(|b| format!(" (it held {b} at this replica's last read)"))
        .unwrap_or_default();
    StoreError::Full(format!(
        "{} would pass the API server's limit of {SECRET_DATA_LIMIT} bytes of data{held}, so the write \
         was refused and nothing was written; {FULL_REMEDY}",
        secret_ref()
    ))
}

/// Whether a 422 names a field of the object (a validation failure, which no retry fixes), rather
/// than a failed JSON Patch operation (which the API server answers as a generic 422 whose only
/// cause, if any, is the patch error without a field).
fn is_validation_failure(status: &kube::core::Status) -> bool {
    status
        .details
        .as_ref()
        .is_some_and(|details| details.causes.iter().any(|cause| !cause.field.is_empty()))
}

/// Maps a failed `IchorUser` call (a 404 never reaches here: `get_opt` makes it `None`).
fn user_error(error: &kube::Error, name: &str) -> StoreError {
    match error {
        kube::Error::Api(status) => StoreError::Unavailable(format!(
            "IchorUser {NAMESPACE}/{name}: the Kubernetes API answered {} {}",
            status.code, status.reason
        )),
        other => StoreError::Unavailable(format!("IchorUser {NAMESPACE}/{name}: {}", transport_text(other))),
    }
}

/// A transport error's text, bounded and with quoted values removed.
fn transport_text(error: &kube::Error) -> String {
    let text = redact::redact_quoted(&error.to_string());
    if text.chars().count() > MAX_ERROR_TEXT {
        let mut cut: String = text.chars().take(MAX_ERROR_TEXT).collect();
        cut.push('…');
        cut
    } else {
        text
    }
}

#[cfg(test)]
mod tests;
