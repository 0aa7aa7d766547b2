//! A user store in memory that keeps the optimistic-version contract of the real ones: one
//! version for the whole credentials object (like the Secret's resourceVersion), so concurrent
//! writers conflict as they would against Kubernetes; and switches a test flips to see the
//! store fail or count what it was asked.

use std::collections::BTreeMap;
use std::sync::{
    Mutex, MutexGuard, PoisonError,
    atomic::{AtomicBool, AtomicU64, Ordering},
};

use async_trait::async_trait;
use ichor_issuer::store::{StoreError, StoredUser, UserStore, Version};
use ichor_renderers::auth::credentials::CredentialsEntry;

#[derive(Default)]
struct Data {
    users: BTreeMap<String, StoredUser>,
    creds: BTreeMap<String, CredentialsEntry>,
}

/// The in-memory store.
#[derive(Default)]
pub struct MemoryStore {
    data: Mutex<Data>,
    version: AtomicU64,
    /// While set, every call fails as an unreachable store does.
    pub unavailable: AtomicBool,
    /// The next this many credentials writes are refused as conflicts, as if another replica had
    /// written the entry first (counted down by each).
    pub conflicts: AtomicU64,
    /// The next this many credentials writes are taken but answered as an unreachable store
    /// does, as when the store committed and its answer was lost (counted down by each).
    pub lost_answers: AtomicU64,
    /// Credentials writes that succeeded.
    pub writes: AtomicU64,
    /// Credentials reads.
    pub credential_reads: AtomicU64,
}

impl MemoryStore {
    /// The data, also after a panic in another thread held the lock (a test that panicked
    /// reports it; the next one goes on).
    fn data(&self) -> MutexGuard<'_, Data> {
        self.data.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds `name` with `roles` (enabled, no display name or email) and, when given, its
    /// credentials entry.
    pub fn add_user(&self, name: &str, roles: &[&str], entry: Option<CredentialsEntry>) {
        let mut d = self.data();
        d.users.insert(
            name.to_owned(),
            StoredUser {
                name: name.to_owned(),
                roles: roles.iter().map(|r| (*r).to_owned()).collect(),
                disabled: false,
                display_name: None,
                email: None,
            },
        );
        if let Some(e) = entry {
            d.creds.insert(name.to_owned(), e);
        }
        self.version.fetch_add(1, Ordering::SeqCst);
    }

    /// Changes the user object of `name` (which must exist).
    pub fn update_user(&self, name: &str, f: impl FnOnce(&mut StoredUser)) {
        let mut d = self.data();
        f(d.users.get_mut(name).expect("user"));
    }

    /// Removes the user object of `name` (its credentials stay, as a Secret's entry would).
    pub fn delete_user(&self, name: &str) {
        self.data().users.remove(name);
    }

    /// The credentials entry of `name`.
    pub fn entry(&self, name: &str) -> Option<CredentialsEntry> {
        self.data().creds.get(name).cloned()
    }

    /// Replaces the credentials entry of `name`, as another writer would.
    pub fn set_entry(&self, name: &str, entry: CredentialsEntry) {
        self.data().creds.insert(name.to_owned(), entry);
        self.version.fetch_add(1, Ordering::SeqCst);
    }

    fn check(&self) -> Result<(), StoreError> {
        if self.unavailable.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable("test store is down".into()));
        }
        Ok(())
    }
}

#[async_trait]
impl UserStore for MemoryStore {
    async fn get_user(&self, name: &str) -> Result<Option<StoredUser>, StoreError> {
        self.check()?;
        Ok(self.data().users.get(name).cloned())
    }

    async fn list_users(&self) -> Result<Vec<StoredUser>, StoreError> {
        self.check()?;
        Ok(self.data().users.values().cloned().collect())
    }

    async fn read_credentials(&self, name: &str) -> Result<(Option<CredentialsEntry>, Version), StoreError> {
        self.check()?;
        self.credential_reads.fetch_add(1, Ordering::SeqCst);
        let d = self.data();
        let v = self.version.load(Ordering::SeqCst);
        Ok((d.creds.get(name).cloned(), Version(v.to_string())))
    }

    async fn write_credentials(
        &self,
        name: &str,
        expected: &Version,
        entry: Option<&CredentialsEntry>,
    ) -> Result<Version, StoreError> {
        self.check()?;
        // Yield so concurrent writers interleave like real network calls.
        tokio::task::yield_now().await;
        if self
            .conflicts
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(StoreError::Conflict(name.to_owned()));
        }
        let mut d = self.data();
        let current = self.version.load(Ordering::SeqCst);
        if expected.0 != current.to_string() {
            return Err(StoreError::Conflict(name.to_owned()));
        }
        match entry {
            Some(e) => d.creds.insert(name.to_owned(), e.clone()),
            None => d.creds.remove(name),
        };
        self.writes.fetch_add(1, Ordering::SeqCst);
        self.version.store(current + 1, Ordering::SeqCst);
        if self
            .lost_answers
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(StoreError::Unavailable(
                "test store: the write's answer was lost".into(),
            ));
        }
        Ok(Version((current + 1).to_string()))
    }
}
