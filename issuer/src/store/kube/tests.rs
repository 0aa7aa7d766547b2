//! How the API server's refusals of a credentials write map to store errors.

use kube::core::Status;
use serde_json::json;

use super::StoreError;
use super::legacy::secret_error;
use super::size::SecretSize;

/// A refusal as the API server answers it (`causes`: reason and field of each).
fn refused(code: u16, causes: &[(&str, &str)]) -> kube::Error {
    let causes: Vec<_> = causes
        .iter()
        .map(|(reason, field)| {
            json!({"reason": reason, "message": "Too long: may not be more than 1048576 bytes", "field": field})
        })
        .collect();
    let status: Status = serde_json::from_value(json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Secret \"ichor-user-credentials\" is invalid: data: Too long: may not be more than 1048576 bytes",
        "reason": "Invalid",
        "details": {"name": "ichor-user-credentials", "kind": "secrets", "causes": causes},
        "code": code
    }))
    .expect("a Status");
    kube::Error::Api(Box::new(status))
}

#[test]
fn a_write_refused_as_too_long_is_a_full_secret_that_says_what_to_do() {
    let size = SecretSize::default();
    size.record(1_048_000);
    let err = secret_error(
        &refused(422, &[("FieldValueTooLong", "data")]),
        Some("alice"),
        &size,
    );
    let StoreError::Full(message) = &err else {
        panic!("not full: {err}");
    };
    for part in [
        "ichor-system/ichor-user-credentials",
        "1048576",
        "it held 1048000",
        "nothing was written",
        "end unused sessions",
        "docs/credentials-sharding.md",
    ] {
        assert!(message.contains(part), "{part:?} missing from {message}");
    }
    // Without a measurement the message still stands, without the figure.
    let err = secret_error(
        &refused(422, &[("FieldValueTooLong", "data")]),
        Some("alice"),
        &SecretSize::default(),
    );
    assert!(
        matches!(&err, StoreError::Full(m) if !m.contains("it held")),
        "{err}"
    );
}

#[test]
fn other_refusals_keep_their_meaning() {
    let size = SecretSize::default();
    // A failed JSON Patch test: a conflict, retried from a fresh read.
    let err = secret_error(&refused(422, &[]), Some("alice"), &size);
    assert!(
        matches!(err, StoreError::Conflict(ref u) if u == "alice"),
        "{err}"
    );
    // Another field's validation failure: unavailable, as before.
    let err = secret_error(
        &refused(422, &[("FieldValueInvalid", "data[bad key]")]),
        Some("alice"),
        &size,
    );
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
    // Too long on another field is not the data limit.
    let err = secret_error(
        &refused(422, &[("FieldValueTooLong", "metadata.annotations")]),
        Some("alice"),
        &size,
    );
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
    // A read is never full.
    let err = secret_error(&refused(422, &[("FieldValueTooLong", "data")]), None, &size);
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
    let err = secret_error(&refused(409, &[]), Some("bob"), &size);
    assert!(matches!(err, StoreError::Conflict(ref u) if u == "bob"), "{err}");
}
