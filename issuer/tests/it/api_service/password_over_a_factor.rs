//! Changing one's own password while having a second factor: over the old password and a typed
//! code of a factor (an authenticator-app code or an unused recovery code), used up in the same
//! write as the new password, so a stolen session and password cannot lock the owner out. A
//! wrong code is counted as at the sign-in; a user without a factor is asked for none.

use super::factors::enrol;
use super::*;
use async_trait::async_trait;
use ichor_issuer::{
    api::{ApiError, Caller, Created, UserBackend},
    store::{StoreError, StoredUser, UserStore, Version, local::LocalStore},
};
use ichor_renderers::{
    auth::{credentials::StoredPasskey, recovery, totp},
    crd::IchorUser,
};

async fn change(e: &Env, user: &str, (old, new): (&str, &str), code: &str) -> Result<(), Status> {
    let t = token(user, e.clock.now_ts());
    e.api
        .change_own_password(req(
            &t,
            ChangeOwnPasswordRequest {
                old_password: old.into(),
                new_password: new.into(),
                code: code.into(),
            },
        ))
        .await
        .map(drop)
}

/// Whether `password` is `user`'s password now.
async fn is_password(e: &Env, user: &str, password: &str) -> bool {
    let entry = e.entry(user).await.unwrap();
    verify_password(&Password::new(password), &entry.hash)
        .unwrap()
        .is_valid()
}

/// The recovery codes `user` has left.
async fn codes_left(e: &Env, user: &str) -> usize {
    e.entry(user)
        .await
        .unwrap()
        .factors
        .recovery
        .map_or(0, |r| r.digests.len())
}

const NEXT: &str = "the owner's next password";
const THIEF: &str = "the thief's chosen password";

#[tokio::test]
async fn a_protected_users_change_takes_a_code_of_a_factor_and_uses_it_up() {
    let e = env();
    e.cast().await;
    let (secret, codes) = enrol(&e, "view").await;
    let before = e.entry("view").await.unwrap();

    // The password alone: refused before it is checked, naming the field.
    for empty in ["", "  "] {
        assert_status(
            change(&e, "view", (PASSWORD, THIEF), empty).await,
            Code::InvalidArgument,
            "code: required",
        );
    }
    assert_status(
        change(&e, "view", (PASSWORD, THIEF), &"1".repeat(65)).await,
        Code::InvalidArgument,
        "code: is not a code",
    );
    // A wrong code: refused and counted as at the sign-in, the password unchanged.
    assert_status(
        change(&e, "view", (PASSWORD, THIEF), "AAAA-BBBB-CCCC-DDDD").await,
        Code::InvalidArgument,
        "code: is incorrect or was used already",
    );
    let entry = e.entry("view").await.unwrap();
    assert_eq!(entry.factors.failures, 1, "a wrong code counts");
    assert_eq!(entry.hash, before.hash, "the password changed over a wrong code");
    assert_eq!(
        entry.not_before, before.not_before,
        "sessions ended over a wrong code"
    );
    // A wrong old password with a right code: the code is not looked at, so not used.
    assert_status(
        change(&e, "view", ("not my password", THIEF), &codes[0]).await,
        Code::InvalidArgument,
        "old_password: does not match",
    );
    assert_eq!(codes_left(&e, "view").await, 10);
    assert!(is_password(&e, "view", PASSWORD).await);

    // A recovery code: the password changes, the code is used up and the failures cleared.
    e.clock.advance(SignedDuration::from_secs(1));
    change(&e, "view", (PASSWORD, NEXT), &codes[0]).await.unwrap();
    let entry = e.entry("view").await.unwrap();
    assert!(is_password(&e, "view", NEXT).await);
    assert_eq!(codes_left(&e, "view").await, 9);
    assert!(!recovery::consume(
        &mut entry.factors.recovery.clone().unwrap(),
        &codes[0]
    ));
    assert_eq!(entry.factors.failures, 0);
    assert_eq!(entry.not_before, e.clock.now_ts(), "sessions ended");
    assert!(!entry.must_change);
    // The same code again: used already.
    assert_status(
        change(&e, "view", (NEXT, THIEF), &codes[0]).await,
        Code::InvalidArgument,
        "code: is incorrect or was used already",
    );
    assert!(is_password(&e, "view", NEXT).await);

    // The app's code: accepted once in its step.
    e.clock.advance(SignedDuration::from_secs(30));
    let code = totp::code_at(&secret, e.clock.now_ts()).unwrap();
    change(&e, "view", (NEXT, PASSWORD), &code).await.unwrap();
    assert!(is_password(&e, "view", PASSWORD).await);
    assert_eq!(codes_left(&e, "view").await, 9, "no recovery code taken");
    e.clock.advance(SignedDuration::from_secs(1));
    assert_status(
        change(&e, "view", (PASSWORD, THIEF), &code).await,
        Code::InvalidArgument,
        "code: is incorrect or was used already",
    );
    assert!(is_password(&e, "view", PASSWORD).await);
}

#[tokio::test]
async fn wrong_codes_hold_the_change_back_and_a_held_code_changes_nothing() {
    let e = env();
    e.cast().await;
    let (_, codes) = enrol(&e, "view").await;
    // Shaped as recovery codes, so none can be the app's code of the moment.
    for c in ['A', 'B', 'C', 'D', 'E'] {
        assert_status(
            change(&e, "view", (PASSWORD, THIEF), &format!("AAAA-BBBB-CCCC-DDD{c}")).await,
            Code::InvalidArgument,
            "code: is incorrect or was used already",
        );
    }
    assert_eq!(e.entry("view").await.unwrap().factors.failures, 5);
    // Held by the back-off of the sign-in's second step: even a right code is not looked at.
    assert_status(
        change(&e, "view", (PASSWORD, THIEF), &codes[0]).await,
        Code::FailedPrecondition,
        "code: too many wrong codes; wait",
    );
    let entry = e.entry("view").await.unwrap();
    assert_eq!(entry.factors.failures, 5, "a held code is not counted");
    assert_eq!(codes_left(&e, "view").await, 10, "nor used");
    assert!(is_password(&e, "view", PASSWORD).await);
    // Once the wait is over, the owner's code goes through.
    e.clock.advance(SignedDuration::from_secs(2));
    change(&e, "view", (PASSWORD, NEXT), &codes[0]).await.unwrap();
    assert!(is_password(&e, "view", NEXT).await);
}

#[tokio::test]
async fn with_passkeys_alone_a_recovery_code_confirms_the_change() {
    let e = env();
    e.cast().await;
    let (_, codes) = enrol(&e, "view").await;
    let mut entry = e.entry("view").await.unwrap();
    entry.factors.totp = None;
    entry.factors.passkeys.push(StoredPasskey {
        id: "AQIDBA".into(),
        name: "YubiKey 5".into(),
        passkey: serde_json::json!({"cred": "opaque"}),
        created_at: t0(),
        last_used_at: None,
        backup_eligible: false,
        cloned_at: None,
    });
    e.put_entry("view", Some(&entry)).await;
    assert_status(
        change(&e, "view", (PASSWORD, THIEF), "").await,
        Code::InvalidArgument,
        "code: required",
    );
    change(&e, "view", (PASSWORD, NEXT), &codes[3]).await.unwrap();
    assert!(is_password(&e, "view", NEXT).await);
    assert_eq!(codes_left(&e, "view").await, 9);
}

#[tokio::test]
async fn a_must_change_user_with_a_factor_types_a_code_too() {
    let e = env();
    e.cast().await;
    let (_, codes) = enrol(&e, "view").await;
    // An administrator set a password to be changed; the factors stayed.
    let entry = e.entry("view").await.unwrap();
    let entry = entry.with_new_password(entry.hash.clone(), e.clock.now_ts(), true);
    e.put_entry("view", Some(&entry)).await;
    assert_status(
        change(&e, "view", (PASSWORD, NEXT), "").await,
        Code::InvalidArgument,
        "code: required",
    );
    assert!(e.entry("view").await.unwrap().must_change);
    change(&e, "view", (PASSWORD, NEXT), &codes[0]).await.unwrap();
    let entry = e.entry("view").await.unwrap();
    assert!(!entry.must_change);
    assert!(is_password(&e, "view", NEXT).await);
}

#[tokio::test]
async fn a_user_without_a_factor_is_asked_for_no_code() {
    let e = env();
    e.cast().await;
    change(&e, "view", (PASSWORD, NEXT), "").await.unwrap();
    assert!(is_password(&e, "view", NEXT).await);
    // A code sent anyway is not looked at (as adding a first factor does).
    e.clock.advance(SignedDuration::from_secs(1));
    change(&e, "view", (NEXT, PASSWORD), "123456").await.unwrap();
    let entry = e.entry("view").await.unwrap();
    assert!(is_password(&e, "view", PASSWORD).await);
    assert!(entry.factors.is_empty());
    assert_eq!(entry.factors.failures, 0);
}

/// A store over the test's directory that, just before the first write of credentials, puts
/// `added` in their place: the entry an owner who adds a factor while a password change is
/// checked leaves behind. The write then meets a newer version and is made again over it.
struct FactorAddedBeforeTheWrite {
    store: LocalStore,
    added: std::sync::Mutex<Option<CredentialsEntry>>,
}

#[async_trait]
impl UserStore for FactorAddedBeforeTheWrite {
    async fn get_user(&self, name: &str) -> Result<Option<StoredUser>, StoreError> {
        self.store.get_user(name).await
    }
    async fn list_users(&self) -> Result<Vec<StoredUser>, StoreError> {
        self.store.list_users().await
    }
    async fn read_credentials(&self, name: &str) -> Result<(Option<CredentialsEntry>, Version), StoreError> {
        self.store.read_credentials(name).await
    }
    async fn write_credentials(
        &self,
        name: &str,
        expected: &Version,
        entry: Option<&CredentialsEntry>,
    ) -> Result<Version, StoreError> {
        let added = self.added.lock().unwrap().take();
        if let Some(added) = added {
            let (_, version) = self.store.read_credentials(name).await?;
            self.store.write_credentials(name, &version, Some(&added)).await?;
        }
        self.store.write_credentials(name, expected, entry).await
    }
}

#[async_trait]
impl UserBackend for FactorAddedBeforeTheWrite {
    async fn create_user(&self, caller: &Caller, user: &IchorUser) -> Result<Created, ApiError> {
        UserBackend::create_user(&self.store, caller, user).await
    }
    async fn undo_create(&self, caller: &Caller, name: &str, created: &Created) -> Result<(), ApiError> {
        UserBackend::undo_create(&self.store, caller, name, created).await
    }
    async fn update_user(&self, caller: &Caller, user: &IchorUser) -> Result<(), ApiError> {
        UserBackend::update_user(&self.store, caller, user).await
    }
    async fn delete_user(&self, caller: &Caller, name: &str) -> Result<(), ApiError> {
        UserBackend::delete_user(&self.store, caller, name).await
    }
}

#[tokio::test]
async fn a_factor_added_while_the_password_is_checked_asks_for_its_code() {
    let e = env();
    e.cast().await;
    let (_, codes) = enrol(&e, "view").await;
    let protected = e.entry("view").await.unwrap();
    let mut bare = protected.clone();
    bare.factors = Default::default();
    e.put_entry("view", Some(&bare)).await;
    let store = Arc::new(FactorAddedBeforeTheWrite {
        store: local_store(&e.dir),
        added: std::sync::Mutex::new(Some(protected.clone())),
    });
    let (api, clock, _) = build_api(store, None);
    clock.set(e.clock.now_ts());
    // Read without a factor, so no code was asked before the password check; the write sees
    // the factor and asks for its code, writing nothing.
    let t = token("view", clock.now_ts());
    assert_status(
        api.change_own_password(req(
            &t,
            ChangeOwnPasswordRequest {
                old_password: PASSWORD.into(),
                new_password: THIEF.into(),
                code: String::new(),
            },
        ))
        .await,
        Code::InvalidArgument,
        "code: required",
    );
    let entry = e.entry("view").await.unwrap();
    assert_eq!(
        entry.hash, protected.hash,
        "the password changed without the new factor's code"
    );
    assert_eq!(
        (entry.not_before, &entry.factors),
        (protected.not_before, &protected.factors)
    );
    change(&e, "view", (PASSWORD, NEXT), &codes[0]).await.unwrap();
    assert!(is_password(&e, "view", NEXT).await);
}
