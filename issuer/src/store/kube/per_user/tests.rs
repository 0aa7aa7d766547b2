//! The per-user Secret's requests and how its refusals map to store errors.

use ichor_renderers::contract::{
    CREDENTIALS_NAMESPACE, USER_CREDENTIALS_PREFIX, user_credentials_secret, user_of_credentials_secret,
};
use kube::core::{Request, Status};
use serde_json::json;

use super::*;

/// A refusal as the API server answers it.
fn refused(code: u16, reason: &str, causes: &[(&str, &str)]) -> kube::Error {
    let causes: Vec<_> = causes
        .iter()
        .map(|(reason, field)| json!({"reason": reason, "message": "refused", "field": field}))
        .collect();
    let status: Status = serde_json::from_value(json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "secrets \"ichor-user-alice\" refused", "reason": reason,
        "details": {"name": "ichor-user-alice", "kind": "secrets", "causes": causes},
        "code": code
    }))
    .expect("a Status");
    kube::Error::Api(Box::new(status))
}

fn requests() -> Request {
    Request::new(format!("/api/v1/namespaces/{CREDENTIALS_NAMESPACE}/secrets"))
}

fn is_conflict(err: &StoreError) -> bool {
    matches!(err, StoreError::Conflict(u) if u == "alice")
}

#[test]
fn secret_name_is_the_prefix_and_the_user_name_and_round_trips() {
    assert_eq!(user_credentials_secret("alice"), "ichor-user-alice");
    assert_eq!(user_of_credentials_secret("ichor-user-alice"), Some("alice"));
    assert_eq!(secret_ref("alice"), "Secret ichor-credentials/ichor-user-alice");
    // The version names the object read, and only a version of this layout parses.
    let v = version("0b1c2d3e-0000-4000-8000-000000000001", "4711");
    assert_eq!(v.0, "user@0b1c2d3e-0000-4000-8000-000000000001@4711");
    assert_eq!(
        parse_version(&v),
        Some((
            "0b1c2d3e-0000-4000-8000-000000000001".to_owned(),
            "4711".to_owned()
        ))
    );
    for other in [
        "user@",
        "user@uid@",
        "user@@12",
        "user@uid",
        "user@a@b@c",
        "absent@12",
        "entry:QQ==",
        NO_ENTRY_VERSION,
    ] {
        assert_eq!(parse_version(&Version(other.to_owned())), None, "{other}");
    }
}

#[test]
fn a_63_character_user_name_gives_a_valid_secret_name() {
    let longest = "a".repeat(63);
    let name = user_credentials_secret(&longest);
    assert_eq!(name.len(), USER_CREDENTIALS_PREFIX.len() + 63);
    // A DNS subdomain as Kubernetes checks a Secret's name (IsDNS1123Subdomain): at most 253
    // characters of `[a-z0-9]([-a-z0-9]*[a-z0-9])?` separated by dots; no limit per label.
    assert_eq!(name.len(), 74);
    assert!(name.len() <= 253);
    assert!(
        name.split('.').all(|label| !label.is_empty()
            && label
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-')),
        "{name}"
    );
    assert_eq!(user_of_credentials_secret(&name), Some(longest.as_str()));
    let body = new_secret(&longest, "QQ==");
    assert_eq!(body["metadata"]["name"], name.as_str());
    assert_eq!(
        body["metadata"]["labels"][USER_LABEL],
        longest.as_str(),
        "a label value of 63 characters is valid"
    );
}

#[test]
fn a_write_carries_the_resource_version_and_a_409_is_a_conflict() {
    let patch = change_patch("4711", "Qg==");
    assert_eq!(
        patch,
        json!({"metadata": {"resourceVersion": "4711"}, "data": {"entry": "Qg=="}})
    );
    let request = requests()
        .patch(
            "ichor-user-alice",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .unwrap();
    assert_eq!(request.method(), http::Method::PATCH);
    assert_eq!(
        request.uri().path(),
        "/api/v1/namespaces/ichor-credentials/secrets/ichor-user-alice"
    );
    assert_eq!(
        request.headers()[http::header::CONTENT_TYPE],
        "application/merge-patch+json"
    );
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(request.body()).unwrap(),
        patch
    );
    assert!(is_conflict(&error(
        &refused(409, "Conflict", &[]),
        "alice",
        Call::Change
    )));
    // Deleted since the read: a conflict too, retried from a fresh read.
    assert!(is_conflict(&error(
        &refused(404, "NotFound", &[]),
        "alice",
        Call::Change
    )));
    // A read's refusal is no conflict.
    let err = error(&refused(403, "Forbidden", &[]), "alice", Call::Read);
    assert!(
        matches!(&err, StoreError::Unavailable(m) if m.contains("403") && m.contains("ichor-user-alice")),
        "{err}"
    );
}

#[test]
fn a_first_entry_is_a_create_and_already_exists_is_a_conflict() {
    let body = new_secret("alice", "QQ==");
    assert_eq!(
        body,
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "ichor-user-alice", "namespace": "ichor-credentials",
                         "labels": {"ichor.maesh.dev/user": "alice", "app.kubernetes.io/part-of": "ichor"}},
            "type": "ichor.maesh.dev/user-credentials",
            "data": {"entry": "QQ=="},
        })
    );
    assert!(is_conflict(&error(
        &refused(409, "AlreadyExists", &[]),
        "alice",
        Call::Create
    )));
    // No namespace to create it in: missing, naming what creates it.
    let err = error(&refused(404, "NotFound", &[]), "alice", Call::Create);
    assert!(
        matches!(&err, StoreError::Missing(m) if m.contains("ichor-credentials") && m.contains("ichor init")),
        "{err}"
    );
}

#[test]
fn a_removal_is_a_delete_with_uid_and_resource_version_preconditions() {
    let request = requests()
        .delete("ichor-user-alice", &delete_params("uid-1", "4711"))
        .unwrap();
    assert_eq!(request.method(), http::Method::DELETE);
    assert_eq!(
        request.uri().path(),
        "/api/v1/namespaces/ichor-credentials/secrets/ichor-user-alice"
    );
    let body: serde_json::Value = serde_json::from_slice(request.body()).unwrap();
    assert_eq!(
        body["preconditions"],
        json!({"uid": "uid-1", "resourceVersion": "4711"})
    );
    assert!(is_conflict(&error(
        &refused(409, "Conflict", &[]),
        "alice",
        Call::Delete
    )));
    // Someone else removed it after our read.
    assert!(is_conflict(&error(
        &refused(404, "NotFound", &[]),
        "alice",
        Call::Delete
    )));
    let err = error(&refused(500, "InternalError", &[]), "alice", Call::Delete);
    assert!(
        matches!(&err, StoreError::Unavailable(m) if m.contains("500")),
        "{err}"
    );
}

#[test]
fn a_too_long_entry_is_full() {
    for call in [Call::Create, Call::Change] {
        let err = error(
            &refused(422, "Invalid", &[("FieldValueTooLong", "data")]),
            "alice",
            call,
        );
        let StoreError::Full(message) = &err else {
            panic!("not full: {err}");
        };
        for part in [
            "ichor-credentials/ichor-user-alice",
            "1048576",
            "nothing was written",
            "end unused sessions",
        ] {
            assert!(message.contains(part), "{part:?} missing from {message}");
        }
    }
    // Another 422 (an admission policy's refusal) is no full store and no conflict.
    let err = error(
        &refused(422, "Invalid", &[("FieldValueInvalid", "type")]),
        "alice",
        Call::Create,
    );
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
}

#[test]
fn a_read_takes_the_entry_and_refuses_a_secret_of_another_type() {
    let secret = |type_: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "type": type_,
               "metadata": {"name": "ichor-user-alice", "uid": "uid-1", "resourceVersion": "12"},
               "data": {"entry": "eyJ2IjoxfQ=="}})
        .to_string()
    };
    let read = parse("alice", &secret(USER_CREDENTIALS_TYPE)).unwrap();
    assert_eq!(
        read,
        UserSecret {
            uid: "uid-1".into(),
            resource_version: "12".into(),
            entry: Some(br#"{"v":1}"#.to_vec())
        }
    );
    let err = parse("alice", &secret("Opaque")).unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt { user, .. } if user == "alice"),
        "{err}"
    );
    assert!(!err.to_string().contains("eyJ2"), "{err}");
    // Unparseable: the position, never the content.
    let err = parse("alice", r#"{"data": {"entry": "SECRETVALUE"#).unwrap_err();
    assert!(
        matches!(&err, StoreError::Unavailable(m) if !m.contains("SECRETVALUE")),
        "{err}"
    );
}
