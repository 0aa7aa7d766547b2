use super::*;
use base64::Engine as _;

/// `base64(value)` as a Secret's `data` holds it.
fn encoded(value: &[u8]) -> Value {
    Value::String(base64::engine::general_purpose::STANDARD.encode(value))
}

#[test]
fn the_switch_tests_the_phase_then_replaces_it() {
    let r = SwitchLayoutRequest {
        namespace: "ichor-system".into(),
        secret: "ichor-user-credentials".into(),
        from: "legacy".into(),
        to: "migrating".into(),
        reason: String::new(),
    };
    assert_eq!(
        switch_patch(&r),
        json!([
            {"op": "test", "path": "/metadata/annotations/ichor.maesh.dev~1credentials-layout", "value": "legacy"},
            {"op": "replace", "path": "/metadata/annotations/ichor.maesh.dev~1credentials-layout", "value": "migrating"},
        ])
    );
}

#[test]
fn the_removal_tests_each_value_read_and_skips_keys_already_gone() {
    let mut data = Map::new();
    data.insert("alice".into(), encoded(b"{\"a\":1}"));
    data.insert("bob".into(), encoded(b"{\"b\":2}"));
    let patch = removal_patch(&data, &["alice", "gone", "bob"]).unwrap_or_default();
    assert_eq!(
        patch,
        json!([
            {"op": "test", "path": "/data/alice", "value": encoded(b"{\"a\":1}")},
            {"op": "remove", "path": "/data/alice"},
            {"op": "test", "path": "/data/bob", "value": encoded(b"{\"b\":2}")},
            {"op": "remove", "path": "/data/bob"},
        ])
    );
    assert_eq!(removal_patch(&data, &["gone"]), None);
    assert_eq!(data_path("a/b~c"), "/data/a~1b~0c");
}

#[test]
fn a_moved_entry_is_the_legacy_value_unchanged_in_a_labelled_secret_of_the_credentials_type() {
    let value = encoded(b"{\"phc\":\"x\"}");
    let body = per_user_body("ichor-credentials", "carol", &value);
    assert_eq!(body["type"], USER_CREDENTIALS_TYPE);
    assert_eq!(body["metadata"]["name"], "ichor-user-carol");
    assert_eq!(body["metadata"]["labels"][USER_LABEL], "carol");
    assert_eq!(body["data"], json!({"entry": value}));
}

#[test]
fn a_stale_copy_is_removed_only_beside_a_credentials_secret_of_its_user() {
    let now: jiff::Timestamp = "2026-12-07T12:00:00Z".parse().unwrap_or_else(|e| panic!("{e}"));
    let secret = |ty: &str, user: &str, created: &str| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret", "type": ty,
            "metadata": {"name": format!("ichor-user-{user}"), "labels": {USER_LABEL: user},
                "creationTimestamp": created}}))
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let old = "2026-12-07T11:59:00Z";
    assert!(is_credentials_secret_of(
        &secret(USER_CREDENTIALS_TYPE, "ann", old),
        "ann",
        now
    ));
    assert!(!is_credentials_secret_of(
        &secret("Opaque", "ann", old),
        "ann",
        now
    ));
    assert!(!is_credentials_secret_of(
        &secret(USER_CREDENTIALS_TYPE, "bob", old),
        "ann",
        now
    ));
    // Made a moment ago: an issuer's move in flight, whose own removal of the key follows.
    let young = secret(USER_CREDENTIALS_TYPE, "ann", "2026-12-07T11:59:55Z");
    assert!(!is_credentials_secret_of(&young, "ann", now));
}

#[test]
fn only_the_migrations_effects_are_routed_here() {
    assert!(is_migration_effect("credentials-layout legacy to migrating"));
    assert!(is_migration_effect("credentials-sweep a (3 keys)"));
    assert!(is_migration_effect("retire-legacy-credentials 12"));
    assert!(is_migration_effect("credentials-return a (1 keys)"));
    assert!(is_migration_effect("recreate-legacy-credentials"));
    assert!(!is_migration_effect("remove-credentials-key credentials-sweep"));
}
