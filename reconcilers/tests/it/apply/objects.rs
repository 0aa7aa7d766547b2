//! Desired objects: the server-side apply of the trust ConfigMap, status writes through the
//! subresource, deletes, and the guards that keep the controller off input kinds.

use super::*;

fn trust_configmap() -> Object {
    Object::new(
        "ConfigMap",
        NS,
        "ichor-oidc-trust",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "ichor-oidc-trust", "namespace": NS,
                "labels": {"identity.ichor.maesh.dev/owner": "ichor-controller"}},
            "data": {"discoveryURL": "https://10.96.0.10:8444", "ca.crt": "PEM"}}),
    )
}

fn served_configmap(rv: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "ichor-oidc-trust", "namespace": NS, "resourceVersion": rv,
            "uid": "0b6c", "labels": {"identity.ichor.maesh.dev/owner": "ichor-controller"},
            "managedFields": [{"manager": "ichor-controller", "operation": "Apply"}]},
        "data": {"discoveryURL": "https://10.96.0.10:8444", "ca.crt": "PEM"}})
}

#[tokio::test]
async fn an_apply_conflict_is_retried_and_then_succeeds() {
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (seen, send) = next(&mut handle).await;
        ssa_query(&seen);
        reply(send, 409, &conflict("configmaps \"ichor-oidc-trust\""));
        let (again, send) = next(&mut handle).await;
        assert_eq!((again.method.as_str(), again.body == seen.body), ("PATCH", true));
        reply(send, 200, &served_configmap("102"));
        handle
    });
    let action = Action::Apply {
        object: trust_configmap(),
        reason: reason(),
    };
    let report = apply_scripted(client, server, &World::new(), &[action]).await;
    assert!(report.problems.is_empty(), "{report:?}");
    assert_eq!(report.events.len(), 1);
}

fn cond(type_: &str, status: &str, reason: &str, time: Option<&str>) -> Value {
    let mut c = json!({"type": type_, "status": status, "reason": reason, "message": "m"});
    if let Some(t) = time {
        c["lastTransitionTime"] = json!(t);
    }
    c
}

fn status_path() -> &'static str {
    "/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/ichorusers/admin/status"
}

#[tokio::test]
async fn a_conflicting_status_write_is_stale_and_hands_back_the_object_as_read_again() {
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (seen, send) = next(&mut handle).await;
        assert_eq!(seen.path, status_path());
        assert_eq!(seen.body["metadata"]["resourceVersion"], "5");
        reply(send, 409, &conflict("ichorusers.ichor.maesh.dev \"admin\""));
        let (read, send) = next(&mut handle).await;
        assert_eq!(read.method, "GET");
        assert_eq!(
            read.path,
            "/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/ichorusers/admin"
        );
        // Someone else changed the Other condition meanwhile.
        reply(
            send,
            200,
            &user(
                "7",
                json!([cond("Other", "False", "B", Some("2026-11-29T11:00:00Z"))]),
            ),
        );
        handle
    });
    let old = json!([cond("Other", "True", "A", Some("2026-01-01T00:00:00Z"))]);
    let w = world(vec![observed("IchorUser", "admin", "5", user("5", old.clone()))]);
    let desired = Object::new(
        "IchorUser",
        NS,
        "admin",
        json!({"status": {"conditions": [old[0].clone(), cond("Ready", "True", "Ready", None)]}}),
    );
    let report = apply_scripted(
        client,
        server,
        &w,
        &[Action::Apply {
            object: desired,
            reason: reason(),
        }],
    )
    .await;
    assert!(
        report.problems.is_empty() && report.applied.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.stale.len(), 1, "{report:?}");
    assert_eq!(report.stale[0].kind, ProblemKind::Conflict);
    let [Event::Applied(o)] = report.events.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(
        o.resource_version.as_deref(),
        Some("7"),
        "the object as read again"
    );
    assert_eq!(o.value["status"]["conditions"][0]["reason"], "B");
}

#[tokio::test]
async fn the_spec_of_an_input_kind_is_never_written() {
    let (client, handle) = client();
    let mut a = applier(client);
    let desired = Object::new(
        "IchorUser",
        NS,
        "admin",
        json!({"spec": {"roles": []}, "status": {}}),
    );
    let report = a
        .apply(
            &World::new(),
            &[Action::Apply {
                object: desired,
                reason: reason(),
            }],
        )
        .await;
    drop(a);
    assert_no_more_requests(handle).await;
    assert_eq!(report.problems.len(), 1, "{report:?}");
    assert!(
        report.problems[0]
            .message
            .contains("never writes the spec of an input kind")
    );
}

#[tokio::test]
async fn deleting_an_owned_object_already_gone_is_success_and_carries_its_resource_version() {
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (seen, send) = next(&mut handle).await;
        assert_eq!(seen.method, "DELETE");
        assert_eq!(seen.path, "/api/v1/namespaces/ichor-system/configmaps/old-trust");
        assert_eq!(seen.body["preconditions"], json!({"resourceVersion": "3"}));
        reply(
            send,
            404,
            &status(404, "NotFound", "configmaps \"old-trust\" not found"),
        );
        handle
    });
    let key = ObjectKey::new("ConfigMap", NS, "old-trust");
    let w = world(vec![observed(
        "ConfigMap",
        "old-trust",
        "3",
        json!({"metadata": {"name": "old-trust"}}),
    )]);
    let report = apply_scripted(
        client,
        server,
        &w,
        &[Action::Delete {
            key: key.clone(),
            reason: reason(),
        }],
    )
    .await;
    assert!(report.problems.is_empty(), "{report:?}");
    assert_eq!(report.events, [Event::Deleted(key)]);
}

#[tokio::test]
async fn an_input_object_is_never_deleted() {
    let (client, handle) = client();
    let mut a = applier(client);
    let key = ObjectKey::new("TalosMachine", NS, "cp-1");
    let report = a
        .apply(
            &World::new(),
            &[Action::Delete {
                key,
                reason: reason(),
            }],
        )
        .await;
    drop(a);
    assert_no_more_requests(handle).await;
    assert_eq!(report.problems.len(), 1, "{report:?}");
}

#[tokio::test]
async fn a_machine_needing_an_apiserver_restart_gets_its_condition_through_the_status_subresource() {
    let machine = |rv: &str| {
        json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "TalosMachine",
            "metadata": {"name": "cp-1", "namespace": NS, "resourceVersion": rv},
            "spec": {"cluster": "prod", "role": "controlplane"}})
    };
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (seen, send) = next(&mut handle).await;
        assert_eq!(seen.method, "PATCH");
        assert_eq!(
            seen.path,
            "/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/talosmachines/cp-1/status"
        );
        ssa_query(&seen);
        assert_eq!(seen.body.get("spec"), None);
        assert_eq!(
            seen.body["status"]["conditions"],
            json!([cond("Ready", "False", "APIServerRestartRequired", Some(NOW))])
        );
        let mut written = machine("31");
        written["status"] = seen.body["status"].clone();
        reply(send, 200, &written);
        handle
    });
    let w = world(vec![observed("TalosMachine", "cp-1", "30", machine("30"))]);
    let desired = Object::new(
        "TalosMachine",
        NS,
        "cp-1",
        json!({"status": {"conditions": [cond("Ready", "False", "APIServerRestartRequired", None)]}}),
    );
    let report = apply_scripted(
        client,
        server,
        &w,
        &[Action::Apply {
            object: desired,
            reason: reason(),
        }],
    )
    .await;
    assert!(report.problems.is_empty(), "{report:?}");
    assert_eq!(report.events.len(), 1);
}

#[tokio::test]
async fn a_change_of_keys_json_alone_is_an_update_of_the_secret_as_observed_conditioned_on_its_version() {
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (seen, send) = next(&mut handle).await;
        assert_eq!(
            (seen.method.as_str(), seen.path.as_str()),
            (
                "PUT",
                "/api/v1/namespaces/ichor-system/secrets/ichor-oidc-signing"
            ),
            "the chart grants update, not patch, on the signing Secret"
        );
        assert_eq!(seen.body["metadata"]["resourceVersion"], "41");
        assert_eq!(seen.body["type"], "Opaque");
        assert_eq!(seen.body["data"]["keys.json"], "TkVX");
        assert_eq!(seen.body["data"]["other"], "S0VFUA==", "other keys are kept");
        assert!(seen.body["metadata"].get("managedFields").is_none());
        let mut served = seen.body.clone();
        served["metadata"]["resourceVersion"] = json!("42");
        reply(send, 200, &served);
        handle
    });
    let observed_secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "ichor-oidc-signing", "namespace": NS, "resourceVersion": "41",
            "managedFields": [{"manager": "ichor-controller", "operation": "Update"}]},
        "data": {"keys.json": "T0xE", "other": "S0VFUA=="}});
    let w = world(vec![observed(
        "Secret",
        "ichor-oidc-signing",
        "41",
        observed_secret,
    )]);
    let desired = Object::new(
        "Secret",
        NS,
        "ichor-oidc-signing",
        json!({"data": {"keys.json": "TkVX"}}),
    );
    let report = apply_scripted(
        client,
        server,
        &w,
        &[Action::Apply {
            object: desired,
            reason: reason(),
        }],
    )
    .await;
    assert!(report.problems.is_empty(), "{report:?}");
    let [Event::Applied(o)] = report.events.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(o.resource_version.as_deref(), Some("42"));
}
