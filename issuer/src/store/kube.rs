//! The cluster-mode store: `IchorUser` objects in `ichor-system` through the Kubernetes API, and
//! each user's credentials entry (the entry's JSON, `CredentialsEntry`) in one of two layouts
//! (docs/credentials-sharding.md):
//! - **per user**: the Secret `ichor-user-<name>` in `ichor-credentials`, its one data key
//!   `entry` ([`per_user`]);
//! - **legacy**: one data key per user in the Secret `ichor-user-credentials` in `ichor-system`
//!   ([`legacy`]), while it exists. Its annotation `ichor.maesh.dev/credentials-layout` is the
//!   migration's phase ([`layout`]): `legacy` (entries stay where they are, new users go there),
//!   `migrating` (a write of a legacy entry moves it to its own Secret, new users get their own),
//!   `returning` (the controller moves entries back; no per-user Secret is made). Without the
//!   legacy Secret (a fresh installation, or the migration's end) every entry has its own Secret.
//!
//! # Guarantees
//! - User reads (one user, and the list) are cached in memory for at most the configured TTL
//!   (default and maximum [`USER_CACHE_TTL`]); [`UserStore::invalidate`] drops a user at once.
//!   The cache holds at most [`MAX_CACHED_USERS`] names, so probing random names cannot grow it.
//! - Credentials are never cached: a read GETs the user's own Secret; on 404 it GETs the legacy
//!   Secret (unless this replica saw that answer 404 within [`USER_CACHE_TTL`]) and, when the
//!   user's key is absent there too, the user's own Secret once more (a move creates the new
//!   Secret before it removes the legacy key, so a reader finds one of the two). A legacy Secret
//!   without a phase is given `legacy` (a merge patch under the `resourceVersion` read) and read
//!   again.
//! - Every write is conditional on what was read of that user alone, so writes for different
//!   users never conflict while no replica ever overwrites another's rotation. The [`Version`]
//!   says where and under which phase the entry was read, and a write goes there or is a
//!   [`StoreError::Conflict`] (retried from a fresh read by [`super::modify_credentials`]):
//!   - in the user's own Secret: a merge patch carrying its `resourceVersion` (409: conflict), a
//!     first entry a create (409 AlreadyExists: conflict), a removal a delete with the uid and
//!     `resourceVersion` as preconditions (409 or 404: conflict), after removing any legacy
//!     copy of the user's key, so a stale copy is never read again;
//!   - in the legacy Secret: a JSON Patch (`application/json-patch+json`, RFC 6902) that tests
//!     the phase read, then tests `/data/<user>` against the value read and replaces (or
//!     removes) it; the API server refuses the whole patch with 422 when a test fails. Such writes
//!     made while one is in flight are sent together as one patch ([`super::group_commit`]): one
//!     write of the legacy Secret in flight per replica. A first key is a JSON merge patch
//!     carrying the Secret's `resourceVersion`, which any change of phase also moves;
//!   - a legacy entry written while `migrating` moves: the user's Secret is created with the
//!     changed entry (the compare-and-set), then the legacy key removed with a test of the value
//!     read (a failed test: someone removed it already). A removal removes the legacy key first,
//!     then the user's Secret.
//! - One user's changes take turns in this replica ([`super::UserQueue`]): the writes of a
//!   batch are of different users, so a busy user's rotations are not conflicts of one patch.
//! - Secrets are read and written through the client's raw text calls and parsed here, so a
//!   response that fails to parse is never logged (the client's typed calls log the whole body
//!   at `warn` on a parse failure, which for a credentials Secret would be hashes).
//! - Errors name the object and the HTTP status, never a value from a Secret.
//! - The legacy Secret's size is measured each time the store holds it whole (every read, every
//!   write's answer) and exported ([`size`]). A write the API server refuses because a Secret
//!   would pass its 1 MiB of data is [`StoreError::Full`], not a transient failure: the patch is
//!   refused whole, so nothing of it is written, and writes that shrink the Secret keep
//!   succeeding. A group of writes refused as too large is sent again one write at a time, so one
//!   growing entry does not fail the others.

mod credentials;
pub(crate) mod layout;
mod legacy;
pub mod per_user;
pub mod size;

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::Duration,
};

use async_trait::async_trait;
use ichor_renderers::{
    auth::credentials::CredentialsEntry,
    contract::CREDENTIALS_NAMESPACE,
    crd::{IchorUser, NAMESPACE},
};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client, Resource, api::ListParams, core::Request};
use tokio::time::Instant;

use self::size::SecretSize;
use super::group_commit::Queue;
use super::{StoreError, StoredUser, USER_CACHE_TTL, UserStore, Version, convert::stored_user, redact};

/// The field manager named on every credentials write (audit logs show who wrote).
pub use ichor_renderers::contract::ISSUER_FIELD_MANAGER as FIELD_MANAGER;
/// The most user names (found or not) kept in the cache; past it, expired ones are dropped, then
/// all.
pub const MAX_CACHED_USERS: usize = 4096;
/// Users listed per page.
const LIST_PAGE: u32 = 500;
/// The most pages read for one list (so at most 10 000 users).
const MAX_LIST_PAGES: usize = 20;
/// The longest text of a transport error kept in a [`StoreError::Unavailable`].
const MAX_ERROR_TEXT: usize = 300;

/// The cluster-mode [`UserStore`].
pub struct KubeStore {
    client: Client,
    users: Api<IchorUser>,
    /// The requests of the users' own Secrets (in `ichor-credentials`).
    user_secrets: Request,
    ttl: Duration,
    cache: Mutex<Cache>,
    writes: Queue,
    user_queue: super::UserQueue,
    size: SecretSize,
    /// When this replica last saw the legacy Secret answer 404 (it is not asked again within
    /// [`USER_CACHE_TTL`]).
    legacy_absent: Mutex<Option<Instant>>,
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
            user_secrets: Request::new(Secret::url_path(&(), Some(CREDENTIALS_NAMESPACE))),
            client,
            ttl: USER_CACHE_TTL,
            cache: Mutex::new(Cache::default()),
            writes: Queue::default(),
            user_queue: super::UserQueue::default(),
            size: SecretSize::default(),
            legacy_absent: Mutex::new(None),
        }
    }

    /// The legacy credentials Secret's size as last measured by this store.
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
        self.read_entry(name).await
    }

    async fn write_credentials(
        &self,
        name: &str,
        expected: &Version,
        entry: Option<&CredentialsEntry>,
    ) -> Result<Version, StoreError> {
        self.write_entry(name, expected, entry).await
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
