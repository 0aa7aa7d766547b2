//! Creating a user: the generated password shown once, failed creates that leave nothing behind, and bad requests refused before anything is written.

use super::*;

#[tokio::test]
async fn create_returns_the_user_and_a_generated_password_once_that_must_be_changed() {
    let e = env();
    e.cast().await;
    let t = token("admin", e.clock.now_ts());
    let response = e
        .api
        .create_user(req(
            &t,
            CreateUserRequest {
                name: "carol".into(),
                display_name: "Carol".into(),
                email: "carol@example.com".into(),
                roles: vec!["operator".into()],
                disabled: false,
                initial_password: Some(InitialPassword::GeneratePassword(true)),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    let user = response.user.clone().unwrap();
    assert_eq!(
        (user.name.as_str(), user.roles.as_slice()),
        ("carol", &["operator".to_owned()][..])
    );
    assert!(user.password_set && user.must_change);
    assert_eq!(response.generated_password.len(), 24);
    assert!(
        !format!("{response:?}").contains(&response.generated_password),
        "Debug leaks the password"
    );
    let entry = e.entry("carol").await.unwrap();
    assert!(entry.must_change);
    let password = Password::new(response.generated_password.clone());
    assert!(verify_password(&password, &entry.hash).unwrap().is_valid());
    let stored = e.user("carol").await.unwrap();
    assert_eq!(stored.email.as_deref(), Some("carol@example.com"));
    // Again: it exists now.
    let again = e
        .api
        .create_user(req(
            &t,
            CreateUserRequest {
                name: "carol".into(),
                ..Default::default()
            },
        ))
        .await;
    assert_status(again, Code::AlreadyExists, "carol");
}

#[tokio::test]
async fn a_failed_create_leaves_neither_the_user_file_nor_a_credentials_entry() {
    let e = env();
    e.cast().await;
    let failing = Arc::new(FailingCredentials(local_store(&e.dir)));
    let (api, clock, _) = build_api(failing, None);
    let result = api
        .create_user(req(
            &token("admin", clock.now_ts()),
            CreateUserRequest {
                name: "dave".into(),
                roles: vec!["viewer".into()],
                initial_password: Some(InitialPassword::Password("dave's first password".into())),
                ..Default::default()
            },
        ))
        .await;
    assert_status(result, Code::Unavailable, "injected failure");
    assert!(e.user("dave").await.is_none(), "the user file was left behind");
    assert!(!e.dir.path().join("users/dave.yaml").exists());
    assert!(
        e.entry("dave").await.is_none(),
        "a credentials entry was left behind"
    );
}

#[tokio::test]
async fn create_without_a_password_removes_a_stale_entry_of_an_earlier_user_of_that_name() {
    let e = env();
    e.cast().await;
    e.put_entry(
        "ghost",
        Some(&CredentialsEntry::new(DUMMY_PHC.into(), t0(), false)),
    )
    .await;
    e.api
        .create_user(req(
            &token("admin", e.clock.now_ts()),
            CreateUserRequest {
                name: "ghost".into(),
                ..Default::default()
            },
        ))
        .await
        .unwrap();
    assert!(e.entry("ghost").await.is_none());
    assert!(!e.user("ghost").await.unwrap().disabled);
}

#[tokio::test]
async fn bad_requests_are_refused_naming_the_field_before_anything_is_written() {
    let e = env();
    e.cast().await;
    let t = token("admin", e.clock.now_ts());
    let create = |r: CreateUserRequest| e.api.create_user(req(&t, r));
    let named = |name: &str| CreateUserRequest {
        name: name.into(),
        ..Default::default()
    };
    assert_status(
        create(named("")).await,
        Code::InvalidArgument,
        "name: is required",
    );
    assert_status(
        create(named("Bad_Name")).await,
        Code::InvalidArgument,
        "name: user name \"Bad_Name\"",
    );
    assert_status(
        create(named(&"a".repeat(64))).await,
        Code::InvalidArgument,
        "at most 63",
    );
    assert_status(
        create(CreateUserRequest {
            roles: vec!["viewer".into(), "Root".into()],
            ..named("eve")
        })
        .await,
        Code::InvalidArgument,
        "roles[1]: \"Root\" is not a valid role name",
    );
    assert_status(
        create(CreateUserRequest {
            display_name: "d".repeat(257),
            ..named("eve")
        })
        .await,
        Code::InvalidArgument,
        "display_name: is 257 bytes, at most 256",
    );
    assert_status(
        create(CreateUserRequest {
            email: "e".repeat(255),
            ..named("eve")
        })
        .await,
        Code::InvalidArgument,
        "email: is 255 bytes, at most 254",
    );
    for (len, message) in [
        (11, "password: must be at least 12 bytes (got 11)"),
        (129, "password: must be at most 128 bytes (got 129)"),
    ] {
        assert_status(
            create(CreateUserRequest {
                initial_password: Some(InitialPassword::Password("p".repeat(len))),
                ..named("eve")
            })
            .await,
            Code::InvalidArgument,
            message,
        );
        assert_status(
            e.api
                .set_password(req(
                    &t,
                    SetPasswordRequest {
                        name: "target".into(),
                        new_password: Some(NewPassword::Password("p".repeat(len))),
                        reset_factors: false,
                    },
                ))
                .await,
            Code::InvalidArgument,
            message,
        );
        assert_status(
            e.api
                .change_own_password(req(
                    &t,
                    ChangeOwnPasswordRequest {
                        old_password: PASSWORD.into(),
                        new_password: "p".repeat(len),
                        code: String::new(),
                    },
                ))
                .await,
            Code::InvalidArgument,
            &format!("new_{message}"),
        );
    }
    assert_status(
        e.api
            .set_password(req(
                &t,
                SetPasswordRequest {
                    name: "target".into(),
                    new_password: None,
                    reset_factors: false,
                },
            ))
            .await,
        Code::InvalidArgument,
        "new_password: give a password or set generate: true",
    );
    assert_status(
        e.api
            .update_user(req(
                &t,
                UpdateUserRequest {
                    name: "target".into(),
                    email: Some("a b@example.com".into()),
                    ..Default::default()
                },
            ))
            .await,
        Code::InvalidArgument,
        "email: must not contain spaces",
    );
    assert_status(
        e.api
            .get_my_kubeconfig(req(
                &t,
                GetMyKubeconfigRequest {
                    ca_file: "/tmp/x\n".into(),
                },
            ))
            .await,
        Code::InvalidArgument,
        "ca_file: must not contain control characters",
    );
    assert_status(
        e.api
            .change_own_password(req(
                &t,
                ChangeOwnPasswordRequest {
                    old_password: String::new(),
                    new_password: "long enough password".into(),
                    code: String::new(),
                },
            ))
            .await,
        Code::InvalidArgument,
        "old_password: is required",
    );
    assert_status(
        e.api
            .get_user(req(&t, GetUserRequest { name: "zed".into() }))
            .await,
        Code::NotFound,
        "\"zed\" does not exist",
    );
    assert!(e.user("eve").await.is_none());
    assert_eq!(e.entry("target").await.unwrap().hash, DUMMY_PHC);
}
