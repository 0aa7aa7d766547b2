//! A stolen refresh token brought back with `kubectl`: alice was disabled (her refresh families
//! survived in the credentials entry), and someone sets `spec.disabled: false` again with
//! `kubectl`, or deletes her and creates a new `alice` before the controller collected the old
//! entry. Either would hand the thief's refresh token (and, for the re-create, the old password)
//! to the enabled user. The webhook refuses the re-enable while a family from before is live and
//! the create while an entry of the name is stored; the API's re-enable ends the families first.

use ichor_controller::admission::fixtures::{FakeLister, FakeReviewer, ROOT, user};
use ichor_renderers::auth::credentials::CredentialsEntry;
use ichor_renderers::auth::hash::DUMMY_PHC;
use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use ichor_controller::admission::users::KIND as USER;

use crate::admission::Fakes;

/// Alice's entry with one refresh family started `ago` before now, for `lifetime`.
fn entry_with_family(ago: SignedDuration, lifetime: SignedDuration) -> CredentialsEntry {
    let start = Timestamp::now() - ago;
    CredentialsEntry::new(DUMMY_PHC.to_owned(), start - SignedDuration::from_hours(1), false)
        .start_family("stolen-family", "ichor-cli", "ichor-kube", start, lifetime)
        .unwrap()
}

fn fakes(entry: Option<CredentialsEntry>) -> Fakes {
    let lister = FakeLister::with(&[("root", &["admin"], false), ("alice", &["viewer"], true)]);
    let lister = match entry {
        Some(entry) => lister.with_credentials("alice", entry),
        None => lister,
    };
    Fakes::new(FakeReviewer::default(), lister)
}

fn re_enable() -> (Value, Value) {
    (
        user("alice", &["viewer"], false),
        user("alice", &["viewer"], true),
    )
}

#[tokio::test]
async fn a_kubectl_re_enable_is_refused_while_a_session_from_before_the_disable_lives() {
    let f = fakes(Some(entry_with_family(
        SignedDuration::from_hours(2),
        SignedDuration::from_hours(720),
    )));
    let (new, old) = re_enable();
    let refusal = f.decide(USER, "UPDATE", &ROOT, new, old).await.unwrap_err();
    assert!(
        refusal
            .starts_with("spec.disabled: user \"alice\" still has 1 session(s) from before it was disabled"),
        "{refusal}"
    );
    assert!(refusal.contains("ichor user revoke-sessions alice"), "{refusal}");
}

#[tokio::test]
async fn a_re_enable_passes_once_the_sessions_are_ended_or_over() {
    let ended = entry_with_family(SignedDuration::from_hours(2), SignedDuration::from_hours(720))
        .revoke_all(Timestamp::now());
    let expired = entry_with_family(SignedDuration::from_hours(20), SignedDuration::from_hours(12));
    for entry in [None, Some(ended), Some(expired)] {
        let f = fakes(entry.clone());
        let (new, old) = re_enable();
        assert_eq!(
            f.decide(USER, "UPDATE", &ROOT, new, old).await,
            Ok(()),
            "{entry:?}"
        );
    }
}

#[tokio::test]
async fn a_re_create_is_refused_while_the_earlier_users_credentials_are_stored() {
    let f = fakes(Some(CredentialsEntry::new(
        DUMMY_PHC.to_owned(),
        Timestamp::now(),
        false,
    )));
    let refusal = f
        .decide(
            USER,
            "CREATE",
            &ROOT,
            user("alice", &["viewer"], false),
            Value::Null,
        )
        .await
        .unwrap_err();
    assert!(
        refusal.starts_with("metadata.name: the credentials of an earlier user \"alice\" are still stored"),
        "{refusal}"
    );
    let clean = fakes(None);
    assert_eq!(
        clean
            .decide(
                USER,
                "CREATE",
                &ROOT,
                user("alice", &["viewer"], false),
                Value::Null
            )
            .await,
        Ok(())
    );
}

#[tokio::test]
async fn an_unreadable_credentials_entry_refuses_the_re_enable_and_the_create() {
    let lister = FakeLister::with(&[("root", &["admin"], false)]).with_unreadable_credentials();
    let f = Fakes::new(FakeReviewer::default(), lister);
    let (new, old) = re_enable();
    let refusal = f.decide(USER, "UPDATE", &ROOT, new, old).await.unwrap_err();
    assert!(refusal.contains("could not be read"), "{refusal}");
    assert!(
        f.decide(USER, "CREATE", &ROOT, user("bob", &[], false), Value::Null)
            .await
            .is_err()
    );
}
