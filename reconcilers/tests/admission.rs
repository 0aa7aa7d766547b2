//! The admission webhooks driven through their real HTTP handler (the axum router, and once over
//! real HTTPS) with `AdmissionReview` v1 documents, for every rule, allowed and denied, with the
//! exemptions and ratcheting; and the kube implementations of the SubjectAccessReview and the
//! uncached user list against a scripted kube client.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::body::{Body, Bytes};
use axum::http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full};
use ichor_reconcilers::admission::access::{ichor_attributes, subject_access_review};
use ichor_reconcilers::admission::{
    AccessReviewer, AdmissionError, AdmissionObserver, AdmissionState, KubeAccessReviewer, KubeUserLister,
    ServerOptions, UserLister, controller_identity, router, serve_on,
};
use ichor_renderers::crd::IchorUser;
use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::api::authorization::v1::ResourceAttributes;
use serde_json::{Value, json};
use tower::ServiceExt as _;

const NS: &str = "ichor-system";

// ---------------------------------------------------------------------------------------------
// Fakes

/// Grants exactly the listed `(verb, resource/subresource)` rights, or fails every review.
#[derive(Default)]
struct FakeReviewer {
    granted: Vec<(String, String)>,
    fail: bool,
    calls: Mutex<Vec<(UserInfo, ResourceAttributes)>>,
}

impl FakeReviewer {
    fn granting(rights: &[(&str, &str)]) -> Self {
        Self {
            granted: rights
                .iter()
                .map(|(v, r)| ((*v).to_owned(), (*r).to_owned()))
                .collect(),
            ..Self::default()
        }
    }

    fn failing() -> Self {
        Self {
            fail: true,
            ..Self::default()
        }
    }

    fn calls(&self) -> Vec<(UserInfo, ResourceAttributes)> {
        self.calls.lock().unwrap().clone()
    }
}

#[async_trait]
impl AccessReviewer for FakeReviewer {
    async fn allowed(&self, user: &UserInfo, attrs: &ResourceAttributes) -> Result<bool, AdmissionError> {
        self.calls.lock().unwrap().push((user.clone(), attrs.clone()));
        if self.fail {
            return Err(AdmissionError::AccessReview("connection refused".to_owned()));
        }
        let right = format!(
            "{}/{}",
            attrs.resource.as_deref().unwrap_or_default(),
            attrs.subresource.as_deref().unwrap_or_default()
        );
        let verb = attrs.verb.clone().unwrap_or_default();
        Ok(self.granted.iter().any(|(v, r)| *v == verb && *r == right))
    }
}

/// Lists a fixed set of users (or fails), counting the calls.
#[derive(Default)]
struct FakeLister {
    users: Vec<IchorUser>,
    fail: bool,
    calls: Mutex<Vec<String>>,
}

impl FakeLister {
    fn with(users: &[(&str, &[&str], bool)]) -> Self {
        Self {
            users: users.iter().map(|(n, r, d)| user_object(n, r, *d)).collect(),
            ..Self::default()
        }
    }

    fn calls(&self) -> usize {
        self.calls.lock().unwrap().len()
    }
}

#[async_trait]
impl UserLister for FakeLister {
    async fn list_users(&self, namespace: &str) -> Result<Vec<IchorUser>, AdmissionError> {
        self.calls.lock().unwrap().push(namespace.to_owned());
        if self.fail {
            return Err(AdmissionError::ListUsers("the server is unavailable".to_owned()));
        }
        Ok(self.users.clone())
    }
}

fn user_object(name: &str, roles: &[&str], disabled: bool) -> IchorUser {
    serde_json::from_value(json!({
        "apiVersion": "ichor.maesh.dev/v1alpha1",
        "kind": "IchorUser",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"roles": roles, "disabled": disabled}
    }))
    .unwrap()
}

#[derive(Default)]
struct CountingObserver {
    decisions: Mutex<Vec<(&'static str, bool)>>,
}

impl AdmissionObserver for CountingObserver {
    fn decided(&self, webhook: &'static str, allowed: bool, _elapsed: Duration) {
        self.decisions.lock().unwrap().push((webhook, allowed));
    }
}

struct Harness {
    reviewer: Arc<FakeReviewer>,
    lister: Arc<FakeLister>,
    router: axum::Router,
}

fn harness(reviewer: FakeReviewer, lister: FakeLister) -> Harness {
    let reviewer = Arc::new(reviewer);
    let lister = Arc::new(lister);
    let state = AdmissionState::new(reviewer.clone(), lister.clone(), controller_identity(NS));
    Harness {
        reviewer,
        lister,
        router: router(Arc::new(state)),
    }
}

// ---------------------------------------------------------------------------------------------
// Documents

struct Who<'a> {
    user: &'a str,
    groups: &'a [&'a str],
}

const ROOT: Who<'static> = Who {
    user: "ichor:root",
    groups: &["ichor:admin", "system:authenticated"],
};
const OPERATOR: Who<'static> = Who {
    user: "ichor:olga",
    groups: &["ichor:operator", "system:authenticated"],
};
const VIEWER: Who<'static> = Who {
    user: "ichor:vera",
    groups: &["ichor:viewer", "system:authenticated"],
};

fn review(kind: &str, operation: &str, who: &Who<'_>, name: &str, object: Value, old: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "ichor.maesh.dev", "version": "v1alpha1", "kind": kind},
            "resource": {"group": "ichor.maesh.dev", "version": "v1alpha1", "resource": format!("{}s", kind.to_lowercase())},
            "requestKind": {"group": "ichor.maesh.dev", "version": "v1alpha1", "kind": kind},
            "name": name,
            "namespace": NS,
            "operation": operation,
            "userInfo": {
                "username": who.user,
                "uid": "u-1234",
                "groups": who.groups,
                "extra": {"authentication.kubernetes.io/credential-id": ["JTI=abc"]}
            },
            "object": object,
            "oldObject": old,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    })
}

fn user(name: &str, roles: &[&str], disabled: bool) -> Value {
    json!({
        "apiVersion": "ichor.maesh.dev/v1alpha1",
        "kind": "IchorUser",
        "metadata": {"name": name, "namespace": NS, "uid": "9f1c"},
        "spec": {"displayName": name, "roles": roles, "disabled": disabled}
    })
}

fn cluster(spec: Value) -> Value {
    json!({
        "apiVersion": "ichor.maesh.dev/v1alpha1",
        "kind": "TalosCluster",
        "metadata": {"name": "prod", "namespace": NS},
        "spec": spec
    })
}

fn operation(kind: &str, action: Option<&str>) -> Value {
    let mut spec = json!({"cluster": "prod", "kind": kind});
    if let Some(action) = action {
        spec["action"] = json!(action);
    }
    json!({
        "apiVersion": "ichor.maesh.dev/v1alpha1",
        "kind": "TalosOperation",
        "metadata": {"name": "op-1", "namespace": NS},
        "spec": spec
    })
}

async fn post(router: &axum::Router, path: &str, body: impl Into<Body>) -> (StatusCode, Bytes) {
    let request = Request::builder()
        .method(Method::POST)
        .uri(path)
        .header("content-type", "application/json")
        .body(body.into())
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    (status, response.into_body().collect().await.unwrap().to_bytes())
}

/// Posts a review and returns `Ok(())` when allowed or `Err(message)` when denied, after checking
/// the response envelope (v1, same uid, 403 on denial).
async fn admit(router: &axum::Router, path: &str, doc: &Value) -> Result<(), String> {
    let (status, body) = post(router, path, serde_json::to_vec(doc).unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let answer: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(answer["response"]["uid"], doc["request"]["uid"]);
    if answer["response"]["allowed"] == json!(true) {
        assert!(answer["response"].get("status").is_none(), "{answer}");
        Ok(())
    } else {
        assert_eq!(answer["response"]["allowed"], json!(false));
        assert_eq!(answer["response"]["status"]["code"], json!(403), "{answer}");
        assert_eq!(answer["response"]["status"]["reason"], "Forbidden");
        Err(answer["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .to_owned())
    }
}

const USERS: &str = "/validate/ichorusers";
const CLUSTERS: &str = "/validate/talosclusters";
const OPERATIONS: &str = "/validate/talosoperations";

// ---------------------------------------------------------------------------------------------
// IchorUser: the grant rule

#[tokio::test]
async fn an_admin_may_create_an_admin() {
    let h = harness(FakeReviewer::default(), FakeLister::default());
    let doc = review(
        "IchorUser",
        "CREATE",
        &ROOT,
        "ann",
        user("ann", &["admin", "auditor"], false),
        Value::Null,
    );
    assert_eq!(admit(&h.router, USERS, &doc).await, Ok(()));
    assert_eq!(h.lister.calls(), 0, "a create never lists the other users");
}

#[tokio::test]
async fn an_operator_may_not_create_an_admin_and_the_message_is_the_apis() {
    let h = harness(FakeReviewer::default(), FakeLister::default());
    let doc = review(
        "IchorUser",
        "CREATE",
        &OPERATOR,
        "ann",
        user("ann", &["viewer", "admin"], false),
        Value::Null,
    );
    assert_eq!(
        admit(&h.router, USERS, &doc).await,
        Err(
            "spec.roles: you may not grant role \"admin\": it is above your highest role \"operator\""
                .to_owned()
        )
    );
}

#[tokio::test]
async fn a_viewer_may_create_a_viewer_but_not_an_operator() {
    let h = harness(FakeReviewer::default(), FakeLister::default());
    let ok = review(
        "IchorUser",
        "CREATE",
        &VIEWER,
        "bo",
        user("bo", &["viewer"], false),
        Value::Null,
    );
    assert_eq!(admit(&h.router, USERS, &ok).await, Ok(()));
    let refused = review(
        "IchorUser",
        "CREATE",
        &VIEWER,
        "bo",
        user("bo", &["operator"], false),
        Value::Null,
    );
    assert_eq!(
        admit(&h.router, USERS, &refused).await,
        Err(
            "spec.roles: you may not grant role \"operator\": it is above your highest role \"viewer\""
                .to_owned()
        )
    );
}

#[tokio::test]
async fn a_custom_role_needs_a_literal_match() {
    let h = harness(FakeReviewer::default(), FakeLister::default());
    let doc = review(
        "IchorUser",
        "CREATE",
        &OPERATOR,
        "bo",
        user("bo", &["auditor"], false),
        Value::Null,
    );
    assert_eq!(
        admit(&h.router, USERS, &doc).await,
        Err("spec.roles: you may not grant role \"auditor\": you do not hold it".to_owned())
    );
}

#[tokio::test]
async fn an_update_checks_only_the_roles_it_adds() {
    let h = harness(FakeReviewer::default(), FakeLister::default());
    // The operator renames an admin's display data; the admin role was already there.
    let mut renamed = user("ann", &["admin"], false);
    renamed["spec"]["displayName"] = json!("Ann B.");
    let doc = review(
        "IchorUser",
        "UPDATE",
        &OPERATOR,
        "ann",
        renamed,
        user("ann", &["admin"], false),
    );
    assert_eq!(admit(&h.router, USERS, &doc).await, Ok(()));
    // Adding admin is refused.
    let doc = review(
        "IchorUser",
        "UPDATE",
        &OPERATOR,
        "bo",
        user("bo", &["viewer", "admin"], false),
        user("bo", &["viewer"], false),
    );
    assert!(
        admit(&h.router, USERS, &doc)
            .await
            .unwrap_err()
            .contains("\"admin\"")
    );
}

#[tokio::test]
async fn identities_that_are_not_ichor_ones_are_not_limited_by_the_grant_rule() {
    let h = harness(FakeReviewer::default(), FakeLister::default());
    let external = Who {
        user: "oidc:bob@example.com",
        groups: &["oidc:platform", "system:authenticated"],
    };
    let doc = review(
        "IchorUser",
        "CREATE",
        &external,
        "ann",
        user("ann", &["admin"], false),
        Value::Null,
    );
    assert_eq!(admit(&h.router, USERS, &doc).await, Ok(()));
}

// ---------------------------------------------------------------------------------------------
// IchorUser: the last-enabled-admin rule

#[tokio::test]
async fn refuses_disabling_the_last_enabled_admin_after_an_uncached_list() {
    let h = harness(
        FakeReviewer::default(),
        FakeLister::with(&[
            ("ann", &["admin"], false),
            ("bo", &["viewer"], false),
            ("cy", &["admin"], true),
        ]),
    );
    let doc = review(
        "IchorUser",
        "UPDATE",
        &ROOT,
        "ann",
        user("ann", &["admin"], true),
        user("ann", &["admin"], false),
    );
    assert_eq!(
        admit(&h.router, USERS, &doc).await,
        Err("spec.disabled: cannot disable, demote or delete the last enabled admin \"ann\": make another user an \
             enabled admin first"
            .to_owned())
    );
    assert_eq!(*h.lister.calls.lock().unwrap(), vec![NS.to_owned()]);
}

#[tokio::test]
async fn refuses_demoting_or_deleting_the_last_enabled_admin() {
    let h = harness(
        FakeReviewer::default(),
        FakeLister::with(&[("ann", &["admin"], false)]),
    );
    let demote = review(
        "IchorUser",
        "UPDATE",
        &ROOT,
        "ann",
        user("ann", &["viewer"], false),
        user("ann", &["admin"], false),
    );
    assert!(
        admit(&h.router, USERS, &demote)
            .await
            .unwrap_err()
            .starts_with("spec.roles: cannot disable, demote")
    );
    let delete = review(
        "IchorUser",
        "DELETE",
        &ROOT,
        "ann",
        Value::Null,
        user("ann", &["admin"], false),
    );
    assert_eq!(
        admit(&h.router, USERS, &delete).await,
        Err("cannot disable, demote or delete the last enabled admin \"ann\": make another user an enabled admin \
             first"
            .to_owned())
    );
}

#[tokio::test]
async fn allows_it_when_another_enabled_admin_exists() {
    let h = harness(
        FakeReviewer::default(),
        FakeLister::with(&[("ann", &["admin"], false), ("dee", &["admin", "viewer"], false)]),
    );
    let delete = review(
        "IchorUser",
        "DELETE",
        &ROOT,
        "ann",
        Value::Null,
        user("ann", &["admin"], false),
    );
    assert_eq!(admit(&h.router, USERS, &delete).await, Ok(()));
    assert_eq!(h.lister.calls(), 1);
}

#[tokio::test]
async fn a_change_that_keeps_every_enabled_admin_needs_no_list() {
    let h = harness(FakeReviewer::default(), FakeLister::default());
    let docs = [
        review(
            "IchorUser",
            "UPDATE",
            &ROOT,
            "bo",
            user("bo", &["viewer"], true),
            user("bo", &["viewer"], false),
        ),
        review(
            "IchorUser",
            "UPDATE",
            &ROOT,
            "ann",
            user("ann", &["admin", "viewer"], false),
            user("ann", &["admin"], false),
        ),
        review(
            "IchorUser",
            "DELETE",
            &ROOT,
            "cy",
            Value::Null,
            user("cy", &["admin"], true),
        ),
    ];
    for doc in &docs {
        assert_eq!(admit(&h.router, USERS, doc).await, Ok(()));
    }
    assert_eq!(h.lister.calls(), 0);
}

#[tokio::test]
async fn system_identities_and_system_masters_are_exempt_from_the_last_admin_rule() {
    let h = harness(
        FakeReviewer::default(),
        FakeLister::with(&[("ann", &["admin"], false)]),
    );
    let namespace_controller = Who {
        user: "system:serviceaccount:kube-system:namespace-controller",
        groups: &["system:serviceaccounts", "system:authenticated"],
    };
    let delete = review(
        "IchorUser",
        "DELETE",
        &namespace_controller,
        "ann",
        Value::Null,
        user("ann", &["admin"], false),
    );
    assert_eq!(admit(&h.router, USERS, &delete).await, Ok(()));
    let override_cert = Who {
        user: "admin",
        groups: &["system:masters", "system:authenticated"],
    };
    let disable = review(
        "IchorUser",
        "UPDATE",
        &override_cert,
        "ann",
        user("ann", &["admin"], true),
        user("ann", &["admin"], false),
    );
    assert_eq!(admit(&h.router, USERS, &disable).await, Ok(()));
    assert_eq!(h.lister.calls(), 0, "exempt requests never list");
}

#[tokio::test]
async fn an_object_already_being_deleted_is_not_guarded() {
    let h = harness(
        FakeReviewer::default(),
        FakeLister::with(&[("ann", &["admin"], false)]),
    );
    let mut stored = user("ann", &["admin"], false);
    stored["metadata"]["deletionTimestamp"] = json!("2026-11-29T10:00:00Z");
    stored["metadata"]["finalizers"] = json!(["example.com/cleanup"]);
    let mut released = stored.clone();
    released["metadata"]["finalizers"] = json!([]);
    released["spec"]["disabled"] = json!(true);
    let doc = review("IchorUser", "UPDATE", &ROOT, "ann", released, stored.clone());
    assert_eq!(admit(&h.router, USERS, &doc).await, Ok(()));
    let delete = review("IchorUser", "DELETE", &ROOT, "ann", Value::Null, stored);
    assert_eq!(admit(&h.router, USERS, &delete).await, Ok(()));
    assert_eq!(h.lister.calls(), 0);
}

#[tokio::test]
async fn a_failed_user_list_refuses_the_change() {
    let lister = FakeLister {
        fail: true,
        ..FakeLister::default()
    };
    let h = harness(FakeReviewer::default(), lister);
    let doc = review(
        "IchorUser",
        "DELETE",
        &ROOT,
        "ann",
        Value::Null,
        user("ann", &["admin"], false),
    );
    let message = admit(&h.router, USERS, &doc).await.unwrap_err();
    assert!(message.contains("could not be listed"), "{message}");
    assert!(message.contains("refused until it can be checked"), "{message}");
}

// ---------------------------------------------------------------------------------------------
// TalosCluster: spec.authentication

fn auth_spec(contract: Option<&str>, auth: Value) -> Value {
    let mut spec = json!({"endpoint": "https://10.0.0.1:6443", "authentication": auth});
    if let Some(c) = contract {
        spec["versionContract"] = json!(c);
    }
    spec
}

fn ichor_auth() -> Value {
    json!({"ichor": {"enabled": true, "url": "https://ichor.example.com"}})
}

#[tokio::test]
async fn setting_authentication_needs_update_on_talosclusters_authentication() {
    let h = harness(
        FakeReviewer::granting(&[("update", "talosclusters/authentication")]),
        FakeLister::default(),
    );
    let doc = review(
        "TalosCluster",
        "CREATE",
        &ROOT,
        "prod",
        cluster(auth_spec(Some("v1.14"), ichor_auth())),
        Value::Null,
    );
    assert_eq!(admit(&h.router, CLUSTERS, &doc).await, Ok(()));
    let calls = h.reviewer.calls();
    assert_eq!(calls.len(), 1);
    let (who, attrs) = &calls[0];
    assert_eq!(who.username.as_deref(), Some("ichor:root"));
    assert_eq!(who.uid.as_deref(), Some("u-1234"));
    assert_eq!(
        who.groups.as_deref(),
        Some(&["ichor:admin".to_owned(), "system:authenticated".to_owned()][..])
    );
    assert_eq!(
        who.extra,
        Some(BTreeMap::from([(
            "authentication.kubernetes.io/credential-id".to_owned(),
            vec!["JTI=abc".to_owned()]
        )]))
    );
    assert_eq!(
        attrs,
        &ichor_attributes("update", "talosclusters", "authentication", NS, "prod")
    );
}

#[tokio::test]
async fn refuses_an_authentication_change_without_the_right() {
    let h = harness(FakeReviewer::default(), FakeLister::default());
    let old = cluster(auth_spec(Some("v1.14"), ichor_auth()));
    let new = cluster(auth_spec(
        Some("v1.14"),
        json!({"external": [{"issuerURL": "https://idp.example.com", "audiences": ["k8s"]}]}),
    ));
    let doc = review("TalosCluster", "UPDATE", &OPERATOR, "prod", new, old.clone());
    assert_eq!(
        admit(&h.router, CLUSTERS, &doc).await,
        Err("spec.authentication: changing it needs verb \"update\" on talosclusters/authentication in namespace \
             \"ichor-system\", which user \"ichor:olga\" does not hold"
            .to_owned())
    );
    // Removing it is a change too.
    let mut removed = old.clone();
    removed["spec"].as_object_mut().unwrap().remove("authentication");
    let doc = review("TalosCluster", "UPDATE", &OPERATOR, "prod", removed, old);
    assert!(
        admit(&h.router, CLUSTERS, &doc)
            .await
            .unwrap_err()
            .contains("talosclusters/authentication")
    );
}

#[tokio::test]
async fn refuses_authentication_below_contract_v1_14_or_without_a_contract() {
    let h = harness(
        FakeReviewer::granting(&[("update", "talosclusters/authentication")]),
        FakeLister::default(),
    );
    let old = review(
        "TalosCluster",
        "CREATE",
        &ROOT,
        "prod",
        cluster(auth_spec(Some("v1.13"), ichor_auth())),
        Value::Null,
    );
    assert_eq!(
        admit(&h.router, CLUSTERS, &old).await,
        Err("spec.versionContract: v1.13 is too old: structured authentication needs contract v1.14 or later; raise \
             spec.versionContract or remove spec.authentication"
            .to_owned())
    );
    let none = review(
        "TalosCluster",
        "CREATE",
        &ROOT,
        "prod",
        cluster(auth_spec(None, ichor_auth())),
        Value::Null,
    );
    assert_eq!(
        admit(&h.router, CLUSTERS, &none).await,
        Err(
            "spec.versionContract: required: structured authentication needs contract v1.14 or later"
                .to_owned()
        )
    );
    assert!(
        h.reviewer.calls().is_empty(),
        "static refusals come before the access review"
    );
}

#[tokio::test]
async fn refuses_an_external_prefix_under_ichor() {
    let h = harness(
        FakeReviewer::granting(&[("update", "talosclusters/authentication")]),
        FakeLister::default(),
    );
    let auth = json!({"external": [{"issuerURL": "https://idp.example.com", "audiences": ["k8s"], "usernamePrefix": "ichor:"}]});
    let doc = review(
        "TalosCluster",
        "CREATE",
        &ROOT,
        "prod",
        cluster(auth_spec(Some("v1.15"), auth)),
        Value::Null,
    );
    assert_eq!(
        admit(&h.router, CLUSTERS, &doc).await,
        Err("spec.authentication.external[0].usernamePrefix: \"ichor:\" is not allowed: the prefix \"ichor:\" belongs \
             to Ichor's own users and groups; choose another, such as \"oidc:\""
            .to_owned())
    );
}

#[tokio::test]
async fn an_update_that_leaves_authentication_alone_is_neither_checked_nor_reviewed() {
    let h = harness(FakeReviewer::default(), FakeLister::default());
    // Stored before the rule existed: a refused prefix. Unrelated edits still pass (ratcheting).
    let auth = json!({"external": [{"issuerURL": "https://idp.example.com", "audiences": ["k8s"], "groupsPrefix": ""}]});
    let old = cluster(auth_spec(Some("v1.14"), auth));
    let mut new = old.clone();
    new["spec"]["endpoint"] = json!("https://10.0.0.2:6443");
    let doc = review("TalosCluster", "UPDATE", &OPERATOR, "prod", new, old.clone());
    assert_eq!(admit(&h.router, CLUSTERS, &doc).await, Ok(()));
    assert!(h.reviewer.calls().is_empty());
    // Changing the contract re-runs the static checks.
    let mut bumped = old.clone();
    bumped["spec"]["versionContract"] = json!("v1.15");
    let doc = review("TalosCluster", "UPDATE", &OPERATOR, "prod", bumped, old);
    assert!(
        admit(&h.router, CLUSTERS, &doc)
            .await
            .unwrap_err()
            .contains("groupsPrefix")
    );
}

#[tokio::test]
async fn a_failed_access_review_refuses_saying_authorization_could_not_be_checked() {
    let h = harness(FakeReviewer::failing(), FakeLister::default());
    let doc = review(
        "TalosCluster",
        "CREATE",
        &ROOT,
        "prod",
        cluster(auth_spec(Some("v1.14"), ichor_auth())),
        Value::Null,
    );
    let message = admit(&h.router, CLUSTERS, &doc).await.unwrap_err();
    assert!(message.starts_with("spec.authentication: "), "{message}");
    assert!(
        message.contains("authorization could not be checked"),
        "{message}"
    );
}

// ---------------------------------------------------------------------------------------------
// TalosCluster: Cilium values

fn cni_spec(values: Value, preset: &str) -> Value {
    json!({"versionContract": "v1.14", "cni": {"preset": preset, "cilium": {"values": values}}})
}

#[tokio::test]
async fn changing_the_cilium_values_needs_update_on_talosclusters_cilium_values() {
    let admin = harness(
        FakeReviewer::granting(&[("update", "talosclusters/cilium-values")]),
        FakeLister::default(),
    );
    let old = cluster(cni_spec(json!({"hubble": {"enabled": false}}), "cilium"));
    let new = cluster(cni_spec(json!({"hubble": {"enabled": true}}), "cilium"));
    let doc = review("TalosCluster", "UPDATE", &ROOT, "prod", new.clone(), old.clone());
    assert_eq!(admit(&admin.router, CLUSTERS, &doc).await, Ok(()));
    assert_eq!(
        admin.reviewer.calls()[0].1,
        ichor_attributes("update", "talosclusters", "cilium-values", NS, "prod")
    );
    let operator = harness(FakeReviewer::default(), FakeLister::default());
    let doc = review("TalosCluster", "UPDATE", &OPERATOR, "prod", new, old);
    assert_eq!(
        admit(&operator.router, CLUSTERS, &doc).await,
        Err("spec.cni.cilium.values: changing the Cilium values needs verb \"update\" on \
             talosclusters/cilium-values in namespace \"ichor-system\", which user \"ichor:olga\" does not hold"
            .to_owned())
    );
}

#[tokio::test]
async fn refuses_invalid_cilium_values_with_the_validators_message() {
    let h = harness(
        FakeReviewer::granting(&[("update", "talosclusters/cilium-values")]),
        FakeLister::default(),
    );
    let doc = review(
        "TalosCluster",
        "CREATE",
        &ROOT,
        "prod",
        cluster(cni_spec(json!({"totallyUnknownKey": 1}), "cilium")),
        Value::Null,
    );
    assert_eq!(
        admit(&h.router, CLUSTERS, &doc).await,
        Err(
            "spec.cni.cilium.values.totallyUnknownKey is not a value of the Cilium 1.20.0 chart (the chart \
             ignores unknown keys, so a typo would pass silently)"
                .to_owned()
        )
    );
    assert!(
        h.reviewer.calls().is_empty(),
        "invalid values are refused before the access review"
    );
    // An Ichor-owned key and an unknown tunnel mode, both in the one message.
    let mut spec = cni_spec(json!({"kubeProxyReplacement": true}), "cilium");
    spec["cni"]["tunnel"] = json!("ipip");
    let doc = review(
        "TalosCluster",
        "CREATE",
        &ROOT,
        "prod",
        cluster(spec),
        Value::Null,
    );
    let message = admit(&h.router, CLUSTERS, &doc).await.unwrap_err();
    assert!(message.contains("spec.cni.tunnel is \"ipip\""), "{message}");
    assert!(
        message.contains("; spec.cni.cilium.values.kubeProxyReplacement "),
        "{message}"
    );
}

#[tokio::test]
async fn stored_invalid_values_do_not_block_unrelated_updates() {
    let h = harness(FakeReviewer::default(), FakeLister::default());
    let old = cluster(cni_spec(json!({"totallyUnknownKey": 1}), "cilium"));
    let mut new = old.clone();
    new["spec"]["endpoint"] = json!("https://10.0.0.2:6443");
    let doc = review("TalosCluster", "UPDATE", &OPERATOR, "prod", new, old.clone());
    assert_eq!(admit(&h.router, CLUSTERS, &doc).await, Ok(()));
    assert!(h.reviewer.calls().is_empty(), "unchanged values need no right");
    // Changing the tunnel mode re-validates the stored values.
    let mut tunnel = old.clone();
    tunnel["spec"]["cni"]["tunnel"] = json!("geneve");
    let doc = review("TalosCluster", "UPDATE", &OPERATOR, "prod", tunnel, old);
    assert!(
        admit(&h.router, CLUSTERS, &doc)
            .await
            .unwrap_err()
            .contains("totallyUnknownKey")
    );
}

#[tokio::test]
async fn the_values_checks_are_skipped_for_preset_unmanaged_but_the_right_is_not() {
    let h = harness(
        FakeReviewer::granting(&[("update", "talosclusters/cilium-values")]),
        FakeLister::default(),
    );
    let doc = review(
        "TalosCluster",
        "CREATE",
        &ROOT,
        "prod",
        cluster(cni_spec(json!({"totallyUnknownKey": 1}), "unmanaged")),
        Value::Null,
    );
    assert_eq!(admit(&h.router, CLUSTERS, &doc).await, Ok(()));
    let none = harness(FakeReviewer::default(), FakeLister::default());
    assert!(
        admit(&none.router, CLUSTERS, &doc)
            .await
            .unwrap_err()
            .contains("cilium-values")
    );
}

// ---------------------------------------------------------------------------------------------
// TalosOperation: destructive starts

#[tokio::test]
async fn destructive_kinds_need_start_on_their_subresource() {
    let cases = [
        ("shutdown", None, "shutdown"),
        ("ca-rotation", None, "ca-rotation"),
        ("etcd-restore", None, "etcd-restore"),
        ("node", Some("reset"), "node-reset"),
        ("node", Some("shutdown"), "node-shutdown"),
    ];
    for (kind, action, sub) in cases {
        let right = format!("talosoperations/{sub}");
        let allowed = harness(
            FakeReviewer::granting(&[("start", right.as_str())]),
            FakeLister::default(),
        );
        let doc = review(
            "TalosOperation",
            "CREATE",
            &ROOT,
            "op-1",
            operation(kind, action),
            Value::Null,
        );
        assert_eq!(
            admit(&allowed.router, OPERATIONS, &doc).await,
            Ok(()),
            "{kind} {action:?}"
        );
        assert_eq!(
            allowed.reviewer.calls()[0].1,
            ichor_attributes("start", "talosoperations", sub, NS, "op-1")
        );
        let refused = harness(FakeReviewer::default(), FakeLister::default());
        let doc = review(
            "TalosOperation",
            "CREATE",
            &OPERATOR,
            "op-1",
            operation(kind, action),
            Value::Null,
        );
        let message = admit(&refused.router, OPERATIONS, &doc).await.unwrap_err();
        assert!(
            message.contains(&format!("verb \"start\" on {right}")),
            "{message}"
        );
    }
}

#[tokio::test]
async fn the_denial_names_the_field() {
    let h = harness(FakeReviewer::default(), FakeLister::default());
    let doc = review(
        "TalosOperation",
        "CREATE",
        &OPERATOR,
        "op-1",
        operation("ca-rotation", None),
        Value::Null,
    );
    assert_eq!(
        admit(&h.router, OPERATIONS, &doc).await,
        Err("spec.kind: starting a \"ca-rotation\" operation needs verb \"start\" on talosoperations/ca-rotation in \
             namespace \"ichor-system\", which user \"ichor:olga\" does not hold"
            .to_owned())
    );
    let doc = review(
        "TalosOperation",
        "CREATE",
        &OPERATOR,
        "op-1",
        operation("node", Some("reset")),
        Value::Null,
    );
    assert!(
        admit(&h.router, OPERATIONS, &doc)
            .await
            .unwrap_err()
            .starts_with("spec.action: starting a node \"reset\"")
    );
}

#[tokio::test]
async fn other_kinds_need_no_right() {
    let h = harness(FakeReviewer::default(), FakeLister::default());
    for (kind, action) in [
        ("config", None),
        ("node", Some("reboot")),
        ("upgrade", None),
        ("cni", None),
    ] {
        let doc = review(
            "TalosOperation",
            "CREATE",
            &VIEWER,
            "op-1",
            operation(kind, action),
            Value::Null,
        );
        assert_eq!(admit(&h.router, OPERATIONS, &doc).await, Ok(()), "{kind}");
    }
    assert!(h.reviewer.calls().is_empty());
}

#[tokio::test]
async fn the_controllers_own_identity_is_exempt() {
    let h = harness(FakeReviewer::default(), FakeLister::default());
    let me = controller_identity(NS);
    let controller = Who {
        user: &me,
        groups: &["system:serviceaccounts", "system:serviceaccounts:ichor-system"],
    };
    let doc = review(
        "TalosOperation",
        "CREATE",
        &controller,
        "op-1",
        operation("etcd-restore", None),
        Value::Null,
    );
    assert_eq!(admit(&h.router, OPERATIONS, &doc).await, Ok(()));
    assert!(h.reviewer.calls().is_empty());
    // Another ServiceAccount of the same namespace is not.
    let other = Who {
        user: "system:serviceaccount:ichor-system:ichor-ui",
        groups: &[],
    };
    let doc = review(
        "TalosOperation",
        "CREATE",
        &other,
        "op-1",
        operation("etcd-restore", None),
        Value::Null,
    );
    assert!(admit(&h.router, OPERATIONS, &doc).await.is_err());
}

#[tokio::test]
async fn a_talos_operation_update_is_refused_as_not_admitted() {
    let h = harness(FakeReviewer::default(), FakeLister::default());
    let doc = review(
        "TalosOperation",
        "UPDATE",
        &ROOT,
        "op-1",
        operation("config", None),
        operation("config", None),
    );
    assert!(
        admit(&h.router, OPERATIONS, &doc)
            .await
            .unwrap_err()
            .starts_with("request.operation: \"UPDATE\"")
    );
}

// ---------------------------------------------------------------------------------------------
// The envelope: malformed bodies, unknown kinds, limits

#[tokio::test]
async fn malformed_bodies_are_answered_with_400_and_the_reason() {
    let h = harness(FakeReviewer::default(), FakeLister::default());
    let (status, body) = post(&h.router, USERS, "{not json").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(String::from_utf8_lossy(&body).starts_with("the body is not a valid AdmissionReview"));

    let mut v1beta1 = review(
        "IchorUser",
        "CREATE",
        &ROOT,
        "ann",
        user("ann", &[], false),
        Value::Null,
    );
    v1beta1["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let (status, body) = post(&h.router, USERS, serde_json::to_vec(&v1beta1).unwrap()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(String::from_utf8_lossy(&body).contains("not an admission.k8s.io/v1 AdmissionReview"));

    let (status, body) = post(
        &h.router,
        USERS,
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(String::from_utf8_lossy(&body).contains("has no request"));

    let mut no_uid = review(
        "IchorUser",
        "CREATE",
        &ROOT,
        "ann",
        user("ann", &[], false),
        Value::Null,
    );
    no_uid["request"]["uid"] = json!("");
    let (status, body) = post(&h.router, USERS, serde_json::to_vec(&no_uid).unwrap()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(String::from_utf8_lossy(&body).starts_with("request.uid: required"));

    let mut wrong_type = review(
        "IchorUser",
        "CREATE",
        &ROOT,
        "ann",
        user("ann", &[], false),
        Value::Null,
    );
    wrong_type["request"]["userInfo"]["groups"] = json!("ichor:admin");
    let (status, body) = post(&h.router, USERS, serde_json::to_vec(&wrong_type).unwrap()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        String::from_utf8_lossy(&body).contains("request.userInfo.groups"),
        "{body:?}"
    );
}

#[tokio::test]
async fn a_body_over_3_mib_is_refused_with_413() {
    let h = harness(FakeReviewer::default(), FakeLister::default());
    let mut doc = review(
        "IchorUser",
        "CREATE",
        &ROOT,
        "ann",
        user("ann", &[], false),
        Value::Null,
    );
    doc["request"]["object"]["metadata"]["annotations"] = json!({"big": "x".repeat(3 * 1024 * 1024)});
    let (status, _) = post(&h.router, USERS, serde_json::to_vec(&doc).unwrap()).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    // Just under the limit is read.
    doc["request"]["object"]["metadata"]["annotations"] = json!({"big": "x".repeat(2 * 1024 * 1024)});
    assert_eq!(admit(&h.router, USERS, &doc).await, Ok(()));
}

#[tokio::test]
async fn a_kind_the_path_does_not_admit_is_refused() {
    let h = harness(FakeReviewer::default(), FakeLister::default());
    let mut pod = review(
        "IchorUser",
        "CREATE",
        &ROOT,
        "ann",
        user("ann", &[], false),
        Value::Null,
    );
    pod["request"]["kind"] = json!({"group": "", "version": "v1", "kind": "Pod"});
    assert_eq!(
        admit(&h.router, USERS, &pod).await,
        Err(
            "request.kind: /Pod is not admitted by this webhook, which admits only ichor.maesh.dev/IchorUser"
                .to_owned()
        )
    );
    let user_at_clusters = review(
        "IchorUser",
        "CREATE",
        &ROOT,
        "ann",
        user("ann", &[], false),
        Value::Null,
    );
    assert!(
        admit(&h.router, CLUSTERS, &user_at_clusters)
            .await
            .unwrap_err()
            .starts_with("request.kind:")
    );
    let mut status = review(
        "IchorUser",
        "UPDATE",
        &ROOT,
        "ann",
        user("ann", &[], false),
        user("ann", &[], false),
    );
    status["request"]["subResource"] = json!("status");
    assert!(
        admit(&h.router, USERS, &status)
            .await
            .unwrap_err()
            .starts_with("request.subResource:")
    );
}

#[tokio::test]
async fn a_missing_or_undecodable_object_is_refused() {
    let h = harness(FakeReviewer::default(), FakeLister::default());
    let missing = review("IchorUser", "CREATE", &ROOT, "ann", Value::Null, Value::Null);
    assert_eq!(
        admit(&h.router, USERS, &missing).await,
        Err("request.object: required: the IchorUser is missing".to_owned())
    );
    let mut bad = user("ann", &[], false);
    bad["spec"]["roles"] = json!("admin");
    let doc = review("IchorUser", "CREATE", &ROOT, "ann", bad, Value::Null);
    assert!(
        admit(&h.router, USERS, &doc)
            .await
            .unwrap_err()
            .starts_with("request.object: not a valid IchorUser: spec.roles")
    );
}

#[tokio::test]
async fn healthz_answers_ok_and_the_observer_sees_every_decision() {
    let reviewer = Arc::new(FakeReviewer::default());
    let observer = Arc::new(CountingObserver::default());
    let state = AdmissionState::new(reviewer, Arc::new(FakeLister::default()), controller_identity(NS))
        .with_observer(observer.clone());
    let router = router(Arc::new(state));
    let response = router
        .clone()
        .oneshot(Request::builder().uri("/healthz").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let ok = review(
        "IchorUser",
        "CREATE",
        &VIEWER,
        "bo",
        user("bo", &["viewer"], false),
        Value::Null,
    );
    let refused = review(
        "TalosOperation",
        "CREATE",
        &VIEWER,
        "op-1",
        operation("shutdown", None),
        Value::Null,
    );
    assert_eq!(admit(&router, USERS, &ok).await, Ok(()));
    assert!(admit(&router, OPERATIONS, &refused).await.is_err());
    assert_eq!(
        *observer.decisions.lock().unwrap(),
        vec![("ichorusers", true), ("talosoperations", false)]
    );
}

// ---------------------------------------------------------------------------------------------
// Real HTTPS, with the certificate appearing after start

#[tokio::test]
async fn serves_over_https_once_the_certificate_appears() {
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = AdmissionState::new(
        Arc::new(FakeReviewer::default()),
        Arc::new(FakeLister::default()),
        controller_identity(NS),
    );
    let mut options = ServerOptions::default();
    options.watch.poll_interval = Duration::from_millis(100);
    options.serve.shutdown_grace = Duration::from_secs(1);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve_on(
        listener,
        dir.path().to_path_buf(),
        Arc::new(state),
        async move {
            let _ = stop_rx.await;
        },
        options,
    ));

    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["ichor-controller-webhook.ichor-system.svc".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert.pem().as_bytes()).unwrap())
        .resolve("ichor-controller-webhook.ichor-system.svc", addr)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let url = format!(
        "https://ichor-controller-webhook.ichor-system.svc:{}{USERS}",
        addr.port()
    );
    let doc = review(
        "IchorUser",
        "CREATE",
        &OPERATOR,
        "ann",
        user("ann", &["admin"], false),
        Value::Null,
    );

    // No pair yet: the handshake fails.
    assert!(client.post(&url).json(&doc).send().await.is_err());

    std::fs::write(dir.path().join("tls.key"), key.serialize_pem()).unwrap();
    std::fs::write(dir.path().join("tls.crt"), cert.pem()).unwrap();
    let mut answer = None;
    for _ in 0..50 {
        if let Ok(response) = client.post(&url).json(&doc).send().await {
            answer = Some(response.json::<Value>().await.unwrap());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let answer = answer.expect("the server never served the certificate written after start");
    assert_eq!(answer["response"]["uid"], doc["request"]["uid"]);
    assert_eq!(answer["response"]["allowed"], json!(false));
    assert!(
        answer["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("\"admin\"")
    );

    stop_tx.send(()).unwrap();
    assert!(
        tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .unwrap()
            .unwrap()
            .is_ok()
    );
}

// ---------------------------------------------------------------------------------------------
// The kube implementations, against a scripted kube client

type Script = Arc<dyn Fn(Method, String, Value) -> Option<(u16, Value)> + Send + Sync>;

/// Every request a scripted client saw: method, path and query, JSON body.
type Seen = Arc<Mutex<Vec<(Method, String, Value)>>>;

/// A kube client whose HTTP side answers with `script(method, path?query, body)`; `None` never
/// answers (a hung apiserver). Every request is recorded.
fn scripted_client(script: Script) -> (kube::Client, Seen) {
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let service = tower::service_fn(move |request: Request<kube::client::Body>| {
        let script = script.clone();
        let log = log.clone();
        async move {
            let method = request.method().clone();
            let path = request
                .uri()
                .path_and_query()
                .map(ToString::to_string)
                .unwrap_or_default();
            let bytes = request.into_body().collect().await.unwrap().to_bytes();
            let body: Value = if bytes.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&bytes).unwrap()
            };
            log.lock()
                .unwrap()
                .push((method.clone(), path.clone(), body.clone()));
            match script(method, path, body) {
                Some((status, answer)) => Ok::<_, Infallible>(
                    Response::builder()
                        .status(status)
                        .header("content-type", "application/json")
                        .body(Full::new(Bytes::from(serde_json::to_vec(&answer).unwrap())))
                        .unwrap(),
                ),
                None => std::future::pending().await,
            }
        }
    });
    (kube::Client::new(service, "default"), seen)
}

fn sar_answer(request: &Value, allowed: bool, denied: Option<bool>) -> Value {
    let mut answer = request.clone();
    answer["status"] = json!({"allowed": allowed});
    if let Some(d) = denied {
        answer["status"]["denied"] = json!(d);
    }
    answer
}

fn alice() -> UserInfo {
    UserInfo {
        username: Some("ichor:alice".to_owned()),
        uid: Some("u-1".to_owned()),
        groups: Some(vec!["ichor:operator".to_owned()]),
        extra: Some(BTreeMap::from([("scopes".to_owned(), vec!["a".to_owned()])])),
    }
}

#[tokio::test]
async fn the_kube_reviewer_posts_a_subject_access_review_for_the_requests_user() {
    let (client, seen) = scripted_client(Arc::new(|_, _, body| Some((201, sar_answer(&body, true, None)))));
    let reviewer = KubeAccessReviewer::new(client);
    let attrs = ichor_attributes("start", "talosoperations", "etcd-restore", NS, "op-1");
    assert!(reviewer.allowed(&alice(), &attrs).await.unwrap());
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    let (method, path, body) = &seen[0];
    assert_eq!(method, Method::POST);
    assert!(
        path.starts_with("/apis/authorization.k8s.io/v1/subjectaccessreviews"),
        "{path}"
    );
    assert_eq!(
        *body,
        serde_json::to_value(subject_access_review(&alice(), &attrs)).unwrap()
    );
    assert_eq!(body["spec"]["user"], "ichor:alice");
    assert_eq!(body["spec"]["uid"], "u-1");
    assert_eq!(body["spec"]["groups"], json!(["ichor:operator"]));
    assert_eq!(body["spec"]["extra"], json!({"scopes": ["a"]}));
    assert_eq!(
        body["spec"]["resourceAttributes"],
        json!({"group": "ichor.maesh.dev", "name": "op-1", "namespace": NS, "resource": "talosoperations", "subresource": "etcd-restore", "verb": "start"})
    );
}

#[tokio::test]
async fn the_kube_reviewer_reads_denied_and_not_allowed_as_no() {
    for (allowed, denied) in [(false, None), (false, Some(true)), (true, Some(true))] {
        let (client, _) = scripted_client(Arc::new(move |_, _, body| {
            Some((201, sar_answer(&body, allowed, denied)))
        }));
        let attrs = ichor_attributes("update", "talosclusters", "authentication", NS, "prod");
        assert!(
            !KubeAccessReviewer::new(client)
                .allowed(&alice(), &attrs)
                .await
                .unwrap(),
            "{allowed} {denied:?}"
        );
    }
}

#[tokio::test]
async fn the_kube_reviewer_reports_an_apiserver_error() {
    let (client, _) = scripted_client(Arc::new(|_, _, _| {
        Some((
            403,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "subjectaccessreviews is forbidden", "reason": "Forbidden", "code": 403}),
        ))
    }));
    let attrs = ichor_attributes("update", "talosclusters", "authentication", NS, "prod");
    let error = KubeAccessReviewer::new(client)
        .allowed(&alice(), &attrs)
        .await
        .unwrap_err();
    assert!(matches!(error, AdmissionError::AccessReview(_)), "{error:?}");
    assert!(
        error
            .to_string()
            .starts_with("authorization could not be checked"),
        "{error}"
    );
}

#[tokio::test]
async fn a_hung_subject_access_review_times_out_and_the_webhook_refuses() {
    let (client, _) = scripted_client(Arc::new(|_, _, _| None));
    let reviewer = Arc::new(KubeAccessReviewer::with_timeout(
        client,
        Duration::from_millis(200),
    ));
    let attrs = ichor_attributes("start", "talosoperations", "shutdown", NS, "op-1");
    let error = reviewer.allowed(&alice(), &attrs).await.unwrap_err();
    assert!(
        matches!(error, AdmissionError::AccessReviewTimeout(_)),
        "{error:?}"
    );

    let state = AdmissionState::new(reviewer, Arc::new(FakeLister::default()), controller_identity(NS));
    let router = router(Arc::new(state));
    let doc = review(
        "TalosOperation",
        "CREATE",
        &ROOT,
        "op-1",
        operation("shutdown", None),
        Value::Null,
    );
    let message = admit(&router, OPERATIONS, &doc).await.unwrap_err();
    assert!(
        message.contains(
            "authorization could not be checked: the SubjectAccessReview did not answer within 200ms"
        ),
        "{message}"
    );
}

#[tokio::test]
async fn a_granted_subject_access_review_through_kube_admits_the_request() {
    let (client, _) = scripted_client(Arc::new(|_, _, body| Some((201, sar_answer(&body, true, None)))));
    let state = AdmissionState::new(
        Arc::new(KubeAccessReviewer::new(client)),
        Arc::new(FakeLister::default()),
        controller_identity(NS),
    );
    let doc = review(
        "TalosOperation",
        "CREATE",
        &ROOT,
        "op-1",
        operation("shutdown", None),
        Value::Null,
    );
    assert_eq!(admit(&router(Arc::new(state)), OPERATIONS, &doc).await, Ok(()));
}

fn user_list(items: &[(&str, &[&str], bool)], next: Option<&str>) -> Value {
    json!({
        "apiVersion": "ichor.maesh.dev/v1alpha1",
        "kind": "IchorUserList",
        "metadata": {"resourceVersion": "42", "continue": next.unwrap_or("")},
        "items": items.iter().map(|(n, r, d)| serde_json::to_value(user_object(n, r, *d)).unwrap()).collect::<Vec<_>>()
    })
}

#[tokio::test]
async fn the_kube_lister_reads_every_page_from_the_apiserver() {
    let (client, seen) = scripted_client(Arc::new(|method, path, _| {
        assert_eq!(method, Method::GET);
        if path.contains("continue=page2") {
            Some((200, user_list(&[("cy", &["viewer"], false)], None)))
        } else {
            Some((
                200,
                user_list(
                    &[("ann", &["admin"], false), ("bo", &["admin"], true)],
                    Some("page2"),
                ),
            ))
        }
    }));
    let users = KubeUserLister::new(client).list_users(NS).await.unwrap();
    let names: Vec<_> = users.iter().map(|u| u.metadata.name.clone().unwrap()).collect();
    assert_eq!(names, ["ann", "bo", "cy"]);
    assert!(users[1].spec.disabled);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert!(
        seen[0]
            .1
            .starts_with("/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/ichorusers?"),
        "{}",
        seen[0].1
    );
    assert!(seen[0].1.contains("limit=500"), "{}", seen[0].1);
    assert!(
        !seen[0].1.contains("resourceVersion"),
        "an uncached list asks for the latest state: {}",
        seen[0].1
    );
}

#[tokio::test]
async fn the_kube_lister_feeds_the_last_admin_rule_and_fails_closed() {
    let (client, _) = scripted_client(Arc::new(|_, _, _| {
        Some((200, user_list(&[("ann", &["admin"], false)], None)))
    }));
    let state = AdmissionState::new(
        Arc::new(FakeReviewer::default()),
        Arc::new(KubeUserLister::new(client)),
        controller_identity(NS),
    );
    let doc = review(
        "IchorUser",
        "DELETE",
        &ROOT,
        "ann",
        Value::Null,
        user("ann", &["admin"], false),
    );
    assert!(
        admit(&router(Arc::new(state)), USERS, &doc)
            .await
            .unwrap_err()
            .contains("last enabled admin")
    );

    let (client, _) = scripted_client(Arc::new(|_, _, _| {
        Some((
            500,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "etcdserver: request timed out", "code": 500}),
        ))
    }));
    let error = KubeUserLister::new(client).list_users(NS).await.unwrap_err();
    assert!(matches!(error, AdmissionError::ListUsers(_)), "{error:?}");
    let (client, _) = scripted_client(Arc::new(|_, _, _| None));
    let error = KubeUserLister::with_timeout(client, Duration::from_millis(100))
        .list_users(NS)
        .await
        .unwrap_err();
    assert!(matches!(error, AdmissionError::ListUsersTimeout(_)), "{error:?}");
}

#[tokio::test]
async fn a_change_of_authentication_and_values_needs_both_rights() {
    let mut spec = cni_spec(json!({"hubble": {"enabled": true}}), "cilium");
    spec["authentication"] = ichor_auth();
    let doc = review(
        "TalosCluster",
        "CREATE",
        &ROOT,
        "prod",
        cluster(spec),
        Value::Null,
    );
    let both = harness(
        FakeReviewer::granting(&[
            ("update", "talosclusters/authentication"),
            ("update", "talosclusters/cilium-values"),
        ]),
        FakeLister::default(),
    );
    assert_eq!(admit(&both.router, CLUSTERS, &doc).await, Ok(()));
    assert_eq!(both.reviewer.calls().len(), 2);
    let auth_only = harness(
        FakeReviewer::granting(&[("update", "talosclusters/authentication")]),
        FakeLister::default(),
    );
    let message = admit(&auth_only.router, CLUSTERS, &doc).await.unwrap_err();
    assert!(message.starts_with("spec.cni.cilium.values: "), "{message}");
    let neither = harness(FakeReviewer::default(), FakeLister::default());
    let message = admit(&neither.router, CLUSTERS, &doc).await.unwrap_err();
    assert!(message.starts_with("spec.authentication: "), "{message}");
}
