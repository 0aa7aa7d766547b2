//! Unit tests of `ichor dev`'s flag checks and of the state directory's first run.

#![allow(clippy::unwrap_used)]

use super::*;

fn args(address: &str, allow: bool, port: u16) -> DevArgs {
    DevArgs {
        state_dir: None,
        port,
        listen_address: address.parse().unwrap(),
        allow_non_loopback: allow,
        localhost: false,
        token_ttl: "5m".to_owned(),
        family_writes_per_minute: 6,
        kube_api_server: None,
        kube_ca_file: None,
        kube_cluster_name: DEFAULT_KUBE_CLUSTER_NAME.to_owned(),
        rbac_file: None,
        external: ichor_issuer::cli::ExternalFlags::default(),
    }
}

const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

#[test]
fn localhost_names_a_loopback_listener_only() {
    let mut a = args("127.0.0.1", false, 8443);
    a.localhost = true;
    assert!(check_args(&a).is_ok());
    let mut b = args("10.0.0.5", true, 8443);
    b.localhost = true;
    let err = check_args(&b).unwrap_err().to_string();
    assert!(err.contains("--localhost") && err.contains("10.0.0.5"), "{err}");
}

#[test]
fn accepts_token_ttls_from_one_to_fifteen_minutes_only() {
    assert_eq!(check_token_ttl("1m").unwrap(), jiff::SignedDuration::from_mins(1));
    assert_eq!(
        check_token_ttl("15m").unwrap(),
        jiff::SignedDuration::from_mins(15)
    );
    for bad in ["59s", "16m", "soon", ""] {
        let refused = check_token_ttl(bad).unwrap_err().to_string();
        assert!(refused.starts_with("--token-ttl"), "{bad}: {refused}");
    }
}

#[test]
fn builds_the_kubeconfig_cluster_from_an_https_url_and_a_certificate() {
    let cluster = cluster_info("https://127.0.0.1:6443/", CA, "ichor-dev").unwrap();
    assert_eq!(cluster.endpoint, "https://127.0.0.1:6443");
    assert_eq!(cluster.name, "ichor-dev");
    assert_eq!(cluster.ca_pem, CA);
}

#[test]
fn refuses_a_plain_http_server_a_private_key_an_empty_bundle_and_a_bad_name() {
    let http = cluster_info("http://127.0.0.1:6443", CA, "dev")
        .unwrap_err()
        .to_string();
    assert!(http.contains("must use https"), "{http}");
    let key = format!("{CA}-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
    let key = cluster_info("https://k:6443", &key, "dev")
        .unwrap_err()
        .to_string();
    assert!(key.contains("\"PRIVATE KEY\" block"), "{key}");
    let empty = cluster_info("https://k:6443", "", "dev").unwrap_err().to_string();
    assert!(empty.contains("no PEM certificate"), "{empty}");
    let name = cluster_info("https://k:6443", CA, "a b").unwrap_err().to_string();
    assert!(name.starts_with("--kube-cluster-name"), "{name}");
    let creds = cluster_info("https://u:p@k:6443", CA, "dev")
        .unwrap_err()
        .to_string();
    assert!(creds.contains("user name"), "{creds}");
}

#[test]
fn refuses_an_oversized_ca_file() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("ca.crt");
    std::fs::write(&file, CA.repeat(10_000)).unwrap();
    let mut a = args("127.0.0.1", false, 8443);
    a.kube_api_server = Some("https://127.0.0.1:6443".to_owned());
    a.kube_ca_file = Some(file);
    let refused = read_cluster(&a).unwrap_err().to_string();
    assert!(refused.contains("larger than 256 KiB"), "{refused}");
}

#[test]
fn refuses_a_non_loopback_address_unless_allowed() {
    let refused = check_args(&args("0.0.0.0", false, 8443)).unwrap_err();
    assert!(refused.to_string().contains("--allow-non-loopback"), "{refused}");
    assert!(check_args(&args("0.0.0.0", true, 8443)).is_ok());
    assert!(check_args(&args("::1", false, 8443)).is_ok());
}

#[test]
fn the_internal_listener_takes_the_next_port() {
    let (ext, int) = check_args(&args("127.0.0.1", false, 9443)).unwrap();
    assert_eq!((ext.port(), int.port()), (9443, 9444));
    assert!(check_args(&args("127.0.0.1", false, 65535)).is_err());
    assert!(check_args(&args("127.0.0.1", false, 0)).is_err());
}

#[test]
fn the_first_run_writes_the_sample_admin_and_a_second_run_keeps_the_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let layout = Layout::new(&tmp.path().join("state"));
    assert!(prepare(&layout).unwrap());
    let sample = std::fs::read_to_string(layout.manifests.join("users/admin.yaml")).unwrap();
    assert!(sample.contains("roles: [admin]"));
    std::fs::write(layout.manifests.join("users/admin.yaml"), "edited").unwrap();
    assert!(!prepare(&layout).unwrap());
    assert_eq!(
        std::fs::read_to_string(layout.manifests.join("users/admin.yaml")).unwrap(),
        "edited"
    );
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&layout.root).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}

#[test]
fn the_rbac_file_is_parsed_and_a_bad_one_names_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("rbac.yaml");
    std::fs::write(
        &good,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: carol\n\
         roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: ichor-viewer\n\
         subjects:\n  - apiGroup: rbac.authorization.k8s.io\n    kind: User\n    name: oidc:carol@example.org\n",
    )
    .unwrap();
    read_rbac_file(&good).unwrap();
    let bad = dir.path().join("secret.yaml");
    std::fs::write(&bad, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: x\n").unwrap();
    let refused = read_rbac_file(&bad).unwrap_err().to_string();
    assert!(refused.starts_with("--rbac-file"), "{refused}");
    let refused = read_rbac_file(&dir.path().join("missing.yaml"))
        .unwrap_err()
        .to_string();
    assert!(refused.contains("cannot read it"), "{refused}");
}
