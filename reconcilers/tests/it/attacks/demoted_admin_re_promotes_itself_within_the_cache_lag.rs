//! A demoted admin re-promoting itself in the moment the webhook's watch cache lags: admins alice
//! and bea; bea, expecting to be demoted, patches `spec.roles: ["admin"]` on itself in a tight
//! loop with its kubectl token (which carries `ichor:admin`; a no-op while it is admin). Alice's
//! demotion of bea to operator commits; bea's next patch reaches a webhook replica whose cache
//! still shows bea as an admin, so the token's admin group would still count, the grant passes,
//! and bea is an admin again. The same moment would let it remove another admin. A write judged
//! on the requester's roles, or of the requester itself, reads the requester from the
//! kube-apiserver, not the cache; a failed read refuses.

use ichor_controller::admission::fixtures::{FakeLister, FakeReviewer, Who, user};
use ichor_controller::admission::users::KIND as USER;
use serde_json::Value;

use crate::admission::Fakes;

const BEA: Who<'static> = Who {
    user: "ichor:bea",
    groups: &["ichor:admin", "system:authenticated"],
};

/// The cache still shows bea as an admin; the kube-apiserver holds her as an operator.
fn lagging_cache() -> FakeLister {
    FakeLister::stale(
        &[
            ("alice", &["admin"], false),
            ("bea", &["admin"], false),
            ("carl", &["admin"], false),
        ],
        &[
            ("alice", &["admin"], false),
            ("bea", &["operator"], false),
            ("carl", &["admin"], false),
        ],
    )
}

#[tokio::test]
async fn a_demoted_admin_cannot_re_promote_itself_while_the_cache_still_shows_it_as_admin() {
    let f = Fakes::new(FakeReviewer::default(), lagging_cache());
    // The apiserver's oldObject is bea as stored now: an operator.
    let again_admin = user("bea", &["admin"], false);
    let stored = user("bea", &["operator"], false);
    assert_eq!(
        f.decide(USER, "UPDATE", &BEA, again_admin, stored).await,
        Err("spec.roles: you may not grant role \"admin\": you hold no built-in role".to_owned())
    );
    assert_eq!(
        f.lister.requester_reads(),
        ["bea"],
        "read fresh, not from the cache"
    );
}

#[tokio::test]
async fn a_demoted_admin_cannot_make_or_remove_admins_while_the_cache_lags() {
    let f = Fakes::new(FakeReviewer::default(), lagging_cache());
    let accomplice = user("eve", &["admin"], false);
    assert!(
        f.decide(USER, "CREATE", &BEA, accomplice, Value::Null)
            .await
            .is_err(),
        "a demoted admin made an admin"
    );
    let carl = user("carl", &["admin"], false);
    let refused = f
        .decide(USER, "DELETE", &BEA, Value::Null, carl.clone())
        .await
        .unwrap_err();
    assert!(refused.contains("you may not delete user \"carl\""), "{refused}");
    let disabled = user("carl", &["admin"], true);
    let refused = f.decide(USER, "UPDATE", &BEA, disabled, carl).await.unwrap_err();
    assert!(refused.contains("you may not disable user \"carl\""), "{refused}");
}

#[tokio::test]
async fn a_failed_fresh_read_of_the_requester_refuses_and_a_text_edit_needs_none() {
    let f = Fakes::new(
        FakeReviewer::default(),
        lagging_cache().with_unreadable_requester(),
    );
    let refused = f
        .decide(
            USER,
            "UPDATE",
            &BEA,
            user("bea", &["admin"], false),
            user("bea", &["operator"], false),
        )
        .await
        .unwrap_err();
    assert!(
        refused.contains("could not be read to check the roles it holds now (the server is unavailable)"),
        "{refused}"
    );
    // An admin's display-name edit of another user is judged on no role: the cache answers.
    let alice = Who {
        user: "ichor:alice",
        groups: &["ichor:admin", "system:authenticated"],
    };
    let mut renamed = user("carl", &["admin"], false);
    renamed["spec"]["displayName"] = "Carl".into();
    assert_eq!(
        f.decide(USER, "UPDATE", &alice, renamed, user("carl", &["admin"], false))
            .await,
        Ok(())
    );
    assert_eq!(f.lister.requester_reads(), ["bea"]);
}
