//! Authentication, passwords and sessions: unauthenticated callers, must-change users, setting a password and revoking sessions.

use super::*;

#[tokio::test]
async fn a_must_change_user_may_only_ask_who_it_is_and_change_its_password() {
    let e = env();
    e.cast().await;
    e.seed("fresh", &["admin"], false, Some(&real_hash()), true).await;
    let t = token("fresh", e.clock.now_ts());
    for rpc in ALL_RPCS {
        if matches!(rpc, Rpc::WhoAmI | Rpc::ChangeOwnPassword) {
            continue;
        }
        assert_status(
            call(&e, rpc, "fresh").await,
            Code::PermissionDenied,
            "change your password first",
        );
    }
    let me = e
        .api
        .who_am_i(req(&t, WhoAmIRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert!(me.must_change);
    assert_eq!(
        (me.name.as_str(), me.roles.as_slice()),
        ("fresh", &["admin".to_owned()][..])
    );
    // A wrong old password is refused and changes nothing.
    assert_status(
        e.api
            .change_own_password(req(
                &t,
                ChangeOwnPasswordRequest {
                    old_password: "not the password".into(),
                    new_password: "fresh and new password".into(),
                    code: String::new(),
                },
            ))
            .await,
        Code::InvalidArgument,
        "old_password: does not match your current password",
    );
    assert!(e.entry("fresh").await.unwrap().must_change);
    e.clock.set(t0() + SignedDuration::from_secs(30));
    e.api
        .change_own_password(req(
            &t,
            ChangeOwnPasswordRequest {
                old_password: PASSWORD.into(),
                new_password: "fresh and new password".into(),
                code: String::new(),
            },
        ))
        .await
        .unwrap();
    let entry = e.entry("fresh").await.unwrap();
    assert!(!entry.must_change);
    assert_eq!(entry.not_before, t0() + SignedDuration::from_secs(30));
    assert!(
        verify_password(&Password::new("fresh and new password"), &entry.hash)
            .unwrap()
            .is_valid()
    );
    // The old token was issued before the change: revoked. A new sign-in works for everything.
    assert_status(
        e.api.who_am_i(req(&t, WhoAmIRequest {})).await,
        Code::Unauthenticated,
        "revoked",
    );
    assert!(call(&e, Rpc::ListUsers, "fresh").await.is_ok());
}

#[tokio::test]
async fn set_password_sets_must_change_and_ends_every_session() {
    let e = env();
    e.cast().await;
    let with_family = e
        .entry("view")
        .await
        .unwrap()
        .start_family(
            "fam1",
            "ichor-cli",
            "ichor-kube",
            t0(),
            SignedDuration::from_hours(12),
        )
        .unwrap();
    e.put_entry("view", Some(&with_family)).await;
    let viewer_token = token("view", e.clock.now_ts());
    e.clock.set(t0() + SignedDuration::from_secs(5));
    let response = e
        .api
        .set_password(req(
            &token("admin", e.clock.now_ts()),
            SetPasswordRequest {
                name: "view".into(),
                new_password: Some(NewPassword::Generate(true)),
                reset_factors: false,
            },
        ))
        .await
        .unwrap()
        .into_inner();
    let entry = e.entry("view").await.unwrap();
    assert!(entry.must_change);
    assert!(entry.families.is_empty());
    assert_eq!(entry.not_before, t0() + SignedDuration::from_secs(5));
    assert!(
        verify_password(&Password::new(response.generated_password.clone()), &entry.hash)
            .unwrap()
            .is_valid()
    );
    assert!(!format!("{response:?}").contains(&response.generated_password));
    assert_status(
        e.api.who_am_i(req(&viewer_token, WhoAmIRequest {})).await,
        Code::Unauthenticated,
        "revoked",
    );
}

#[tokio::test]
async fn revoke_sessions_refuses_tokens_issued_before_it() {
    let e = env();
    e.cast().await;
    let before = token("view", e.clock.now_ts());
    e.clock.set(t0() + SignedDuration::from_secs(60));
    e.api
        .revoke_sessions(req(
            &token("admin", e.clock.now_ts()),
            RevokeSessionsRequest { name: "view".into() },
        ))
        .await
        .unwrap();
    assert_eq!(
        e.entry("view").await.unwrap().not_before,
        t0() + SignedDuration::from_secs(60)
    );
    assert_status(
        e.api.who_am_i(req(&before, WhoAmIRequest {})).await,
        Code::Unauthenticated,
        "revoked",
    );
    // Issued in the same second as the revocation: accepted (whole seconds, refused only when earlier).
    let after = token("view", e.clock.now_ts());
    assert!(e.api.who_am_i(req(&after, WhoAmIRequest {})).await.is_ok());
}

#[tokio::test]
async fn unauthenticated_callers_are_refused() {
    let e = env();
    e.cast().await;
    e.seed("off", &["admin"], true, Some(DUMMY_PHC), false).await;
    e.seed("nopass", &["admin"], false, None, false).await;
    let now = e.clock.now_ts();
    let no_header = e.api.who_am_i(tonic::Request::new(WhoAmIRequest {})).await;
    assert_status(no_header, Code::Unauthenticated, "no bearer token");
    let mut basic = tonic::Request::new(WhoAmIRequest {});
    basic
        .metadata_mut()
        .insert("authorization", "Basic YWRtaW4=".parse().unwrap());
    assert_status(
        e.api.who_am_i(basic).await,
        Code::Unauthenticated,
        "no bearer token",
    );
    assert_status(
        e.api.who_am_i(req("bad", WhoAmIRequest {})).await,
        Code::Unauthenticated,
        "not valid",
    );
    let old = token("admin", now - SignedDuration::from_mins(10));
    assert_status(
        e.api.who_am_i(req(&old, WhoAmIRequest {})).await,
        Code::Unauthenticated,
        "expired",
    );
    for (user, message) in [
        ("ghost", "does not exist or is disabled"),
        ("off", "does not exist or is disabled"),
        ("nopass", "has no password set"),
    ] {
        assert_status(
            e.api
                .list_users(req(&token(user, now), ListUsersRequest {}))
                .await,
            Code::Unauthenticated,
            message,
        );
    }
}
