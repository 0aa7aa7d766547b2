//! `--store kube`: the routers and the kubeconfig settings.

use super::*;
use clap::Parser as _;
use ichor_issuer::{
    api::{
        KubeAccessReview,
        proto::{GetMyKubeconfigRequest, GetMyKubeconfigResponse, WhoAmIRequest, WhoAmIResponse},
    },
    cli::{
        CaFile, IN_CLUSTER_CA_FILE, IssuerArgs, KubeCaError, Served, kube_cluster, kube_routers, read_kube_ca,
    },
    keys::LoadedKeys,
    tokens::sign_id_token,
};
use ichor_renderers::trust::keys::KeysDocument;
use ichor_server::{
    metrics::{Metrics, Sources},
    reload::{WatchOptions, Watched},
};
use jiff::{SignedDuration, Timestamp};
use prost::Message as _;
use tower::ServiceExt as _;

const ISSUER: &str = "https://ichor.example.com";
const RSA_PKCS8: &str = include_str!("../../fixtures/rsa2048.pkcs8.pem");

fn keys_json(created: Timestamp) -> String {
    let secret = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
    let created = created.to_string();
    json!({
        "v": 1,
        "keys": [{"kid": "k-1", "alg": "RS256", "pem": RSA_PKCS8, "createdAt": created, "activeFrom": created}],
        "hmac": [{"kid": "h-1", "secret": secret, "createdAt": created, "activeFrom": created}],
    })
    .to_string()
}

fn args(extra: &[&str]) -> IssuerArgs {
    let mut argv = vec!["ichor-issuer", "--external-url", ISSUER];
    argv.extend_from_slice(extra);
    IssuerArgs::try_parse_from(argv).unwrap()
}

/// A gRPC-web frame: flag byte, big-endian length, payload.
fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8];
    out.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// The data frame and the trailer text of a gRPC-web response body.
fn split(body: &[u8]) -> (Vec<u8>, String) {
    let (mut data, mut trailers) = (Vec::new(), String::new());
    let mut rest = body;
    while rest.len() >= 5 {
        let len = u32::from_be_bytes(rest[1..5].try_into().unwrap()) as usize;
        let payload = &rest[5..5 + len];
        if rest[0] & 0x80 == 0 {
            data = payload.to_vec();
        } else {
            trailers = String::from_utf8_lossy(payload).into_owned();
        }
        rest = &rest[5 + len..];
    }
    (data, trailers)
}

async fn call(router: &axum::Router, method: &str, token: &str, message: Vec<u8>) -> (Vec<u8>, String) {
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("/ichor.v1alpha1.UserService/{method}"))
        .header("content-type", "application/grpc-web+proto")
        .header("x-grpc-web", "1")
        .header("authorization", format!("Bearer {token}"))
        .body(axum::body::Body::from(frame(&message)))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let in_headers = response
        .headers()
        .get("grpc-status")
        .map(|v| format!("grpc-status:{}", v.to_str().unwrap()));
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let (data, trailers) = split(&body);
    (data, in_headers.unwrap_or(trailers))
}

#[tokio::test]
async fn the_kube_routers_serve_the_user_service_over_grpc_web_with_the_kubeconfig_settings() {
    let dir = tempfile::tempdir().unwrap();
    let now = Timestamp::now();
    let keys_text = keys_json(now - SignedDuration::from_hours(24));
    let keys_file = dir.path().join("keys.json");
    std::fs::write(&keys_file, &keys_text).unwrap();
    let config = args(&[
        "--keys-file",
        keys_file.to_str().unwrap(),
        "--kube-api-server-url",
        "https://kube.example.com:6443",
        "--kube-api-tls-server-name",
        "kube-apiserver.prod.internal",
        "--kube-cluster-name",
        "prod",
    ])
    .validate()
    .unwrap();
    let keys = Watched::file(
        "keys",
        &config.keys_file,
        KeysDocument::parse,
        WatchOptions::default(),
    )
    .unwrap();
    let served = Served {
        settings: Arc::new(ichor_issuer::oidc::Settings::new(config.settings())),
        config: Arc::new(config),
        keys,
        metrics: Arc::new(Metrics::new(
            "ichor_issuer",
            Sources {
                reloads: Vec::new(),
                certificates: Vec::new(),
                key_times: None,
            },
        )),
    };

    let mut s = State::default();
    s.add_user("alice", &["admin"]);
    s.set_entry(
        "alice",
        &CredentialsEntry::new(
            api_common::real_hash(),
            now - SignedDuration::from_hours(1),
            false,
        ),
    );
    let state = shared(s);
    let client = client(&state);
    let cluster = kube_cluster(&served.config.kubeconfig, "https://10.96.0.1:443/", None);
    let routers = kube_routers(
        &served,
        Arc::new(KubeStore::new(client.clone())),
        KubeAccessReview::new(client),
        Some(cluster),
        Arc::new(ichor_issuer::talos_cluster::ClusterEndpoint::new("prod")),
    )
    .unwrap();

    let loaded = LoadedKeys::from_document(&KeysDocument::parse(keys_text.as_bytes()).unwrap()).unwrap();
    let token = sign_id_token(
        &loaded,
        &ichor_testkit::issuer::harness::id_claims(ISSUER, "alice", "ichor-ui", &["admin"], now),
        now,
    )
    .unwrap();

    let (data, trailers) = call(
        &routers.external,
        "WhoAmI",
        &token,
        WhoAmIRequest {}.encode_to_vec(),
    )
    .await;
    assert!(trailers.contains("grpc-status:0"), "{trailers}");
    let me = WhoAmIResponse::decode(&data[..]).unwrap();
    assert_eq!(
        (me.name.as_str(), me.roles.as_slice()),
        ("alice", &["admin".to_owned()][..])
    );

    let (data, trailers) = call(
        &routers.external,
        "GetMyKubeconfig",
        &token,
        GetMyKubeconfigRequest::default().encode_to_vec(),
    )
    .await;
    assert!(trailers.contains("grpc-status:0"), "{trailers}");
    let kubeconfig = GetMyKubeconfigResponse::decode(&data[..]).unwrap().kubeconfig;
    let doc: serde_yaml::Value = serde_yaml::from_str(&kubeconfig).unwrap();
    let cluster = &doc["clusters"][0];
    assert_eq!(cluster["name"], "prod");
    assert_eq!(cluster["cluster"]["server"], "https://kube.example.com:6443");
    assert_eq!(
        cluster["cluster"]["tls-server-name"],
        "kube-apiserver.prod.internal"
    );
    assert!(
        cluster["cluster"].get("certificate-authority-data").is_none(),
        "{kubeconfig}"
    );
    // The page the kubeconfig's installHint names is served on the public listener, not on the
    // internal one (which the kube-apiservers reach).
    let hint = doc["users"][0]["user"]["exec"]["installHint"].as_str().unwrap();
    assert!(hint.contains(&format!("{ISSUER}/downloads ")), "{hint}");
    let get = |router: &axum::Router| {
        router.clone().oneshot(
            http::Request::get("/downloads")
                .body(axum::body::Body::empty())
                .unwrap(),
        )
    };
    let page = get(&routers.external).await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(
        page.headers()["content-security-policy"],
        ichor_issuer::downloads::DOWNLOADS_CSP
    );
    let body = page.into_body().collect().await.unwrap().to_bytes();
    assert!(
        String::from_utf8_lossy(&body).contains(&format!("--issuer {ISSUER} --out")),
        "the page's example names this issuer"
    );
    assert_eq!(get(&routers.internal).await.unwrap().status(), 404);
    // The authorization question went to the apiserver as a SubjectAccessReview for alice.
    let review = state
        .lock()
        .unwrap()
        .seen
        .iter()
        .find(|s| s.path == REVIEWS_PATH)
        .cloned()
        .unwrap();
    assert_eq!(review.body.as_ref().unwrap()["spec"]["user"], "ichor:alice");

    // Without a token: refused by the service (so it is served), never a 404.
    let (_, trailers) = call(&routers.external, "WhoAmI", "", WhoAmIRequest {}.encode_to_vec()).await;
    assert!(trailers.contains("grpc-status:16"), "{trailers}");
}

#[test]
fn with_store_kube_the_ca_defaults_to_the_service_accounts_and_local_has_none() {
    let kube = args(&[]).validate().unwrap();
    assert_eq!(
        kube.kubeconfig.ca_file,
        Some(CaFile::Default(IN_CLUSTER_CA_FILE.into()))
    );
    assert_eq!(kube.kubeconfig.cluster_name, "ichor");
    assert_eq!(kube.kubeconfig.api_server_url, None);
    let given = args(&["--kube-ca-file", "/etc/ca.pem"]).validate().unwrap();
    assert_eq!(
        given.kubeconfig.ca_file,
        Some(CaFile::Given("/etc/ca.pem".into()))
    );
    let local = args(&[
        "--store",
        "local",
        "--local-users-dir",
        "u",
        "--local-state-dir",
        "s",
    ])
    .validate()
    .unwrap();
    assert_eq!(local.kubeconfig.ca_file, None);
}

#[test]
fn refuses_a_kube_api_server_url_that_is_not_https_and_a_bad_tls_server_name() {
    let err = args(&["--kube-api-server-url", "http://kube:6443"])
        .validate()
        .unwrap_err();
    assert!(err.to_string().starts_with("--kube-api-server-url"), "{err}");
    let err = args(&["--kube-api-tls-server-name", "kube apiserver"])
        .validate()
        .unwrap_err();
    assert!(err.to_string().starts_with("--kube-api-tls-server-name"), "{err}");
    let ok = args(&["--kube-api-server", "https://kube.example.com/"])
        .validate()
        .unwrap();
    assert_eq!(
        ok.kubeconfig.api_server_url.as_deref(),
        Some("https://kube.example.com")
    );
}

#[test]
fn the_kubeconfig_cluster_is_a_talos_cluster_name_and_empty_means_none() {
    assert_eq!(args(&[]).validate().unwrap().kubeconfig.talos_cluster, None);
    assert_eq!(
        args(&["--kubeconfig-cluster", ""])
            .validate()
            .unwrap()
            .kubeconfig
            .talos_cluster,
        None
    );
    assert_eq!(
        args(&["--kubeconfig-cluster", "prod-eu.1"])
            .validate()
            .unwrap()
            .kubeconfig
            .talos_cluster
            .as_deref(),
        Some("prod-eu.1")
    );
    for bad in ["Prod", "prod_1", "-prod", "prod/x", "a b"] {
        let flag = format!("--kubeconfig-cluster={bad}");
        let err = args(&[flag.as_str()]).validate().unwrap_err();
        assert!(
            err.to_string().starts_with("--kubeconfig-cluster"),
            "{bad}: {err}"
        );
    }
}

fn certificate_pem() -> String {
    ichor_testkit::pki::TestCa::new("kubernetes").unwrap().pem
}

#[test]
fn an_absent_default_ca_is_no_ca_but_an_absent_given_one_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("ca.crt");
    assert_eq!(read_kube_ca(&CaFile::Default(missing.clone())).unwrap(), None);
    let err = read_kube_ca(&CaFile::Given(missing)).unwrap_err();
    assert!(matches!(err, KubeCaError::Read { .. }), "{err}");
}

#[test]
fn reads_pem_certificates_and_refuses_a_key_garbage_or_an_oversized_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ca.crt");
    let pem = format!("{}{}", certificate_pem(), certificate_pem());
    std::fs::write(&file, &pem).unwrap();
    assert_eq!(
        read_kube_ca(&CaFile::Default(file.clone())).unwrap().as_deref(),
        Some(&*pem)
    );

    let with_key = format!("{pem}-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
    std::fs::write(&file, with_key).unwrap();
    let err = read_kube_ca(&CaFile::Default(file.clone())).unwrap_err();
    assert!(err.to_string().contains("PRIVATE KEY"), "{err}");

    std::fs::write(&file, "not a certificate\n").unwrap();
    let err = read_kube_ca(&CaFile::Given(file.clone())).unwrap_err();
    assert!(matches!(err, KubeCaError::NotCertificates { .. }), "{err}");

    std::fs::write(&file, "x".repeat(300 * 1024)).unwrap();
    let err = read_kube_ca(&CaFile::Given(file)).unwrap_err();
    assert!(matches!(err, KubeCaError::TooLarge { .. }), "{err}");
}
