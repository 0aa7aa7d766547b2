//! Effects: an effect's Secret written conditionally, a credentials key removed, and what a
//! conflict on either hands back.

use super::*;

fn signing_secret(rv: &str) -> Object {
    let doc = KeysDocument::default().to_json();
    observed(
        "Secret",
        "ichor-oidc-signing",
        rv,
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "ichor-oidc-signing", "namespace": NS, "resourceVersion": rv,
                "annotations": {"kept": "yes"}},
            "type": "Opaque", "data": {"keys.json": STANDARD.encode(doc)}}),
    )
}

fn hmac_effect(based_on: Option<&str>) -> Action {
    let r = GenerateKeyRequest {
        kind: KeyKind::Hmac,
        kid: "h-20261129-1200".into(),
        created_at: now(),
        active_from: now(),
        reason: "first key".into(),
        based_on_resource_version: based_on.map(str::to_owned),
        document_changes: Vec::new(),
    };
    Action::Effect {
        request: EffectRequest::new(r.id(), &r).unwrap(),
        reason: reason(),
    }
}

fn keys_in(body: &Value) -> KeysDocument {
    let b64 = body["data"]["keys.json"].as_str().unwrap();
    KeysDocument::parse(&STANDARD.decode(b64).unwrap()).unwrap()
}

#[tokio::test]
async fn a_conflict_on_an_effect_secret_is_stale_never_overwritten_and_read_again() {
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (seen, send) = next(&mut handle).await;
        assert_eq!(seen.method, "PUT");
        assert_eq!(
            seen.path,
            "/api/v1/namespaces/ichor-system/secrets/ichor-oidc-signing"
        );
        assert_eq!(
            seen.body["metadata"]["resourceVersion"], "10",
            "the version the performer read"
        );
        assert_eq!(
            seen.body["metadata"]["annotations"]["kept"], "yes",
            "others' metadata is kept"
        );
        assert!(keys_in(&seen.body).hmac_key("h-20261129-1200").is_some());
        reply(send, 409, &conflict("secrets \"ichor-oidc-signing\""));
        let (read, send) = next(&mut handle).await;
        assert_eq!(
            (read.method.as_str(), read.path.as_str()),
            (
                "GET",
                "/api/v1/namespaces/ichor-system/secrets/ichor-oidc-signing"
            )
        );
        reply(send, 200, &signing_secret("11").value);
        handle
    });
    let w = world(vec![signing_secret("10")]);
    let report = apply_scripted(client, server, &w, &[hmac_effect(Some("10"))]).await;
    assert!(
        report.problems.is_empty() && report.applied.is_empty(),
        "{report:?}"
    );
    let [Event::Applied(fresh)] = report.events.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(fresh.resource_version.as_deref(), Some("11"));
    assert_eq!(report.stale.len(), 1, "{report:?}");
    let problem = &report.stale[0];
    assert!(
        problem.message.contains("ichor-oidc-signing") && problem.message.contains("not written"),
        "{problem}"
    );
    assert!(
        !problem.message.contains(&STANDARD.encode([42u8; 32])),
        "no secret material in messages"
    );
}

fn credentials(rv: &str, users: &[&str]) -> Value {
    let data: serde_json::Map<String, Value> =
        users.iter().map(|u| ((*u).to_owned(), json!("e30="))).collect();
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "ichor-user-credentials", "namespace": NS, "resourceVersion": rv},
        "type": "Opaque", "data": data})
}

fn gc_effect() -> Action {
    gc_effect_of(RemoveCredentialsKeyRequest {
        namespace: NS.into(),
        secret: "ichor-user-credentials".into(),
        key: "ghost".into(),
        in_legacy: true,
        per_user: None,
    })
}

fn gc_effect_of(r: RemoveCredentialsKeyRequest) -> Action {
    Action::Effect {
        request: EffectRequest::new(r.id(), &r).unwrap(),
        reason: reason(),
    }
}

const CREDENTIALS_PATH: &str = "/api/v1/namespaces/ichor-system/secrets/ichor-user-credentials";
const GHOST_PATH: &str = "/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/ichorusers/ghost";

fn ghost_not_found() -> Value {
    status(404, "NotFound", "ichorusers.ichor.maesh.dev \"ghost\" not found")
}

/// Answers the read of the key's IchorUser that comes before any removal: not found.
async fn ghost_absent(handle: &mut Mock) {
    let (read, send) = next(handle).await;
    assert_eq!(
        (read.method.as_str(), read.path.as_str()),
        ("GET", GHOST_PATH),
        "the key's user is read before the removal"
    );
    reply(send, 404, &ghost_not_found());
}

#[tokio::test]
async fn a_key_whose_user_is_not_in_the_store_is_removed_by_a_conditional_merge_patch() {
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        ghost_absent(&mut handle).await;
        let (patch, send) = next(&mut handle).await;
        assert_eq!(
            (patch.method.as_str(), patch.path.as_str()),
            ("PATCH", CREDENTIALS_PATH)
        );
        assert_eq!(
            patch.content_type.as_deref(),
            Some("application/merge-patch+json")
        );
        assert_eq!(
            patch.body,
            json!({"metadata": {"resourceVersion": "20"}, "data": {"ghost": null}})
        );
        reply(send, 200, &credentials("21", &["admin"]));
        handle
    });
    let w = world(vec![observed(
        "Secret",
        "ichor-user-credentials",
        "20",
        credentials("20", &["admin", "ghost"]),
    )]);
    let report = apply_scripted(client, server, &w, &[gc_effect()]).await;
    assert!(
        report.problems.is_empty() && report.stale.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.applied.len(), 1, "{report:?}");
    let [Event::Applied(secret)] = report.events.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(secret.resource_version.as_deref(), Some("21"));
}

#[tokio::test]
async fn a_key_whose_user_is_being_deleted_is_removed_like_a_gone_users() {
    // `kubectl delete` of a user whose finalizer holds the object: the store still has it,
    // terminating; it is no user any more, so its key goes.
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (read, send) = next(&mut handle).await;
        assert_eq!((read.method.as_str(), read.path.as_str()), ("GET", GHOST_PATH));
        reply(
            send,
            200,
            &json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
                "metadata": {"name": "ghost", "namespace": "ichor-system", "resourceVersion": "30",
                    "finalizers": ["x/hold"], "deletionTimestamp": "2026-11-05T10:00:00Z"},
                "spec": {"roles": ["admin"]}}),
        );
        let (patch, send) = next(&mut handle).await;
        assert_eq!(
            (patch.method.as_str(), patch.path.as_str()),
            ("PATCH", CREDENTIALS_PATH),
            "the terminating user's key is removed"
        );
        assert_eq!(
            patch.body,
            json!({"metadata": {"resourceVersion": "20"}, "data": {"ghost": null}})
        );
        reply(send, 200, &credentials("21", &["admin"]));
        handle
    });
    let w = world(vec![observed(
        "Secret",
        "ichor-user-credentials",
        "20",
        credentials("20", &["admin", "ghost"]),
    )]);
    let report = apply_scripted(client, server, &w, &[gc_effect()]).await;
    assert!(
        report.problems.is_empty() && report.stale.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.applied.len(), 1, "{report:?}");
}

#[tokio::test]
async fn a_key_is_kept_when_its_user_cannot_be_read() {
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (read, send) = next(&mut handle).await;
        assert_eq!((read.method.as_str(), read.path.as_str()), ("GET", GHOST_PATH));
        reply(
            send,
            403,
            &status(
                403,
                "Forbidden",
                "ichorusers.ichor.maesh.dev \"ghost\" is forbidden",
            ),
        );
        handle
    });
    let w = world(vec![observed(
        "Secret",
        "ichor-user-credentials",
        "20",
        credentials("20", &["admin", "ghost"]),
    )]);
    let report = apply_scripted(client, server, &w, &[gc_effect()]).await;
    assert!(
        report.applied.is_empty() && report.events.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.problems.len(), 1, "fails closed: {report:?}");
}

/// A removal meeting a conflict, the credentials Secret as read again, then `user` for the
/// key's IchorUser; returns the report.
async fn gc_conflict(user_reply: (u16, Value)) -> ichor_controller::apply::ApplyReport {
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        ghost_absent(&mut handle).await;
        let (_, send) = next(&mut handle).await;
        reply(send, 409, &conflict("secrets \"ichor-user-credentials\""));
        let (read, send) = next(&mut handle).await;
        assert_eq!(
            (read.method.as_str(), read.path.as_str()),
            ("GET", CREDENTIALS_PATH)
        );
        reply(send, 200, &credentials("22", &["admin", "ghost"]));
        let (user, send) = next(&mut handle).await;
        assert_eq!((user.method.as_str(), user.path.as_str()), ("GET", GHOST_PATH));
        reply(send, user_reply.0, &user_reply.1);
        handle
    });
    let w = world(vec![observed(
        "Secret",
        "ichor-user-credentials",
        "20",
        credentials("20", &["admin", "ghost"]),
    )]);
    apply_scripted(client, server, &w, &[gc_effect()]).await
}

#[tokio::test]
async fn a_garbage_collection_conflict_reads_the_secret_and_the_user_again_and_leaves_the_decision_to_the_graph()
 {
    let report = gc_conflict((404, ghost_not_found())).await;
    assert!(
        report.problems.is_empty() && report.applied.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.stale.len(), 1, "{report:?}");
    let [Event::Applied(secret), Event::Deleted(user)] = report.events.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(secret.resource_version.as_deref(), Some("22"));
    assert_eq!(user, &ObjectKey::new("IchorUser", NS, "ghost"));
}

#[tokio::test]
async fn a_garbage_collection_conflict_hands_back_a_user_who_is_back() {
    let mut back = user("3", json!([]));
    back["metadata"]["name"] = json!("ghost");
    let report = gc_conflict((200, back)).await;
    assert_eq!(report.stale.len(), 1, "{report:?}");
    let [Event::Applied(_), Event::Applied(user)] = report.events.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!((&*user.kind, &*user.name), ("IchorUser", "ghost"));
}

#[tokio::test]
async fn a_leaf_is_not_written_when_the_ca_it_is_signed_by_lost_its_write() {
    let ca = IssueCaRequest {
        common_name: CA_COMMON_NAME.into(),
        not_before: now(),
        not_after: "2036-11-29T12:00:00Z".parse().unwrap(),
        reason: "no CA".into(),
        replaces: None,
    };
    let leaf = IssueLeafRequest {
        common_name: "ichor-issuer".into(),
        sans: vec![SanName::Ip("10.96.0.10".parse().unwrap())],
        not_before: now(),
        not_after: "2027-11-29T12:00:00Z".parse().unwrap(),
        reason: "no leaf".into(),
        replaces: None,
    };
    let actions = [
        Action::Effect {
            request: EffectRequest::new("issue-ca new", &ca).unwrap(),
            reason: reason(),
        },
        Action::Effect {
            request: EffectRequest::new("issue-leaf 10.96.0.10 new", &leaf).unwrap(),
            reason: reason(),
        },
    ];
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (seen, send) = next(&mut handle).await;
        assert_eq!(
            (seen.method.as_str(), seen.body["metadata"]["name"].as_str()),
            ("POST", Some("ichor-oidc-ca"))
        );
        reply(
            send,
            409,
            &status(409, "AlreadyExists", "secrets \"ichor-oidc-ca\" already exists"),
        );
        let (read, send) = next(&mut handle).await;
        assert_eq!(
            (read.method.as_str(), read.path.as_str()),
            ("GET", "/api/v1/namespaces/ichor-system/secrets/ichor-oidc-ca")
        );
        reply(send, 200, &ca_secret(&super::ca()).value);
        handle
    });
    let report = apply_scripted(client, server, &World::new(), &actions).await;
    assert!(report.applied.is_empty(), "{report:?}");
    let [Event::Applied(other)] = report.events.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(
        other.resource_version.as_deref(),
        Some("3"),
        "the other writer's CA, read again"
    );
    assert_eq!(report.stale.len(), 1, "{report:?}");
    assert!(report.stale[0].message.contains("ichor-oidc-ca"), "{report:?}");
    assert_eq!(report.problems.len(), 1, "{report:?}");
    assert!(
        report.problems[0].message.contains("ichor-oidc-tls: not written"),
        "{report:?}"
    );
    assert!(
        report
            .problems
            .iter()
            .chain(&report.stale)
            .all(|p| !p.message.contains("PRIVATE KEY"))
    );
}

// ─── a gone user's own credentials Secret ────────────────────────────────────────────────────

const GHOST_OWN_PATH: &str = "/api/v1/namespaces/ichor-credentials/secrets/ichor-user-ghost";

fn own_removal(in_legacy: bool, uid: Option<&str>) -> Action {
    gc_effect_of(RemoveCredentialsKeyRequest {
        namespace: NS.into(),
        secret: "ichor-user-credentials".into(),
        key: "ghost".into(),
        in_legacy,
        per_user: Some(PerUserSecretRef {
            namespace: "ichor-credentials".into(),
            name: "ichor-user-ghost".into(),
            uid: uid.map(str::to_owned),
        }),
    })
}

fn legacy_world() -> World {
    world(vec![observed(
        "Secret",
        "ichor-user-credentials",
        "20",
        credentials("20", &["admin", "ghost"]),
    )])
}

#[tokio::test]
async fn a_gone_users_legacy_key_goes_first_then_its_own_secret_by_uid() {
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        ghost_absent(&mut handle).await;
        let (patch, send) = next(&mut handle).await;
        assert_eq!(
            (patch.method.as_str(), patch.path.as_str()),
            ("PATCH", CREDENTIALS_PATH),
            "the legacy copy goes first"
        );
        assert_eq!(
            patch.body,
            json!({"metadata": {"resourceVersion": "20"}, "data": {"ghost": null}})
        );
        reply(send, 200, &credentials("21", &["admin"]));
        let (delete, send) = next(&mut handle).await;
        assert_eq!(
            (delete.method.as_str(), delete.path.as_str()),
            ("DELETE", GHOST_OWN_PATH)
        );
        assert_eq!(delete.body["preconditions"], json!({"uid": "u-ghost"}));
        // The Secret's DELETE may answer with the object: it is never read.
        reply(
            send,
            200,
            &json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "ichor-user-ghost", "namespace": "ichor-credentials"},
                "data": {"entry": "c2VjcmV0"}}),
        );
        handle
    });
    let report = apply_scripted(
        client,
        server,
        &legacy_world(),
        &[own_removal(true, Some("u-ghost"))],
    )
    .await;
    assert!(
        report.problems.is_empty() && report.stale.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.applied.len(), 1, "{report:?}");
    let [Event::Applied(legacy), Event::Deleted(own)] = report.events.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(legacy.resource_version.as_deref(), Some("21"));
    assert_eq!(
        *own,
        ObjectKey::new("Secret", "ichor-credentials", "ichor-user-ghost")
    );
    assert!(
        !format!("{report:?}").contains("c2VjcmV0"),
        "no entry in the report"
    );
}

#[tokio::test]
async fn an_own_secret_alone_is_deleted_and_a_uid_conflict_is_read_again_by_metadata() {
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        ghost_absent(&mut handle).await;
        let (delete, send) = next(&mut handle).await;
        assert_eq!(
            (delete.method.as_str(), delete.path.as_str()),
            ("DELETE", GHOST_OWN_PATH),
            "no legacy write when the legacy Secret does not hold the user"
        );
        assert_eq!(delete.body["preconditions"], json!({"uid": "u-old"}));
        reply(
            send,
            409,
            &status(
                409,
                "Conflict",
                "Precondition failed: UID in precondition: u-old, UID in object meta: u-new",
            ),
        );
        let (read, send) = next(&mut handle).await;
        assert_eq!(
            (read.method.as_str(), read.path.as_str()),
            ("GET", GHOST_OWN_PATH)
        );
        // Asked by metadata only: the API server never sends the entry, nor a copy of it.
        assert!(
            read.accept
                .as_deref()
                .is_some_and(|a| a.starts_with("application/json;as=PartialObjectMetadata")),
            "{:?}",
            read.accept
        );
        reply(
            send,
            200,
            &json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                "metadata": {"name": "ichor-user-ghost", "namespace": "ichor-credentials", "uid": "u-new",
                    "resourceVersion": "40", "labels": {"ichor.maesh.dev/user": "ghost"},
                    "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"data\":{\"entry\":\"c2VjcmV0\"}}"}}}),
        );
        let (user, send) = next(&mut handle).await;
        assert_eq!((user.method.as_str(), user.path.as_str()), ("GET", GHOST_PATH));
        reply(send, 404, &ghost_not_found());
        handle
    });
    let report = apply_scripted(
        client,
        server,
        &legacy_world(),
        &[own_removal(false, Some("u-old"))],
    )
    .await;
    assert!(report.problems.is_empty(), "{report:?}");
    assert_eq!(report.stale.len(), 1, "{report:?}");
    let Some(Event::Applied(fresh)) = report.events.first() else {
        panic!("{report:?}")
    };
    assert_eq!(fresh.value["metadata"]["uid"], json!("u-new"));
    assert!(
        fresh.value["metadata"].get("annotations").is_none(),
        "annotations (a last-applied copy of the values) are never kept"
    );
}

#[tokio::test]
async fn an_own_secret_without_an_observed_uid_is_not_deleted() {
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        ghost_absent(&mut handle).await;
        handle
    });
    let report = apply_scripted(client, server, &legacy_world(), &[own_removal(false, None)]).await;
    assert_eq!(report.problems.len(), 1, "{report:?}");
    assert!(
        report.problems[0].message.contains("no uid observed"),
        "{report:?}"
    );
    assert!(report.applied.is_empty(), "{report:?}");
}
