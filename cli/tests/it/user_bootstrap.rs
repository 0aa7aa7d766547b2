//! `ichor user create --bootstrap` and `ichor init` against a scripted Kubernetes API that speaks
//! the real HTTP/JSON wire format (objects, `Status` for 404/409, JSON merge patch with the
//! `resourceVersion` precondition, a Helm release Secret), through
//! `kube::Client::new(tower::service_fn(...))`, and a fake `helm` that records its argv.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use base64::Engine as _;
use http::{Method, StatusCode};
use ichor_cli::commands::{
    init::{InitError, InitPlan, TalosSecret, helm::Helm, init_cluster, talos_secret::TalosCredentials},
    user::bootstrap::{BootstrapError, NewUser, bootstrap_user},
};
use ichor_renderers::auth::{Password, credentials::CredentialsEntry, hash::verify_password};
use jiff::Timestamp;
use serde_json::{Value, json};

use crate::user_support::{fake_helm, helm_argv, release_secret, users_on};

const SECRETS: &str = "/api/v1/namespaces/ichor-system/secrets";
const SECRET: &str = "/api/v1/namespaces/ichor-system/secrets/ichor-user-credentials";
/// The cluster's Talos credentials, which no test here has (init then prints the command).
const TALOS_SECRET: &str = "/api/v1/namespaces/ichor-system/secrets/prod-talosconfig";
const USERS: &str = "/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/ichorusers";
const NAMESPACES: &str = "/api/v1/namespaces";
/// The namespace of the per-user credentials Secrets, which `ichor init` creates.
const CREDENTIALS_NAMESPACE: &str = "/api/v1/namespaces/ichor-credentials";
const CLUSTER: &str = "/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/talosclusters/prod";
const PASSWORD: &str = "a first password of enough length";

#[derive(Default)]
struct Kube {
    rv: u64,
    secret: Option<serde_json::Map<String, Value>>,
    /// The legacy Secret's annotations (its credentials-layout phase).
    annotations: Option<Value>,
    /// The namespace `ichor-credentials`, once it exists.
    credentials_namespace: Option<Value>,
    users: BTreeMap<String, Value>,
    cluster: Option<Value>,
    /// Writes, in order: (method, path).
    writes: Vec<(Method, String)>,
    patches: Vec<Value>,
    fail_cluster_patch: bool,
    /// Helm release Secrets, as listed.
    releases: Vec<Value>,
    /// The label selectors of the Secret lists.
    selectors: Vec<String>,
    /// The fake helm's log: an upgrade it ran shows in `writes` as `HELM upgrade`.
    helm_log: Option<PathBuf>,
    helm_upgrades: usize,
    /// How often the Talos credentials Secret was read.
    talos_secret_reads: usize,
}

fn status(code: StatusCode, reason: &str, message: &str) -> (StatusCode, Value) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason, "code": code.as_u16()}),
    )
}

fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let Value::Object(target) = target else {
        unreachable!()
    };
    for (k, v) in patch {
        if v.is_null() {
            target.remove(k);
        } else {
            merge(target.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

impl Kube {
    fn secret_json(&self) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "ichor-user-credentials", "namespace": "ichor-system",
                            "resourceVersion": self.rv.to_string(),
                            "annotations": self.annotations.clone().unwrap_or_else(|| json!({}))},
               "type": "Opaque", "data": self.secret.clone().unwrap_or_default()})
    }

    fn entry(&self, user: &str) -> Option<CredentialsEntry> {
        let v = self.secret.as_ref()?.get(user)?.as_str()?;
        let bytes = base64::engine::general_purpose::STANDARD.decode(v).unwrap();
        Some(CredentialsEntry::parse(user, &bytes).unwrap())
    }

    fn note_helm(&mut self) {
        let Some(log) = &self.helm_log else { return };
        let upgrades = std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("upgrade "))
            .count();
        for _ in self.helm_upgrades..upgrades {
            self.writes
                .push((Method::from_bytes(b"HELM").unwrap(), "upgrade".to_owned()));
        }
        self.helm_upgrades = upgrades;
    }

    fn answer(&mut self, method: &Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        self.note_helm();
        if method != Method::GET {
            self.writes.push((method.clone(), path.to_owned()));
        }
        match (method.clone(), path) {
            (Method::GET, SECRETS) => (
                StatusCode::OK,
                json!({"apiVersion": "v1", "kind": "SecretList", "metadata": {"resourceVersion": "1"},
                       "items": self.releases}),
            ),
            (Method::GET, TALOS_SECRET) => {
                self.talos_secret_reads += 1;
                status(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    "secrets \"prod-talosconfig\" not found",
                )
            }
            (Method::GET, SECRET) => match self.secret {
                Some(_) => (StatusCode::OK, self.secret_json()),
                None => status(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    "secrets \"ichor-user-credentials\" not found",
                ),
            },
            (Method::GET, CREDENTIALS_NAMESPACE) => match &self.credentials_namespace {
                Some(namespace) => (StatusCode::OK, namespace.clone()),
                None => status(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    "namespaces \"ichor-credentials\" not found",
                ),
            },
            (Method::POST, NAMESPACES) => {
                let mut namespace = body.unwrap();
                assert_eq!(namespace["metadata"]["name"], "ichor-credentials");
                if self.credentials_namespace.is_some() {
                    return status(StatusCode::CONFLICT, "AlreadyExists", "already exists");
                }
                namespace["metadata"]["resourceVersion"] = "1".into();
                self.credentials_namespace = Some(namespace.clone());
                (StatusCode::CREATED, namespace)
            }
            (Method::PATCH, SECRET) => {
                let patch = body.unwrap();
                self.patches.push(patch.clone());
                if patch["metadata"]["resourceVersion"].as_str() != Some(&self.rv.to_string()) {
                    return status(StatusCode::CONFLICT, "Conflict", "the object has been modified");
                }
                let mut object = self.secret_json();
                merge(&mut object, &patch);
                self.secret = object["data"].as_object().cloned();
                self.annotations = Some(object["metadata"]["annotations"].clone());
                self.rv += 1;
                (StatusCode::OK, self.secret_json())
            }
            (Method::POST, USERS) => {
                let mut user = body.unwrap();
                let name = user["metadata"]["name"].as_str().unwrap().to_owned();
                if self.users.contains_key(&name) {
                    return status(StatusCode::CONFLICT, "AlreadyExists", "already exists");
                }
                user["metadata"]["resourceVersion"] = "1".into();
                self.users.insert(name, user.clone());
                (StatusCode::CREATED, user)
            }
            (Method::PATCH, CLUSTER) => {
                if self.fail_cluster_patch {
                    return status(
                        StatusCode::FORBIDDEN,
                        "Forbidden",
                        "you may not update talosclusters/authentication",
                    );
                }
                let cluster = self.cluster.as_mut().unwrap();
                let patch = body.unwrap();
                self.patches.push(patch.clone());
                merge(cluster, &patch);
                (StatusCode::OK, cluster.clone())
            }
            (Method::GET, CLUSTER) => match &self.cluster {
                Some(c) => (StatusCode::OK, c.clone()),
                None => status(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    "talosclusters \"prod\" not found",
                ),
            },
            // The checks of an existing credentials namespace: nothing in it but Ichor's.
            (Method::GET, p) if p == format!("{CREDENTIALS_NAMESPACE}/secrets") => (
                StatusCode::OK,
                json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
                       "metadata": {"resourceVersion": "1"}, "items": []}),
            ),
            (Method::GET, "/apis/rbac.authorization.k8s.io/v1/namespaces/ichor-credentials/rolebindings") => {
                (
                    StatusCode::OK,
                    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBindingList",
                           "metadata": {"resourceVersion": "1"}, "items": []}),
                )
            }
            (m, p) => {
                if m == Method::GET
                    && let Some(name) = p.strip_prefix(&format!("{CREDENTIALS_NAMESPACE}/secrets/"))
                {
                    return status(
                        StatusCode::NOT_FOUND,
                        "NotFound",
                        &format!("secrets \"{name}\" not found"),
                    );
                }
                if let Some(name) = p.strip_prefix(&format!("{USERS}/")) {
                    let name = name.to_owned();
                    return match (m, self.users.get(&name).cloned()) {
                        (Method::GET, Some(u)) => (StatusCode::OK, u),
                        (Method::DELETE, Some(u)) => {
                            self.users.remove(&name);
                            (StatusCode::OK, u)
                        }
                        _ => status(
                            StatusCode::NOT_FOUND,
                            "NotFound",
                            &format!("ichorusers \"{name}\" not found"),
                        ),
                    };
                }
                panic!("unexpected request {m} {p}");
            }
        }
    }
}

fn client(state: &Arc<Mutex<Kube>>) -> kube::Client {
    let state = Arc::clone(state);
    ichor_testkit::issuer::kube::client("ichor-system", move |parts, body| {
        if parts.method == Method::PATCH {
            let ct = parts
                .headers
                .get(http::header::CONTENT_TYPE)
                .unwrap()
                .to_str()
                .unwrap();
            assert_eq!(ct, "application/merge-patch+json");
        }
        let mut state = state.lock().unwrap();
        if parts.method == Method::GET && parts.uri.path() == SECRETS {
            let query = parts.uri.query().unwrap_or_default();
            let selector = url::form_urlencoded::parse(query.as_bytes())
                .find(|(k, _)| k == "labelSelector")
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default();
            state.selectors.push(selector);
        }
        state.answer(&parts.method, parts.uri.path(), body)
    })
}

/// An installation of an earlier release, whose legacy Secret this release's issuer already gave
/// its phase (`legacy`).
fn with_secret() -> Kube {
    Kube {
        rv: 100,
        secret: Some(serde_json::Map::new()),
        annotations: Some(json!({"ichor.maesh.dev/credentials-layout": "legacy"})),
        ..Kube::default()
    }
}

fn cluster_json() -> Value {
    json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "TalosCluster",
           "metadata": {"name": "prod", "namespace": "ichor-system", "resourceVersion": "5"},
           "spec": {"endpoint": "https://10.0.0.10:6443",
                    "authentication": {"external": [{"issuerURL": "https://idp.example.com", "audiences": ["k"]}]}}})
}

fn admin() -> NewUser {
    NewUser {
        name: "admin".into(),
        roles: vec!["admin".into()],
        display_name: None,
        email: None,
    }
}

fn now() -> Timestamp {
    "2026-11-05T10:00:00Z".parse().unwrap()
}

#[tokio::test]
async fn bootstrap_writes_the_user_then_one_key_of_the_secret_with_a_hash_that_must_change() {
    let state = Arc::new(Mutex::new(with_secret()));
    bootstrap_user(client(&state), &admin(), &Password::new(PASSWORD), now())
        .await
        .unwrap();
    let k = state.lock().unwrap();
    assert_eq!(
        k.writes,
        vec![
            (Method::POST, USERS.to_owned()),
            (Method::PATCH, SECRET.to_owned())
        ]
    );
    assert_eq!(k.users["admin"]["spec"]["roles"], json!(["admin"]));
    let patch = &k.patches[0];
    assert_eq!(patch["metadata"]["resourceVersion"], "100");
    assert_eq!(patch["data"].as_object().unwrap().len(), 1, "one key: {patch}");
    let entry = k.entry("admin").unwrap();
    assert!(entry.must_change);
    assert!(
        verify_password(&Password::new(PASSWORD), &entry.hash)
            .unwrap()
            .is_valid()
    );
    assert!(!patch.to_string().contains(PASSWORD));
}

#[tokio::test]
async fn bootstrap_gives_a_legacy_secret_without_a_phase_the_legacy_phase_then_writes_its_key() {
    let state = Arc::new(Mutex::new(Kube {
        annotations: None,
        ..with_secret()
    }));
    bootstrap_user(client(&state), &admin(), &Password::new(PASSWORD), now())
        .await
        .unwrap();
    let k = state.lock().unwrap();
    assert_eq!(
        k.patches[0],
        json!({"metadata": {"resourceVersion": "100",
            "annotations": {"ichor.maesh.dev/credentials-layout": "legacy"}}}),
        "the phase first, against the version read"
    );
    assert_eq!(k.patches[1]["metadata"]["resourceVersion"], "101");
    assert!(
        k.entry("admin").unwrap().must_change,
        "the entry in the legacy Secret"
    );
    assert_eq!(
        k.annotations.as_ref().unwrap()["ichor.maesh.dev/credentials-layout"],
        "legacy"
    );
}

#[tokio::test]
async fn bootstrap_refuses_an_existing_user_and_an_install_without_users_before_writing() {
    let state = Arc::new(Mutex::new(with_secret()));
    state.lock().unwrap().users.insert(
        "admin".into(),
        json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
            "metadata": {"name": "admin", "namespace": "ichor-system"}, "spec": {"roles": ["viewer"]}}),
    );
    let e = bootstrap_user(client(&state), &admin(), &Password::new(PASSWORD), now())
        .await
        .unwrap_err();
    assert!(matches!(e, BootstrapError::UserExists(_)), "{e}");
    assert!(state.lock().unwrap().writes.is_empty());

    // Neither the credentials namespace nor the legacy Secret: users are not installed.
    let state = Arc::new(Mutex::new(Kube::default()));
    let e = bootstrap_user(client(&state), &admin(), &Password::new(PASSWORD), now())
        .await
        .unwrap_err();
    assert!(matches!(e, BootstrapError::NotInstalled), "{e}");
    assert!(
        e.to_string()
            .contains("Namespace ichor-credentials does not exist"),
        "{e}"
    );
    assert!(e.to_string().contains("run `ichor init"), "{e}");
    assert!(state.lock().unwrap().writes.is_empty());

    let short = bootstrap_user(client(&state), &admin(), &Password::new("short"), now())
        .await
        .unwrap_err();
    assert!(short.to_string().contains("at least"), "{short}");
}

const URL: &str = "https://ichor.example.com";
const UPGRADE: &str = "upgrade";

fn plan() -> InitPlan {
    InitPlan {
        ui_url: URL.into(),
        cluster: "prod".into(),
        namespace: "ichor-system".into(),
        admin_user: "admin".into(),
        release: None,
        talos_credentials: None,
        rollout: true,
    }
}

/// A scripted API with the cluster and one deployed `ichor` release (users off), and a fake helm.
fn installed(kube: Kube) -> (Arc<Mutex<Kube>>, tempfile::TempDir, Helm) {
    let dir = tempfile::tempdir().unwrap();
    let helm = fake_helm(dir.path());
    let kube = Kube {
        cluster: Some(cluster_json()),
        releases: vec![release_secret(
            "ichor",
            "ichor",
            json!({"issuer": {"replicas": 3}}),
        )],
        helm_log: Some(dir.path().join("argv")),
        ..kube
    };
    (Arc::new(Mutex::new(kube)), dir, helm)
}

fn set_release(state: &Arc<Mutex<Kube>>, config: Value) {
    state.lock().unwrap().releases = vec![release_secret("ichor", "ichor", config)];
}

/// On an installation of an earlier release (its one credentials Secret exists): the namespace,
/// then the admin (whose entry the store writes where the installation keeps entries), the
/// upgrade, the switch; the legacy Secret is not created again.
#[tokio::test]
async fn init_creates_the_namespace_then_the_admin_then_upgrades_the_release_then_switches_the_cluster() {
    let (state, dir, helm) = installed(with_secret());
    let mut delivered = Vec::new();
    let report = init_cluster(client(&state), &helm, &plan(), now(), &mut |name, pw| {
        delivered.push((name.to_owned(), pw.expose().to_owned()));
    })
    .await
    .unwrap();
    assert!(report.created_namespace && report.created_admin && report.upgraded && report.switched);
    assert_eq!(report.release, "ichor");
    assert_eq!(report.rollout_clusters, Some(vec!["prod".to_owned()]));
    assert_eq!(report.talos_secret, TalosSecret::Missing);
    let k = state.lock().unwrap();
    assert_eq!(
        k.writes,
        vec![
            (Method::POST, NAMESPACES.to_owned()),
            (Method::POST, USERS.to_owned()),
            (Method::PATCH, SECRET.to_owned()),
            (Method::from_bytes(b"HELM").unwrap(), UPGRADE.to_owned()),
            (Method::PATCH, CLUSTER.to_owned()),
        ]
    );
    assert_eq!(k.selectors, vec!["owner=helm,status=deployed".to_owned()]);
    let argv = helm_argv(dir.path());
    assert_eq!(argv.len(), 2, "{argv:?}");
    assert_eq!(argv[0], "version --short");
    let words: Vec<&str> = argv[1].split(' ').collect();
    assert!(
        words[2].contains("ichor-chart-"),
        "the release's chart, written out: {words:?}"
    );
    assert_eq!(
        [&words[..2], &words[3..]].concat(),
        [
            "upgrade",
            "ichor",
            "-n",
            "ichor-system",
            "--reuse-values",
            "--set-string",
            "ichorUI.users.externalURL=https://ichor.example.com",
            "--set",
            "ichorUI.users.enabled=true",
            "--wait=false",
            "--set-json",
            "controller.rollout.clusters=[\"prod\"]"
        ]
    );
    assert!(
        !Path::new(words[2]).exists(),
        "the chart directory is removed afterwards"
    );
    let seen: Value =
        serde_yaml::from_str(&std::fs::read_to_string(dir.path().join("seen-Chart.yaml")).unwrap()).unwrap();
    assert_eq!(seen["name"], "ichor");
    assert_eq!(seen["version"], "0.1.0");
    assert_eq!(delivered.len(), 1);
    let (name, password) = &delivered[0];
    assert_eq!(name, "admin");
    let entry = k.entry("admin").unwrap();
    assert!(entry.must_change);
    assert!(
        verify_password(&Password::new(password.clone()), &entry.hash)
            .unwrap()
            .is_valid()
    );
    let cluster = k.cluster.as_ref().unwrap();
    assert_eq!(
        cluster["spec"]["authentication"]["ichor"],
        json!({"enabled": true, "url": "https://ichor.example.com"})
    );
    assert_eq!(
        cluster["spec"]["authentication"]["external"][0]["issuerURL"], "https://idp.example.com",
        "the merge patch keeps the external providers"
    );
}

/// A talosconfig of one context `prod` and a Kubernetes CA in `dir`, loaded as init loads them.
fn talos_credentials(dir: &Path) -> TalosCredentials {
    let ca = rcgen::generate_simple_self_signed(vec!["kubernetes".to_owned()]).unwrap();
    let pem = base64::engine::general_purpose::STANDARD.encode(ca.cert.pem());
    let key = base64::engine::general_purpose::STANDARD.encode(ca.signing_key.serialize_pem());
    let config = dir.join("talosconfig");
    std::fs::write(
        &config,
        format!("context: prod\ncontexts:\n  prod:\n    endpoints: [10.0.0.1]\n    ca: {pem}\n    crt: {pem}\n    key: {key}\n"),
    )
    .unwrap();
    let kube_ca = dir.join("kube-ca.crt");
    std::fs::write(&kube_ca, ca.cert.pem()).unwrap();
    TalosCredentials::load(&config, &kube_ca, "prod", None).unwrap()
}

/// `--no-rollout`: users on and the switch as always, but the upgrade leaves
/// `controller.rollout.clusters` as the release has it and the Talos credentials Secret is
/// neither read nor created; without the flag the same release gets the cluster added.
#[tokio::test]
async fn init_with_no_rollout_leaves_the_rollout_list_and_the_talos_secret_alone() {
    let staging = json!({"controller": {"rollout": {"clusters": ["staging"]}}});
    let (state, dir, helm) = installed(with_secret());
    set_release(&state, staging.clone());
    let no_rollout = InitPlan {
        rollout: false,
        talos_credentials: Some(talos_credentials(dir.path())),
        ..plan()
    };
    let report = init_cluster(client(&state), &helm, &no_rollout, now(), &mut |_, _| {})
        .await
        .unwrap();
    assert!(report.upgraded && report.switched);
    assert_eq!(report.rollout_clusters, None);
    assert!(!report.rolled_out);
    assert_eq!(report.talos_secret, TalosSecret::NotRolledOut);
    let argv = helm_argv(dir.path());
    assert!(argv[1].starts_with("upgrade ichor "), "{argv:?}");
    assert!(!argv[1].contains("controller.rollout"), "{argv:?}");
    assert!(
        argv[1].contains("--reuse-values"),
        "the release's list is kept: {argv:?}"
    );
    {
        let k = state.lock().unwrap();
        assert_eq!(k.talos_secret_reads, 0);
        let created = k
            .writes
            .iter()
            .filter(|w| w.0 == Method::POST && w.1 == SECRETS)
            .count();
        assert_eq!(created, 0, "no Secret: {:?}", k.writes);
    }

    // The release already lists the cluster: nothing to upgrade, and the report says so.
    set_release(&state, users_on(URL));
    let report = init_cluster(client(&state), &helm, &no_rollout, now(), &mut |_, _| {})
        .await
        .unwrap();
    assert!(!report.upgraded && report.rolled_out);
    assert_eq!(report.talos_secret, TalosSecret::NotRolledOut);

    // Without the flag: the cluster is added, the Secret looked at.
    let (state, dir, helm) = installed(with_secret());
    set_release(&state, staging);
    let report = init_cluster(client(&state), &helm, &plan(), now(), &mut |_, _| {})
        .await
        .unwrap();
    assert_eq!(
        report.rollout_clusters,
        Some(vec!["staging".to_owned(), "prod".to_owned()])
    );
    assert!(report.rolled_out);
    assert_eq!(report.talos_secret, TalosSecret::Missing);
    assert!(helm_argv(dir.path())[1].contains("controller.rollout.clusters=[\"staging\",\"prod\"]"));
    assert_eq!(state.lock().unwrap().talos_secret_reads, 1);
}

#[tokio::test]
async fn init_a_second_time_creates_upgrades_and_switches_nothing() {
    let (state, dir, helm) = installed(with_secret());
    init_cluster(client(&state), &helm, &plan(), now(), &mut |_, _| {})
        .await
        .unwrap();
    // What the upgrade left in the release record.
    set_release(&state, users_on(URL));
    let before = state.lock().unwrap().writes.len();
    let calls = helm_argv(dir.path()).len();
    let report = init_cluster(client(&state), &helm, &plan(), now(), &mut |_, _| {
        panic!("no password")
    })
    .await
    .unwrap();
    assert!(!report.created_namespace && !report.created_admin && !report.upgraded && !report.switched);
    assert_eq!(state.lock().unwrap().writes.len(), before, "nothing written");
    assert_eq!(helm_argv(dir.path()).len(), calls, "helm not even called");
}

#[tokio::test]
async fn init_hands_out_the_password_before_a_failing_switch_and_keeps_an_existing_admin_on_rerun() {
    let (state, _dir, helm) = installed(with_secret());
    state.lock().unwrap().fail_cluster_patch = true;
    let mut delivered = 0;
    let e = init_cluster(client(&state), &helm, &plan(), now(), &mut |_, _| delivered += 1)
        .await
        .unwrap_err();
    assert_eq!(
        delivered, 1,
        "the password was handed out before the failing step"
    );
    assert!(e.to_string().contains("talosclusters/authentication"), "{e}");
    assert!(state.lock().unwrap().entry("admin").is_some());

    // A rerun keeps the admin (no new password) and finishes the switch.
    set_release(&state, users_on(URL));
    state.lock().unwrap().fail_cluster_patch = false;
    let mut delivered = 0;
    let report = init_cluster(client(&state), &helm, &plan(), now(), &mut |_, _| delivered += 1)
        .await
        .unwrap();
    assert_eq!(delivered, 0);
    assert!(!report.created_admin && !report.created_namespace && !report.upgraded && report.switched);
}

#[tokio::test]
async fn a_failing_upgrade_keeps_the_admin_and_does_not_switch_the_cluster() {
    let (state, dir, helm) = installed(with_secret());
    std::fs::write(dir.path().join("fail"), "").unwrap();
    let mut delivered = 0;
    let e = init_cluster(client(&state), &helm, &plan(), now(), &mut |_, _| delivered += 1)
        .await
        .unwrap_err();
    assert!(matches!(e, InitError::Helm { .. }), "{e}");
    assert!(e.to_string().contains("another operation is in progress"), "{e}");
    assert_eq!(delivered, 1);
    let k = state.lock().unwrap();
    assert!(!k.writes.contains(&(Method::PATCH, CLUSTER.to_owned())));
    assert!(k.cluster.as_ref().unwrap()["spec"]["authentication"]["ichor"].is_null());
}

/// Runs `init` on `kube` and expects an error and no write at all (neither the API nor helm).
async fn refused(kube: Kube, helm: Option<Helm>, plan: &InitPlan) -> InitError {
    let (state, dir, fake) = installed(Kube::default());
    *state.lock().unwrap() = Kube {
        helm_log: Some(dir.path().join("argv")),
        ..kube
    };
    let e = init_cluster(client(&state), &helm.unwrap_or(fake), plan, now(), &mut |_, _| {
        panic!("no password")
    })
    .await
    .unwrap_err();
    assert!(state.lock().unwrap().writes.is_empty(), "{e}");
    assert!(
        !helm_argv(dir.path()).iter().any(|l| l.starts_with("upgrade")),
        "{e}"
    );
    e
}

fn with_releases(releases: Vec<Value>) -> Kube {
    Kube {
        cluster: Some(cluster_json()),
        releases,
        ..Kube::default()
    }
}

#[tokio::test]
async fn init_checks_the_release_before_writing_anything() {
    let e = refused(with_releases(vec![]), None, &plan()).await;
    assert!(matches!(e, InitError::NoRelease { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("helm install ichor helm/ichor -n ichor-system"),
        "{e}"
    );

    let other_chart = release_secret("pg", "postgres", json!({}));
    let e = refused(with_releases(vec![other_chart.clone()]), None, &plan()).await;
    assert!(matches!(e, InitError::NoRelease { .. }), "{e}");

    let two = vec![
        release_secret("ichor", "ichor", json!({})),
        release_secret("ichor-b", "ichor", json!({})),
        other_chart,
    ];
    let e = refused(with_releases(two.clone()), None, &plan()).await;
    assert!(e.to_string().contains("ichor, ichor-b"), "{e}");
    assert!(e.to_string().contains("--release"), "{e}");

    // --release picks one (and asks the apiserver for that one only).
    let chosen = InitPlan {
        release: Some("ichor-b".into()),
        ..plan()
    };
    let (state, _dir, helm) = installed(with_secret());
    state.lock().unwrap().releases = two;
    let report = init_cluster(client(&state), &helm, &chosen, now(), &mut |_, _| {})
        .await
        .unwrap();
    assert_eq!(report.release, "ichor-b");
    assert_eq!(
        state.lock().unwrap().selectors,
        vec!["owner=helm,status=deployed,name=ichor-b".to_owned()]
    );

    let e = refused(
        with_releases(vec![release_secret(
            "ichor",
            "ichor",
            users_on("https://old.example.com"),
        )]),
        None,
        &plan(),
    )
    .await;
    assert!(matches!(e, InitError::OtherIssuerUrl { .. }), "{e}");
    let message = e.to_string();
    assert!(
        message.contains("https://old.example.com") && message.contains("invalidates"),
        "{message}"
    );
    assert!(message.contains("helm upgrade ichor"), "{message}");
}

#[tokio::test]
async fn init_without_helm_writes_nothing() {
    let helm = Helm {
        program: "/nonexistent/helm".into(),
    };
    let e = refused(
        with_releases(vec![release_secret("ichor", "ichor", json!({}))]),
        Some(helm),
        &plan(),
    )
    .await;
    assert!(matches!(e, InitError::NoHelm { .. }), "{e}");
    assert!(e.to_string().contains("--helm"), "{e}");
}

#[tokio::test]
async fn init_on_a_missing_cluster_writes_nothing() {
    let e = refused(with_secret(), None, &plan()).await;
    assert!(matches!(e, InitError::NoCluster { .. }), "{e}");
}

/// A fresh installation (no credentials Secret of an earlier release; the admin is there, so
/// no entry is written): init creates the namespace and no Secret at all; a second run finds
/// the namespace and creates nothing.
#[tokio::test]
async fn init_on_a_fresh_install_creates_the_namespace_and_no_credentials_secret() {
    let (state, _dir, helm) = installed(Kube::default());
    state.lock().unwrap().users.insert(
        "admin".into(),
        json!({"apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
            "metadata": {"name": "admin", "namespace": "ichor-system"}, "spec": {"roles": ["admin"]}}),
    );
    let report = init_cluster(client(&state), &helm, &plan(), now(), &mut |_, _| {
        panic!("no password: the admin exists")
    })
    .await
    .unwrap();
    assert!(report.created_namespace && !report.created_admin && report.upgraded);
    {
        let k = state.lock().unwrap();
        assert_eq!(
            k.writes,
            vec![
                (Method::POST, NAMESPACES.to_owned()),
                (Method::from_bytes(b"HELM").unwrap(), UPGRADE.to_owned()),
                (Method::PATCH, CLUSTER.to_owned()),
            ]
        );
        assert!(k.secret.is_none(), "no legacy Secret on a fresh install");
        let namespace = k.credentials_namespace.as_ref().unwrap();
        assert_eq!(
            namespace["metadata"]["labels"],
            json!({"app.kubernetes.io/part-of": "ichor"})
        );
    }

    set_release(&state, users_on(URL));
    let before = state.lock().unwrap().writes.len();
    let report = init_cluster(client(&state), &helm, &plan(), now(), &mut |_, _| {})
        .await
        .unwrap();
    assert!(!report.created_namespace && !report.upgraded && !report.switched);
    assert_eq!(state.lock().unwrap().writes.len(), before, "nothing written");
}
