//! The `UserService` over the cluster backend: a create writes the user as the caller, then its credentials entry, and deletes the user again when that write fails.

use super::*;

fn admin_entry() -> CredentialsEntry {
    CredentialsEntry::new(
        api_common::real_hash(),
        t0() - jiff::SignedDuration::from_hours(1),
        false,
    )
}

fn create_request(name: &str) -> tonic::Request<CreateUserRequest> {
    let mut request = tonic::Request::new(CreateUserRequest {
        name: name.into(),
        display_name: String::new(),
        email: String::new(),
        roles: vec!["viewer".into()],
        disabled: false,
        initial_password: Some(InitialPassword::Password("a long enough password".into())),
    });
    let token = format!("alice@{}", t0().as_second());
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    request
}

#[tokio::test]
async fn the_service_creates_the_user_as_the_caller_then_its_credentials_entry() {
    use ichor_issuer::api::proto::user_service_server::UserService as _;
    let mut s = State::default();
    s.add_user("alice", &["admin"]);
    s.set_entry("alice", &admin_entry());
    let state = shared(s);
    let (api, _, _) = build_api(Arc::new(store(&state)), None);
    let created = api.create_user(create_request("bob")).await.unwrap().into_inner();
    assert_eq!(created.user.unwrap().name, "bob");
    let state = state.lock().unwrap();
    assert!(state.users.contains_key("bob"));
    assert!(state.secret.as_ref().unwrap().contains_key("bob"));
    let post = state.seen.iter().find(|s| s.method == Method::POST).unwrap();
    assert_as_alice_the_admin(post);
    // Nothing of the password reaches an IchorUser write.
    for seen in state.seen.iter().filter(|s| s.path.starts_with(USERS_PATH)) {
        let text = seen.body.as_ref().map(Value::to_string).unwrap_or_default();
        assert!(!text.contains("password") && !text.contains("argon2"), "{text}");
    }
}

#[tokio::test]
async fn a_create_whose_credentials_write_fails_deletes_the_user_again_as_the_caller() {
    use ichor_issuer::api::proto::user_service_server::UserService as _;
    let mut s = State::default();
    s.add_user("alice", &["admin"]);
    s.set_entry("alice", &admin_entry());
    s.fail_secret_writes = true;
    let state = shared(s);
    let (api, _, _) = build_api(Arc::new(store(&state)), None);
    let err = api.create_user(create_request("bob")).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    let state = state.lock().unwrap();
    assert!(
        !state.users.contains_key("bob"),
        "the user object was left behind"
    );
    assert!(!state.secret.as_ref().unwrap().contains_key("bob"));
    let undo = state.seen.iter().find(|s| s.method == Method::DELETE).unwrap();
    assert_eq!(undo.path, format!("{USERS_PATH}/bob"));
    assert_eq!(
        undo.body
            .as_ref()
            .and_then(|b| b["preconditions"]["uid"].as_str()),
        Some("uid-bob"),
        "the undo is conditioned on the created object's uid: {:?}",
        undo.body
    );
    assert_as_alice_the_admin(undo);
}
