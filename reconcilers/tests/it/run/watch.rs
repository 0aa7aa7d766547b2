//! Watch events folded into graph events, the sources the controller watches, and the
//! watchers against a scripted API server.

use super::*;

// ─── watch events → graph events ─────────────────────────────────────────────────────────────

fn dynamic(name: &str, rv: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NAMESPACE, "resourceVersion": rv,
            "managedFields": [{"manager": "kubectl"}]},
        "spec": {"roles": ["admin"]}
    }))
    .unwrap()
}

fn users_resource() -> ApiResource {
    sources("app.kubernetes.io/component=issuer", "ichor-identity")
        .into_iter()
        .find(|s| s.label == "IchorUser")
        .unwrap()
        .resource
}

#[test]
fn an_applied_object_carries_kind_api_version_and_resource_version_without_managed_fields() {
    let mut state = WatchState::new(users_resource());
    let events = state.on_event(watcher::Event::Apply(dynamic("alice", "7")));
    let [Event::Applied(o)] = events.as_slice() else {
        panic!("{events:?}")
    };
    assert_eq!(o.key(), ObjectKey::new("IchorUser", NAMESPACE, "alice"));
    assert_eq!(o.resource_version.as_deref(), Some("7"));
    assert_eq!(o.value["apiVersion"], json!("ichor.maesh.dev/v1alpha1"));
    assert_eq!(o.value["kind"], json!("IchorUser"));
    assert_eq!(o.value["spec"]["roles"], json!(["admin"]));
    assert!(o.value["metadata"].get("managedFields").is_none());
}

#[test]
fn a_relist_deletes_what_vanished_and_skips_what_is_unchanged() {
    let mut state = WatchState::new(users_resource());
    state.on_event(watcher::Event::Init);
    state.on_event(watcher::Event::InitApply(dynamic("alice", "1")));
    state.on_event(watcher::Event::InitApply(dynamic("bob", "2")));
    assert!(!state.is_synced());
    assert!(state.on_event(watcher::Event::InitDone).is_empty());
    assert!(state.is_synced());

    // Disconnected; bob was deleted meanwhile, alice is unchanged, carol is new.
    let mut events = state.on_event(watcher::Event::Init);
    events.extend(state.on_event(watcher::Event::InitApply(dynamic("alice", "1"))));
    events.extend(state.on_event(watcher::Event::InitApply(dynamic("carol", "9"))));
    events.extend(state.on_event(watcher::Event::InitDone));
    let summary: Vec<String> = events
        .iter()
        .map(|e| match e {
            Event::Applied(o) => format!("applied {}", o.name),
            Event::Deleted(k) => format!("deleted {}", k.name),
            Event::Tick(_) => "tick".into(),
        })
        .collect();
    assert_eq!(summary, ["applied carol", "deleted bob"]);

    let events = state.on_event(watcher::Event::Delete(dynamic("alice", "3")));
    assert_eq!(
        events,
        [Event::Deleted(ObjectKey::new("IchorUser", NAMESPACE, "alice"))]
    );
    assert_eq!(
        state
            .on_event(watcher::Event::Apply(dynamic("carol", "10")))
            .len(),
        1,
        "a new resourceVersion is folded"
    );
}

#[test]
fn a_listed_marker_is_there_only_while_a_whole_answered_list_stands() {
    use ichor_controller_core::identity::project::credentials_secrets_listed_key;
    let marker = credentials_secrets_listed_key();
    let (applied, deleted) = (format!("applied {marker}"), format!("deleted {marker}"));
    let names = |events: Vec<Event>| -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                Event::Applied(o) => format!("applied {}", o.key()),
                Event::Deleted(k) => format!("deleted {k}"),
                Event::Tick(_) => "tick".into(),
            })
            .collect()
    };
    let alice = ObjectKey::new("IchorUser", NAMESPACE, "alice");
    let mut state = WatchState::new(users_resource()).with_listed_marker(marker.clone());
    // Refused before any answer: deleted once (an earlier process's journal may hold it).
    assert_eq!(names(state.refused()), [deleted.as_str()]);
    assert!(state.refused().is_empty());
    // An empty answer: only the marker.
    assert!(state.on_event(watcher::Event::Init).is_empty());
    assert_eq!(
        names(state.on_event(watcher::Event::InitDone)),
        [applied.as_str()]
    );
    // A re-list (a 410): partial until it ends, so the marker goes first and comes back last.
    assert_eq!(names(state.on_event(watcher::Event::Init)), [deleted.as_str()]);
    assert_eq!(
        names(state.on_event(watcher::Event::InitApply(dynamic("alice", "1")))),
        [format!("applied {alice}")]
    );
    assert_eq!(
        names(state.on_event(watcher::Event::InitDone)),
        [applied.as_str()]
    );
    // Refused (the Role gone): the marker goes, what was listed stays; said once.
    assert_eq!(names(state.refused()), [deleted.as_str()]);
    assert!(state.refused().is_empty());
    // Answered again: the marker comes back after what the new list dropped.
    assert!(state.on_event(watcher::Event::Init).is_empty());
    assert_eq!(
        names(state.on_event(watcher::Event::InitDone)),
        [format!("deleted {alice}"), applied.clone()]
    );
    // A fresh watcher's first list deletes it before anything is listed; a streaming list
    // (no `Init`) as well.
    let mut fresh = WatchState::new(users_resource()).with_listed_marker(marker.clone());
    assert_eq!(names(fresh.on_event(watcher::Event::Init)), [deleted.as_str()]);
    let mut streaming = WatchState::new(users_resource()).with_listed_marker(marker.clone());
    assert_eq!(
        names(streaming.on_event(watcher::Event::InitApply(dynamic("alice", "1")))),
        [deleted, format!("applied {alice}")]
    );
    assert_eq!(names(streaming.on_event(watcher::Event::InitDone)), [applied]);
    // A watcher without a marker never makes one.
    let mut plain = WatchState::new(users_resource());
    plain.on_event(watcher::Event::Init);
    assert!(plain.on_event(watcher::Event::InitDone).is_empty());
    assert!(plain.refused().is_empty());
}

#[test]
fn owned_secrets_and_the_configmaps_are_watched_by_name() {
    let all = sources("app.kubernetes.io/component=issuer", "ichor-identity");
    let labels: Vec<&str> = all.iter().map(|s| s.label.as_str()).collect();
    for name in [
        "Secret ichor-oidc-signing",
        "Secret ichor-oidc-ca",
        "Secret ichor-oidc-tls",
        "Secret ichor-webhook-tls",
        "Secret ichor-user-credentials",
        "ConfigMap ichor-oidc-trust",
        "ConfigMap ichor-ui-ca",
        "ValidatingWebhookConfiguration ichor-identity",
        "Deployment ichor-issuer (rollout)",
        "Namespace ichor-credentials (metadata)",
    ] {
        let source = all
            .iter()
            .find(|s| s.label == name)
            .unwrap_or_else(|| panic!("{name} in {labels:?}"));
        let named = name.split(' ').nth(1).unwrap();
        let wanted = format!("metadata.name={named}");
        assert_eq!(source.config.field_selector.as_deref(), Some(wanted.as_str()));
    }
    let service = all.iter().find(|s| s.resource.kind == "Service").unwrap();
    assert_eq!(
        service.config.label_selector.as_deref(),
        Some("app.kubernetes.io/component=issuer")
    );
    assert_eq!(
        service.config.field_selector.as_deref(),
        Some("metadata.name=ichor-issuer"),
        "the issuer Service is watched by its name, not its label alone"
    );
    let cluster_scoped: Vec<&str> = all
        .iter()
        .filter(|s| !s.namespaced)
        .map(|s| s.resource.kind.as_str())
        .collect();
    assert_eq!(
        cluster_scoped,
        ["IchorInstallation", "Namespace", "ValidatingWebhookConfiguration"]
    );
    let pods = all.iter().find(|s| s.resource.kind == "Pod").unwrap();
    assert_eq!(
        pods.config.label_selector.as_deref(),
        Some("app.kubernetes.io/name=ichor,app.kubernetes.io/component=issuer"),
        "the issuer's pods, by its Deployment's selector"
    );
    assert!(
        all.iter().filter(|s| !s.namespaced).all(|s| s.optional),
        "a cluster whose RBAC grants neither still runs"
    );
}

#[test]
fn the_credentials_secrets_are_watched_in_their_namespace_by_metadata_and_optionally() {
    let all = sources("app.kubernetes.io/component=issuer", "ichor-identity");
    let source = all
        .iter()
        .find(|s| s.namespace.as_deref() == Some("ichor-credentials"))
        .expect("the credentials namespace is watched");
    assert!(source.metadata_only, "never the entries");
    assert_eq!(source.resource.kind, "Secret");
    assert!(
        source.optional,
        "a missing namespace does not hold the controller back"
    );
    assert!(
        source
            .refused_hint
            .as_deref()
            .is_some_and(|h| h.contains("ichor init")),
        "{source:?}"
    );
    assert_eq!(
        source.listed_marker,
        Some(ichor_controller_core::identity::project::credentials_secrets_listed_key()),
        "a refused list must not read as an empty namespace"
    );
    assert!(
        all.iter().filter(|s| s.listed_marker.is_some()).count() == 1,
        "only the credentials Secrets decide on emptiness"
    );
    let mut by_metadata: Vec<&str> = all
        .iter()
        .filter(|s| s.metadata_only)
        .map(|s| s.resource.kind.as_str())
        .collect();
    by_metadata.sort_unstable();
    assert_eq!(
        by_metadata,
        ["Namespace", "Pod", "Secret"],
        "the credentials Secrets, the issuer pods and the credentials namespace are read by metadata"
    );
}

#[test]
fn an_issuer_pod_keeps_only_the_layouts_it_lists_and_the_deployment_only_its_rollout() {
    let pod: PartialObjectMeta<DynamicObject> = serde_json::from_value(json!({
        "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
        "metadata": {"name": "ichor-issuer-1", "namespace": NAMESPACE, "uid": "p",
            "resourceVersion": "3", "deletionTimestamp": "2027-01-01T00:00:00Z",
            "labels": {"app.kubernetes.io/component": "issuer"},
            "annotations": {"ichor.maesh.dev/credentials-layouts": "legacy,per-user",
                "kubectl.kubernetes.io/last-applied-configuration": "{\"secret\":1}"}}}))
    .unwrap();
    let o = ichor_controller::run::convert::pod_layouts_only(pod);
    let value = serde_json::to_value(&o.metadata).unwrap();
    assert_eq!(
        value["annotations"],
        json!({"ichor.maesh.dev/credentials-layouts": "legacy,per-user"})
    );
    assert_eq!(value["deletionTimestamp"], json!("2027-01-01T00:00:00Z"));

    let deployment: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "ichor-issuer", "namespace": NAMESPACE, "generation": 4,
            "resourceVersion": "9", "annotations": {"a": "b"}},
        "spec": {"selector": {"matchLabels": {"app.kubernetes.io/component": "issuer"}},
            "template": {"metadata": {"annotations": {"ichor.maesh.dev/credentials-layouts": "legacy,per-user", "x": "y"}},
                "spec": {"containers": [{"name": "issuer", "env": [{"name": "TOKEN", "value": "s3cret"}]}]}}},
        "status": {"observedGeneration": 4, "replicas": 2}}))
    .unwrap();
    let o = ichor_controller::run::convert::deployment_rollout_only(deployment);
    let value = serde_json::to_value(&o).unwrap();
    assert_eq!(value["metadata"]["generation"], json!(4));
    assert!(value["metadata"].get("annotations").is_none(), "{value}");
    assert_eq!(value["status"], json!({"observedGeneration": 4, "replicas": 2}));
    assert_eq!(
        value["spec"]["template"],
        json!({"metadata": {"annotations": {"ichor.maesh.dev/credentials-layouts": "legacy,per-user"}}})
    );
    assert!(!value.to_string().contains("s3cret"), "{value}");
}

fn secret_metadata(uid: &str, rv: &str) -> PartialObjectMeta<DynamicObject> {
    serde_json::from_value(
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
        "metadata": {"name": "ichor-user-bob", "namespace": "ichor-credentials", "uid": uid,
            "resourceVersion": rv, "labels": {"ichor.maesh.dev/user": "bob"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration":
                "{\"data\":{\"entry\":\"c2VjcmV0\"}}"},
            "managedFields": [{"manager": "ichor-issuer"}]}}),
    )
    .unwrap()
}

#[test]
fn a_metadata_event_keeps_name_uid_and_labels_and_never_annotations() {
    let resource = ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&());
    let mut state = WatchState::new(resource);
    let events = state.on_event(metadata_event(watcher::Event::Apply(secret_metadata("u-1", "5"))));
    let [Event::Applied(o)] = events.as_slice() else {
        panic!("{events:?}")
    };
    assert_eq!(
        o.key(),
        ObjectKey::new("Secret", "ichor-credentials", "ichor-user-bob")
    );
    assert_eq!(o.resource_version.as_deref(), Some("5"));
    assert_eq!(o.value["metadata"]["uid"], json!("u-1"));
    assert_eq!(
        o.value["metadata"]["labels"]["ichor.maesh.dev/user"],
        json!("bob")
    );
    assert!(o.value["metadata"].get("annotations").is_none(), "{o:?}");
    assert!(o.value["metadata"].get("managedFields").is_none(), "{o:?}");
    assert!(
        o.value.get("data").is_none() && o.value.get("type").is_none(),
        "{o:?}"
    );
    assert!(!o.value.to_string().contains("c2VjcmV0"));
    let events = state.on_event(metadata_event(watcher::Event::Delete(secret_metadata(
        "u-1", "6",
    ))));
    assert_eq!(
        events,
        [Event::Deleted(ObjectKey::new(
            "Secret",
            "ichor-credentials",
            "ichor-user-bob"
        ))]
    );
}

// ─── the watchers against a scripted API server ──────────────────────────────────────────────

#[tokio::test]
async fn the_watchers_list_by_name_and_selector_and_sync_with_an_optional_input_refused() {
    // The IchorUser watcher also fills the webhooks' cache.
    let (cache, feed) = UserCache::new(NAMESPACE);
    assert!(
        matches!(
            cache.users(NAMESPACE, Instant::now()),
            Err(AdmissionError::UsersNotSynced)
        ),
        "a cache is not used before its first list"
    );
    let requests: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let seen = seen.clone();
        async move {
            let path = req.uri().path().to_owned();
            let query = req.uri().query().unwrap_or_default().to_owned();
            let accept = req
                .headers()
                .get(http::header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            seen.lock()
                .unwrap()
                .push(format!("{path}?{query} accept={accept}"));
            if query.contains("watch=true") {
                // A watch that never delivers anything: the lists are what is tested.
                futures::future::pending::<()>().await;
            }
            let (code, body) = if path.ends_with("/ichorinstallations")
                || path.starts_with("/api/v1/namespaces/ichor-credentials/")
            {
                // No IchorInstallation RBAC; no credentials namespace (so no Role in it).
                (403, status(403, "Forbidden"))
            } else if path.ends_with("/ichorusers") {
                (
                    200,
                    json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUserList", "metadata": {"resourceVersion": "10"},
                        "items": [{"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
                            "metadata": {"name": "ann", "namespace": NAMESPACE, "resourceVersion": "8"},
                            "spec": {"roles": ["admin"]}}]}),
                )
            } else if path.ends_with("/services") {
                (
                    200,
                    json!({"apiVersion": "v1", "kind": "ServiceList", "metadata": {"resourceVersion": "10"},
                        "items": [{"metadata": {"name": "ichor-issuer", "namespace": NAMESPACE,
                            "resourceVersion": "9", "labels": {"app.kubernetes.io/component": "issuer"}},
                            "spec": {"clusterIP": "10.96.0.10"}}]}),
                )
            } else {
                (
                    200,
                    json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "10"}, "items": []}),
                )
            };
            let response = http::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(serde_json::to_vec(&body).unwrap()))
                .unwrap();
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    let client = kube::Client::new(service, NAMESPACE);
    let all = sources("app.kubernetes.io/component=issuer", "ichor-identity");
    let sync = Arc::new(SyncState::new(all.len()));
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let tasks = ichor_controller::run::watch::spawn(&client, NAMESPACE, all, tx, sync.clone(), Some(feed));
    tokio::time::timeout(Duration::from_secs(20), async {
        while !sync.all() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect(
        "every watcher synced, IchorInstallation and the credentials namespace refused and counted as empty",
    );
    let cached = cache.users(NAMESPACE, Instant::now()).unwrap();
    let names: Vec<_> = cached.iter().map(|u| u.metadata.name.clone()).collect();
    assert_eq!(names, [Some("ann".to_owned())]);
    assert_eq!(cached[0].spec.roles, ["admin"]);
    assert!(
        matches!(
            cache.users("elsewhere", Instant::now()),
            Err(AdmissionError::UsersNotWatched(_))
        ),
        "the cache holds its own namespace only"
    );
    let mut batches = Vec::new();
    while let Ok(batch) = rx.try_recv() {
        batches.push(batch);
    }
    let service = batches
        .iter()
        .find(|b| b.source.starts_with("Service"))
        .unwrap_or_else(|| panic!("{batches:?}"));
    let [Event::Applied(service)] = service.events.as_slice() else {
        panic!("{service:?}")
    };
    assert_eq!(
        service.key(),
        ObjectKey::new("Service", NAMESPACE, "ichor-issuer")
    );
    assert_eq!(service.value["apiVersion"], json!("v1"));
    assert_eq!(service.value["spec"]["clusterIP"], json!("10.96.0.10"));
    let listed = ichor_controller_core::identity::project::credentials_secrets_listed_key();
    assert!(
        batches.iter().flat_map(|b| &b.events).all(|e| match e {
            Event::Applied(o) => o.key() != listed,
            _ => true,
        }),
        "a refused list of the credentials namespace never says it was listed: {batches:?}"
    );
    for t in tasks {
        t.abort();
    }

    let requests = requests.lock().unwrap();
    let lists: Vec<&String> = requests.iter().filter(|r| !r.contains("watch=true")).collect();
    let secret_lists: Vec<&&String> = lists
        .iter()
        .filter(|r| r.starts_with("/api/v1/namespaces/ichor-system/secrets?"))
        .collect();
    assert_eq!(secret_lists.len(), 5, "{lists:#?}");
    let credentials_lists: Vec<&&String> = lists
        .iter()
        .filter(|r| r.starts_with("/api/v1/namespaces/ichor-credentials/secrets?"))
        .collect();
    assert!(!credentials_lists.is_empty(), "{lists:#?}");
    assert!(
        credentials_lists
            .iter()
            .all(|r| r.contains("as=PartialObjectMetadata")),
        "the credentials namespace is listed by metadata only: {credentials_lists:#?}"
    );
    assert!(
        secret_lists
            .iter()
            .all(|r| r.contains("fieldSelector=metadata.name%3Dichor-")),
        "every Secret is listed by name (the RBAC grants no other list): {secret_lists:#?}"
    );
    assert!(
        lists
            .iter()
            .any(|r| r.starts_with("/api/v1/namespaces/ichor-system/services?")
                && r.contains("labelSelector=app.kubernetes.io%2Fcomponent%3Dissuer")),
        "{lists:#?}"
    );
    assert!(
        lists
            .iter()
            .any(|r| r.starts_with("/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/ichorusers?")),
        "{lists:#?}"
    );
}

/// A scripted apiserver for the credentials namespace alone: every list answered, empty; the
/// first `refused_watches` watches refused (403), the later ones open and silent. Counts the lists.
fn credentials_server(refused_watches: usize) -> (kube::Client, Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (lists, watches) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (l, w) = (lists.clone(), watches);
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let (l, w) = (l.clone(), w.clone());
        async move {
            let query = req.uri().query().unwrap_or_default().to_owned();
            let (code, body) = if query.contains("watch=true") {
                if w.fetch_add(1, Ordering::SeqCst) < refused_watches {
                    (403, status(403, "Forbidden"))
                } else {
                    // An open watch that never delivers: the marker must come from a list.
                    futures::future::pending::<()>().await;
                    unreachable!()
                }
            } else {
                l.fetch_add(1, Ordering::SeqCst);
                (
                    200,
                    json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "10"}, "items": []}),
                )
            };
            let response = http::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(serde_json::to_vec(&body).unwrap()))
                .unwrap();
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    (kube::Client::new(service, NAMESPACE), lists)
}

/// A watch of the credentials namespace refused after its list was answered (the Role taken
/// away between the two): the marker goes, and it comes back only with a new whole list, not
/// with the watch resumed from where it stopped (which would list nothing).
#[tokio::test]
async fn a_refused_watch_takes_the_listed_marker_away_until_a_new_list_is_answered() {
    use std::sync::atomic::Ordering;
    let (client, lists) = credentials_server(1);
    let sources = vec![ichor_controller::run::watch::credentials_source()];
    let sync = Arc::new(SyncState::new(1));
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let tasks = ichor_controller::run::watch::spawn(&client, NAMESPACE, sources, tx, sync, None);
    let marker = ichor_controller_core::identity::project::credentials_secrets_listed_key();
    let mut seen = Vec::new();
    let wanted = ["deleted", "applied", "deleted", "applied"];
    let got = tokio::time::timeout(Duration::from_secs(20), async {
        while seen.len() < wanted.len() {
            let Some(batch) = rx.recv().await else { break };
            for e in batch.events {
                match e {
                    Event::Applied(o) if o.key() == marker => seen.push("applied"),
                    Event::Deleted(k) if k == marker => seen.push("deleted"),
                    _ => {}
                }
            }
        }
    })
    .await;
    for t in tasks {
        t.abort();
    }
    assert!(got.is_ok(), "the marker's events: {seen:?}");
    assert_eq!(seen, wanted);
    assert!(
        lists.load(Ordering::SeqCst) >= 2,
        "listed again after the refusal"
    );
}

/// Every list answered and every watch refused (a Role that grants `list` and not `watch`):
/// the streams opened anew are spaced out, not a loop of lists.
#[tokio::test]
async fn lists_allowed_and_watches_refused_do_not_loop() {
    use std::sync::atomic::Ordering;
    let (client, lists) = credentials_server(usize::MAX);
    let sources = vec![ichor_controller::run::watch::credentials_source()];
    let sync = Arc::new(SyncState::new(1));
    let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
    let tasks = ichor_controller::run::watch::spawn(&client, NAMESPACE, sources, tx, sync, None);
    let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
    tokio::time::sleep(Duration::from_secs(3)).await;
    for t in tasks {
        t.abort();
    }
    drain.abort();
    // 0.8 s, then 1.6 s: the first list and at most two more in three seconds.
    let n = lists.load(Ordering::SeqCst);
    assert!((2..=3).contains(&n), "{n} lists in three seconds");
}

#[test]
fn reopens_wait_longer_each_time_and_start_over_after_a_quiet_while() {
    use ichor_controller::run::watch::Reopens;
    let t0 = Instant::now();
    let mut r = Reopens::default();
    let waits: Vec<u64> = (0..8)
        .map(|i| r.next(t0 + Duration::from_secs(i)).as_millis() as u64)
        .collect();
    assert_eq!(waits, [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
    assert_eq!(
        r.next(t0 + Duration::from_secs(7 + 121)),
        Duration::from_millis(800)
    );
}
