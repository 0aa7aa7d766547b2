//! Tests of the `ichor-oidc-trust` ConfigMap.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::configmap::*;
use super::tls::IssuerService;
use k8s_openapi::api::core::v1::ConfigMap;

const CA_PEM: &str = "-----BEGIN CERTIFICATE-----\nMAMCAQA=\n-----END CERTIFICATE-----\n";

fn service(ip: &str) -> IssuerService {
    IssuerService {
        cluster_ip: ip.parse().unwrap(),
        name: "ichor-issuer".into(),
        namespace: "ichor-system".into(),
    }
}

fn with_data(pairs: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        data: Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..ConfigMap::default()
    }
}

#[test]
fn discovery_url_is_the_cluster_ip_on_the_internal_port() {
    assert_eq!(
        IssuerTrust::for_service(&service("10.96.0.50"), CA_PEM).discovery_url,
        "https://10.96.0.50:8444/.well-known/openid-configuration"
    );
}

#[test]
fn an_ipv6_cluster_ip_is_put_in_brackets() {
    assert_eq!(
        IssuerTrust::for_service(&service("fd00:10:96::50"), CA_PEM).discovery_url,
        "https://[fd00:10:96::50]:8444/.well-known/openid-configuration"
    );
}

#[test]
fn renders_the_trust_configmap() {
    let cm = render_trust_configmap(&IssuerTrust::for_service(&service("10.96.0.50"), CA_PEM));
    insta::assert_yaml_snapshot!("trust_configmap", cm);
}

#[test]
fn renders_the_ui_ca_configmap_with_the_ca_alone() {
    let cm = render_ui_ca_configmap(CA_PEM);
    let data = cm.data.clone().unwrap();
    assert_eq!(data.keys().collect::<Vec<_>>(), ["ca.crt"]);
    assert_eq!(data["ca.crt"], CA_PEM);
    insta::assert_yaml_snapshot!("ui_ca_configmap", cm);
}

#[test]
fn reads_back_what_it_renders() {
    for ip in ["10.96.0.50", "fd00:10:96::50"] {
        let trust = IssuerTrust::for_service(&service(ip), CA_PEM);
        assert_eq!(
            IssuerTrust::from_configmap(&render_trust_configmap(&trust)).unwrap(),
            trust
        );
    }
}

#[test]
fn refuses_a_configmap_missing_either_key() {
    assert_eq!(
        IssuerTrust::from_configmap(&ConfigMap::default()).unwrap_err(),
        TrustConfigMapError::Missing { key: "discoveryURL" }
    );
    let cm = with_data(&[(
        "discoveryURL",
        "https://10.0.0.1:8444/.well-known/openid-configuration",
    )]);
    assert_eq!(
        IssuerTrust::from_configmap(&cm).unwrap_err(),
        TrustConfigMapError::Missing { key: "ca.crt" }
    );
}

#[test]
fn refuses_a_discovery_url_that_is_not_https() {
    for url in [
        "http://10.0.0.1:8444/.well-known/openid-configuration",
        "10.0.0.1:8444",
        "https://",
        "",
    ] {
        let cm = with_data(&[("discoveryURL", url), ("ca.crt", CA_PEM)]);
        assert_eq!(
            IssuerTrust::from_configmap(&cm).unwrap_err(),
            TrustConfigMapError::NotHttps,
            "{url}"
        );
    }
}

#[test]
fn refuses_a_ca_crt_without_a_certificate_block() {
    let key = "-----BEGIN PRIVATE KEY-----\nMAMCAQA=\n-----END PRIVATE KEY-----\n";
    for ca in ["", "not pem", key] {
        let cm = with_data(&[("discoveryURL", "https://10.0.0.1:8444/x"), ("ca.crt", ca)]);
        assert_eq!(
            IssuerTrust::from_configmap(&cm).unwrap_err(),
            TrustConfigMapError::NoCertificate
        );
    }
}
