//! What a token alone may not do to second factors: an administrator stripping their own
//! factors without the password, a token of a sign-in without the factor acting for a user who
//! has one, and a user the policy requires to enrol doing anything but enrol.

use super::factors::{enrol, reset};
use super::*;
use ichor_testkit::issuer::harness::settings_with_second_factor;

#[tokio::test]
async fn an_administrator_may_not_reset_their_own_factors_with_a_token_alone() {
    let e = env();
    e.cast().await;
    enrol(&e, "admin").await;
    e.clock.advance(SignedDuration::from_secs(1));
    assert_status(
        reset(&e, "admin", "admin", Some(NewPassword::Generate(true))).await,
        Code::PermissionDenied,
        "you may not reset your own second factors",
    );
    assert!(
        e.entry("admin").await.unwrap().factors.totp.is_some(),
        "the factor stays"
    );
}

/// A stolen administrator's token would otherwise lock its owner out by setting the owner's own
/// password (given or generated), which `ChangeOwnPassword` guards with the current password and a
/// code of the factor; another administrator still may.
#[tokio::test]
async fn an_administrator_may_not_set_their_own_password_with_a_token_alone() {
    let e = env();
    e.cast().await;
    e.seed("admin2", &["admin"], false, Some(&real_hash()), false)
        .await;
    enrol(&e, "admin").await;
    e.clock.advance(SignedDuration::from_secs(1));
    let before = e.entry("admin").await.unwrap();
    let set = |caller: &'static str, new_password: NewPassword| {
        let t = token(caller, e.clock.now_ts());
        e.api.set_password(req(
            &t,
            SetPasswordRequest {
                name: "admin".into(),
                new_password: Some(new_password),
                reset_factors: false,
            },
        ))
    };
    for new_password in [
        NewPassword::Password("the thief's own password, 42".into()),
        NewPassword::Generate(true),
    ] {
        assert_status(
            set("admin", new_password).await,
            Code::PermissionDenied,
            "you may not set your own password",
        );
    }
    assert!(e.entry("admin").await.unwrap() == before, "the password stays");
    set("admin2", NewPassword::Generate(true))
        .await
        .expect("another administrator sets it");
    assert!(e.entry("admin").await.unwrap().hash != before.hash);
}

#[tokio::test]
async fn a_token_of_a_sign_in_without_the_factor_acts_as_nobody_for_a_user_who_has_one() {
    let e = env();
    e.cast().await;
    enrol(&e, "view").await;
    e.clock.advance(SignedDuration::from_secs(1));
    let now = e.clock.now_ts().as_second();
    // A token that says the password alone (issued after the enrolment: a replica that skipped
    // the step, or a forged claim set would look like this).
    let password_only = format!("view@{now}@@pwd");
    assert_status(
        e.api
            .list_own_factors(req(&password_only, ListOwnFactorsRequest {}))
            .await,
        Code::Unauthenticated,
        "without the user's second factor",
    );
    assert_status(
        e.api.who_am_i(req(&password_only, WhoAmIRequest {})).await,
        Code::Unauthenticated,
        "sign in again",
    );
    // The same user's token of a sign-in with the factor is served.
    let with_factor = format!("view@{now}@@pwd,otp,mfa");
    e.api
        .list_own_factors(req(&with_factor, ListOwnFactorsRequest {}))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_user_the_policy_requires_to_enrol_may_only_enrol() {
    let e = env();
    e.cast().await;
    e.config_settings.store(settings_with_second_factor(
        serde_json::json!({"roles": {"admin": "required"}}),
    ));
    let t = token("admin", e.clock.now_ts());
    // Anything else is refused, a user list as much as a password reset of another user.
    assert_status(
        e.api.list_users(req(&t, ListUsersRequest {})).await,
        Code::FailedPrecondition,
        "set up a second factor first",
    );
    assert_status(
        e.api
            .set_password(req(
                &t,
                SetPasswordRequest {
                    name: "view".into(),
                    new_password: Some(NewPassword::Generate(true)),
                    reset_factors: false,
                },
            ))
            .await,
        Code::FailedPrecondition,
        "set up a second factor first",
    );
    // Who they are (and that they must enrol), their factors, and the enrolment itself are open.
    let me = e
        .api
        .who_am_i(req(&t, WhoAmIRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert!(me.must_enrol, "{me:?}");
    assert_eq!(me.second_factor, "required");
    e.api
        .list_own_factors(req(&t, ListOwnFactorsRequest {}))
        .await
        .unwrap();
    enrol(&e, "admin").await;
    // Enrolled (the enrolment ended the old sessions): a new sign-in lists users again.
    e.clock.advance(SignedDuration::from_secs(1));
    let t = token("admin", e.clock.now_ts());
    e.api.list_users(req(&t, ListUsersRequest {})).await.unwrap();
    let me = e
        .api
        .who_am_i(req(&t, WhoAmIRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert!(!me.must_enrol, "{me:?}");
    assert_eq!(me.second_factor, "required");
    // A viewer, whom the policy leaves off, was never held: refused by RBAC, not by the policy.
    let v = token("view", e.clock.now_ts());
    let me = e
        .api
        .who_am_i(req(&v, WhoAmIRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((me.must_enrol, me.second_factor.as_str()), (false, "off"));
    assert_status(
        e.api.list_users(req(&v, ListUsersRequest {})).await,
        Code::PermissionDenied,
        "ichor:view may not list ichorusers",
    );
}
