//! A disabled or demoted admin undoing it with `kubectl`: admins alice and mallory; alice
//! disables mallory (or takes its admin role away) through the API, which ends mallory's
//! sessions, but mallory's kubectl ID token stays valid at the kube-apiserver until it expires and
//! still carries group `ichor:admin`. Within that window mallory patches itself back
//! (`spec.disabled: false`, or its roles back to admin), or uses the token's admin group to make
//! another admin. The webhook judges an Ichor requester by its live `IchorUser`: a requester that
//! is disabled, being deleted or gone is refused, and its roles are the token's groups that its
//! `IchorUser` still holds. A cache that cannot be trusted refuses.

use ichor_controller::admission::fixtures::{FakeLister, FakeReviewer, ROOT, Who, user, user_object};
use ichor_controller::admission::users::KIND as USER;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

use crate::admission::Fakes;

const MALLORY: Who<'static> = Who {
    user: "ichor:mallory",
    groups: &["ichor:admin", "system:authenticated"],
};

#[tokio::test]
async fn a_disabled_or_demoted_admin_cannot_restore_itself_with_its_remaining_kube_token() {
    // Disabled: it may not re-enable itself, nor make another admin.
    let f = Fakes::listing(&[("root", &["admin"], false), ("mallory", &["admin"], true)]);
    let back = user("mallory", &["admin"], false);
    let old = user("mallory", &["admin"], true);
    let refused = f.decide(USER, "UPDATE", &MALLORY, back, old).await.unwrap_err();
    assert!(refused.contains("\"mallory\" is disabled"), "{refused}");
    let accomplice = user("eve", &["admin"], false);
    let refused = f
        .decide(USER, "CREATE", &MALLORY, accomplice, Value::Null)
        .await
        .unwrap_err();
    assert!(refused.contains("\"mallory\" is disabled"), "{refused}");

    // Demoted to viewer: its token's admin group no longer counts (and its token names no
    // viewer group: it holds nothing at all).
    let f = Fakes::listing(&[("root", &["admin"], false), ("mallory", &["viewer"], false)]);
    let back = user("mallory", &["viewer", "admin"], false);
    let old = user("mallory", &["viewer"], false);
    assert_eq!(
        f.decide(USER, "UPDATE", &MALLORY, back, old).await,
        Err("spec.roles: you may not grant role \"admin\": you hold no built-in role".to_owned())
    );
    let demote_root = user("root", &["viewer"], false);
    assert!(
        f.decide(
            USER,
            "UPDATE",
            &MALLORY,
            demote_root,
            user("root", &["admin"], false)
        )
        .await
        .is_err(),
        "a demoted admin may not act on an admin"
    );

    // Deleted, or being deleted: nothing.
    let mut terminating = user_object("mallory", &["admin"], false);
    terminating.metadata.deletion_timestamp = Some(Time("2026-11-29T10:00:00Z".parse().unwrap()));
    for lister in [
        FakeLister::with(&[("root", &["admin"], false)]),
        FakeLister::of(vec![user_object("root", &["admin"], false), terminating]),
    ] {
        let f = Fakes::new(FakeReviewer::default(), lister);
        let accomplice = user("eve", &["admin"], false);
        assert!(
            f.decide(USER, "CREATE", &MALLORY, accomplice, Value::Null)
                .await
                .is_err()
        );
    }
}

#[tokio::test]
async fn an_enabled_admin_still_acts_and_an_untrusted_cache_refuses_ichor_requesters() {
    let f = Fakes::listing(&[("root", &["admin"], false), ("mallory", &["admin"], false)]);
    let eve = || user("eve", &["admin"], false);
    assert_eq!(
        f.decide(USER, "CREATE", &MALLORY, eve(), Value::Null).await,
        Ok(())
    );
    // A write judged on no role (a display name) looks the requester up in the cache, which
    // refuses while it cannot be trusted; one judged on roles reads it fresh instead
    // (`demoted_admin_re_promotes_itself_within_the_cache_lag`).
    let f = Fakes::new(FakeReviewer::default(), FakeLister::failing());
    let mut renamed = eve();
    renamed["spec"]["displayName"] = "Eve".into();
    let refused = f.decide(USER, "UPDATE", &ROOT, renamed, eve()).await.unwrap_err();
    assert!(refused.contains("refused until it can be checked"), "{refused}");
}
