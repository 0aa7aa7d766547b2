//! The cluster `UserBackend` on its own: the impersonated writes and their bodies, conflicts and their retry, a webhook's denial, an unreachable apiserver.

use super::*;

#[tokio::test]
async fn creates_the_user_as_the_caller_with_a_body_of_metadata_and_spec_only() {
    let state = shared(State::default());
    let store = store(&state);
    store
        .create_user(
            &caller("alice", &["admin"]),
            &user("bob", &["operator", "viewer"]),
        )
        .await
        .unwrap();
    let writes = writes(&state);
    assert_eq!(writes.len(), 1);
    let post = &writes[0];
    assert_eq!(
        (post.method.clone(), post.path.as_str()),
        (Method::POST, USERS_PATH)
    );
    assert_as_alice_the_admin(post);
    assert!(post.query.contains("fieldManager=ichor-issuer"), "{}", post.query);
    assert_eq!(
        post.body.as_ref().unwrap(),
        &json!({
            "apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
            "metadata": {"name": "bob", "namespace": "ichor-system"},
            "spec": {"displayName": "bob display", "roles": ["operator", "viewer"], "disabled": false},
        })
    );
    let bob = store.get_user("bob").await.unwrap().unwrap();
    assert_eq!(bob.roles, ["operator", "viewer"]);
}

#[tokio::test]
async fn a_caller_with_several_roles_is_impersonated_with_each_group_and_no_system_group() {
    let state = shared(State::default());
    store(&state)
        .create_user(
            &caller("carol", &["operator", "auditor"]),
            &user("dave", &["viewer"]),
        )
        .await
        .unwrap();
    let post = &writes(&state)[0];
    assert_eq!(post.user.as_deref(), Some("ichor:carol"));
    assert_eq!(post.groups, ["ichor:operator", "ichor:auditor"]);
}

#[tokio::test]
async fn an_update_reads_then_replaces_the_spec_with_the_read_resource_version_as_the_caller() {
    let mut s = State::default();
    s.add_user("bob", &["viewer"]);
    let state = shared(s);
    let read_version = state.lock().unwrap().users["bob"]["metadata"]["resourceVersion"].clone();
    store(&state)
        .update_user(&caller("alice", &["admin"]), &user("bob", &["operator"]))
        .await
        .unwrap();
    let seen = state.lock().unwrap().seen.clone();
    let get = &seen[0];
    assert_eq!(get.method, Method::GET);
    assert_eq!(get.user, None, "the read is the issuer's own");
    let put = &seen[1];
    assert_eq!(
        (put.method.clone(), put.path.as_str()),
        (Method::PUT, &*format!("{USERS_PATH}/bob"))
    );
    assert_as_alice_the_admin(put);
    assert!(put.query.contains("fieldManager=ichor-issuer"), "{}", put.query);
    let body = put.body.as_ref().unwrap();
    assert_eq!(body["metadata"]["resourceVersion"], read_version);
    assert_eq!(body["metadata"]["labels"], json!({"team": "platform"}));
    assert!(body.get("status").is_none(), "{body}");
    assert!(body["metadata"].get("managedFields").is_none(), "{body}");
    assert_eq!(
        body["spec"],
        json!({"displayName": "bob display", "roles": ["operator"], "disabled": false})
    );
    assert_eq!(
        state.lock().unwrap().users["bob"]["spec"]["roles"],
        json!(["operator"])
    );
}

#[tokio::test]
async fn an_update_that_conflicts_is_retried_from_a_fresh_read() {
    let mut s = State::default();
    s.add_user("bob", &["viewer"]);
    s.conflicting_puts = 2;
    let state = shared(s);
    store(&state)
        .update_user(&caller("alice", &["admin"]), &user("bob", &["operator"]))
        .await
        .unwrap();
    let seen = state.lock().unwrap().seen.clone();
    let methods: Vec<Method> = seen.iter().map(|s| s.method.clone()).collect();
    assert_eq!(
        methods,
        [
            Method::GET,
            Method::PUT,
            Method::GET,
            Method::PUT,
            Method::GET,
            Method::PUT
        ]
    );
    // Each replace carries the version of the read just before it.
    assert_ne!(
        seen[1].body.as_ref().unwrap()["metadata"]["resourceVersion"],
        seen[5].body.as_ref().unwrap()["metadata"]["resourceVersion"]
    );
    assert_eq!(
        state.lock().unwrap().users["bob"]["spec"]["roles"],
        json!(["operator"])
    );
}

#[tokio::test]
async fn an_update_that_keeps_conflicting_gives_up_as_a_conflict() {
    let mut s = State::default();
    s.add_user("bob", &["viewer"]);
    s.conflicting_puts = 100;
    let state = shared(s);
    let err = store(&state)
        .update_user(&caller("alice", &["admin"]), &user("bob", &["operator"]))
        .await
        .unwrap_err();
    assert!(matches!(err, ApiError::Conflict(_)), "{err}");
    assert_eq!(err.code(), Code::Aborted);
    assert_eq!(writes(&state).len(), MAX_UPDATE_ATTEMPTS);
    assert_eq!(
        state.lock().unwrap().users["bob"]["spec"]["roles"],
        json!(["viewer"])
    );
}

#[tokio::test]
async fn a_webhook_denial_is_permission_denied_carrying_the_webhooks_sentence() {
    let sentence = check_grant(&["operator".to_owned()], &[] as &[&str], &["admin".to_owned()])
        .unwrap_err()
        .to_string();
    let message = format!("admission webhook \"vichoruser-v1alpha1.kb.io\" denied the request: {sentence}");
    let mut s = State::default();
    s.scripted.push_back(status(403, "Forbidden", &message));
    let state = shared(s);
    let err = store(&state)
        .create_user(&caller("alice", &["operator"]), &user("eve", &["admin"]))
        .await
        .unwrap_err();
    assert!(matches!(&err, ApiError::Denied(m) if *m == message), "{err}");
    let grpc: tonic::Status = err.into();
    assert_eq!(grpc.code(), Code::PermissionDenied);
    assert!(grpc.message().contains(&sentence), "{}", grpc.message());
}

#[tokio::test]
async fn an_unreachable_or_failing_apiserver_is_unavailable() {
    let mut s = State::default();
    s.scripted
        .push_back(status(503, "ServiceUnavailable", "etcd is down"));
    let state = shared(s);
    let err = store(&state)
        .create_user(&caller("alice", &["admin"]), &user("bob", &["viewer"]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err}");
}
