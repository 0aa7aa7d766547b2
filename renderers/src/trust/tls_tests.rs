//! Tests of the TLS decisions, with real certificates made by rcgen.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::tls::*;
use jiff::Timestamp;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, date_time_ymd};
use sha2::{Digest, Sha256};
use std::net::IpAddr;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn service(ip: &str) -> IssuerService {
    IssuerService {
        cluster_ip: ip.parse().unwrap(),
        name: "ichor-issuer".into(),
        namespace: "ichor-system".into(),
    }
}

const GOOD_SANS: [&str; 5] = [
    "10.96.0.50",
    "ichor-issuer",
    "ichor-issuer.ichor-system",
    "ichor-issuer.ichor-system.svc",
    "ichor-issuer.ichor-system.svc.cluster.local",
];

/// A CA valid from `from` to `to` (years, January 1st).
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

fn ca(cn: &str, from: i32, to: i32) -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, cn);
    params.not_before = date_time_ymd(from, 1, 1);
    params.not_after = date_time_ymd(to, 1, 1);
    let pem = params.self_signed(&key).unwrap().pem();
    Ca {
        issuer: Issuer::new(params, key),
        pem,
    }
}

fn leaf(ca: &Ca, sans: &[&str], from: (i32, u8, u8), to: (i32, u8, u8), aki: bool) -> String {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "ichor-issuer.ichor-system.svc");
    params.not_before = date_time_ymd(from.0, from.1, from.2);
    params.not_after = date_time_ymd(to.0, to.1, to.2);
    params.use_authority_key_identifier_extension = aki;
    params.signed_by(&key, &ca.issuer).unwrap().pem()
}

fn facts(pem: &str) -> CertFacts {
    CertFacts::from_pem(pem, "test").unwrap()
}

/// A CA 2027–2037 and a good leaf 2027-01-01 – 2028-01-01.
fn good() -> (CertFacts, CertFacts) {
    let ca = ca(CA_COMMON_NAME, 2027, 2037);
    let leaf = leaf(&ca, &GOOD_SANS, (2027, 1, 1), (2028, 1, 1), true);
    (facts(&ca.pem), facts(&leaf))
}

#[test]
fn reads_validity_sans_key_ids_and_fingerprint_of_a_certificate() {
    let ca = ca(CA_COMMON_NAME, 2027, 2037);
    let leaf_pem = leaf(&ca, &GOOD_SANS, (2027, 1, 1), (2028, 1, 1), true);
    let (ca, leaf) = (facts(&ca.pem), facts(&leaf_pem));
    assert!(ca.is_ca && !leaf.is_ca);
    assert_eq!(
        (leaf.not_before, leaf.not_after),
        (ts("2027-01-01T00:00:00Z"), ts("2028-01-01T00:00:00Z"))
    );
    assert_eq!(leaf.sans, service("10.96.0.50").expected_sans());
    assert_eq!(ca.subject, "CN=Ichor OIDC issuer CA");
    assert_eq!(leaf.issuer, ca.subject);
    assert!(ca.subject_key_id.is_some());
    assert_eq!(leaf.authority_key_id, ca.subject_key_id);
    assert!(leaf.is_issued_by(&ca));
    let der = pem::parse(&leaf_pem).unwrap();
    assert_eq!(
        leaf.sha256_fingerprint,
        hex::encode(Sha256::digest(der.contents()))
    );
}

#[test]
fn refuses_text_that_is_not_a_certificate_naming_the_source() {
    assert!(matches!(
        CertFacts::from_pem("nothing", "ca.crt"),
        Err(CertError::NotPem { .. })
    ));
    let key = KeyPair::generate().unwrap().serialize_pem();
    let err = CertFacts::from_pem(&key, "tls.crt of ichor-oidc-tls").unwrap_err();
    assert_eq!(
        err.to_string(),
        "tls.crt of ichor-oidc-tls starts with a \"PRIVATE KEY\" PEM block; a \"CERTIFICATE\" block is required first"
    );
    let garbage = "-----BEGIN CERTIFICATE-----\nMAMCAQA=\n-----END CERTIFICATE-----\n";
    assert!(matches!(
        CertFacts::from_pem(garbage, "ca.crt"),
        Err(CertError::Malformed { .. })
    ));
}

#[test]
fn with_nothing_issues_a_ten_year_ca_and_a_one_year_leaf_for_the_service() {
    let now = ts("2027-03-04T05:06:07Z");
    let d = decide(now, None, None, &service("10.96.0.50"));
    assert_eq!(d.next_deadline, None);
    assert_eq!(
        d.effects,
        vec![
            TlsEffect::IssueCa {
                common_name: CA_COMMON_NAME.into(),
                not_before: now,
                not_after: ts("2037-03-04T05:06:07Z"),
                reason: "no CA certificate in ichor-oidc-ca".into(),
            },
            TlsEffect::IssueLeaf {
                common_name: "ichor-issuer.ichor-system.svc".into(),
                sans: service("10.96.0.50").expected_sans(),
                not_before: now,
                not_after: ts("2028-03-04T05:06:07Z"),
                reason: "no leaf certificate in ichor-oidc-tls".into(),
            },
        ]
    );
}

#[test]
fn with_a_good_ca_and_leaf_asks_for_nothing_until_two_thirds_of_the_leaf_life() {
    let (ca, leaf) = good();
    let d = decide(
        ts("2027-06-01T00:00:00Z"),
        Some(&ca),
        Some(&leaf),
        &service("10.96.0.50"),
    );
    assert!(d.effects.is_empty(), "{:?}", d.effects);
    // 365 days × 2/3 = 243 days 8 hours after 2027-01-01.
    assert_eq!(d.next_deadline, Some(ts("2027-09-01T08:00:00Z")));
    assert_eq!(leaf.renewal_point(), ts("2027-09-01T08:00:00Z"));
    let before = decide(
        ts("2027-09-01T07:59:59Z"),
        Some(&ca),
        Some(&leaf),
        &service("10.96.0.50"),
    );
    assert!(before.effects.is_empty());
}

#[test]
fn reissues_the_leaf_when_two_thirds_of_its_lifetime_passed() {
    let (ca, leaf) = good();
    let now = ts("2027-09-01T08:00:00Z");
    let d = decide(now, Some(&ca), Some(&leaf), &service("10.96.0.50"));
    assert_eq!(d.effects.len(), 1);
    let TlsEffect::IssueLeaf {
        reason, not_after, ..
    } = &d.effects[0]
    else {
        panic!("{d:?}")
    };
    assert_eq!(
        reason,
        "two thirds of the leaf's lifetime (2027-01-01T00:00:00Z to 2028-01-01T00:00:00Z) passed at 2027-09-01T08:00:00Z"
    );
    assert_eq!(*not_after, ts("2028-09-01T08:00:00Z"));
}

#[test]
fn reissues_only_the_leaf_when_the_cluster_ip_changed() {
    let (ca, leaf) = good();
    let d = decide(
        ts("2027-06-01T00:00:00Z"),
        Some(&ca),
        Some(&leaf),
        &service("10.96.7.7"),
    );
    assert_eq!(d.effects.len(), 1);
    let TlsEffect::IssueLeaf { reason, sans, .. } = &d.effects[0] else {
        panic!("{d:?}")
    };
    assert_eq!(
        reason,
        "leaf SANs [IP:10.96.0.50, DNS:ichor-issuer, DNS:ichor-issuer.ichor-system, DNS:ichor-issuer.ichor-system.svc, \
         DNS:ichor-issuer.ichor-system.svc.cluster.local] differ from the issuer Service [IP:10.96.7.7, DNS:ichor-issuer, \
         DNS:ichor-issuer.ichor-system, DNS:ichor-issuer.ichor-system.svc, DNS:ichor-issuer.ichor-system.svc.cluster.local]"
    );
    assert!(sans.contains(&San::Ip("10.96.7.7".parse().unwrap())));
}

#[test]
fn reissues_the_leaf_when_a_dns_name_is_missing() {
    let ca = ca(CA_COMMON_NAME, 2027, 2037);
    let leaf = leaf(&ca, &GOOD_SANS[..4], (2027, 1, 1), (2028, 1, 1), true);
    let d = decide(
        ts("2027-02-01T00:00:00Z"),
        Some(&facts(&ca.pem)),
        Some(&facts(&leaf)),
        &service("10.96.0.50"),
    );
    assert_eq!(d.effects.len(), 1);
    assert!(
        d.effects[0]
            .reason()
            .starts_with("leaf SANs [IP:10.96.0.50, DNS:ichor-issuer, ")
    );
}

#[test]
fn matches_an_ipv6_cluster_ip() {
    let ca = ca(CA_COMMON_NAME, 2027, 2037);
    let mut sans = GOOD_SANS;
    sans[0] = "fd00:10:96::50";
    let leaf = leaf(&ca, &sans, (2027, 1, 1), (2028, 1, 1), true);
    let leaf = facts(&leaf);
    assert!(
        leaf.sans
            .contains(&San::Ip("fd00:10:96::50".parse::<IpAddr>().unwrap()))
    );
    let d = decide(
        ts("2027-02-01T00:00:00Z"),
        Some(&facts(&ca.pem)),
        Some(&leaf),
        &service("fd00:10:96::50"),
    );
    assert!(d.effects.is_empty(), "{d:?}");
}

#[test]
fn reissues_the_leaf_when_another_ca_of_the_same_name_issued_it() {
    let current = ca(CA_COMMON_NAME, 2027, 2037);
    let other = ca(CA_COMMON_NAME, 2027, 2037);
    let leaf = facts(&leaf(&other, &GOOD_SANS, (2027, 1, 1), (2028, 1, 1), true));
    let current = facts(&current.pem);
    assert!(!leaf.is_issued_by(&current));
    let d = decide(
        ts("2027-02-01T00:00:00Z"),
        Some(&current),
        Some(&leaf),
        &service("10.96.0.50"),
    );
    assert_eq!(d.effects.len(), 1);
    let expected = format!(
        "the leaf was issued by \"CN=Ichor OIDC issuer CA\" (key id {}), not by the current CA \"CN=Ichor OIDC issuer CA\" (key id {})",
        leaf.authority_key_id.as_deref().unwrap(),
        current.subject_key_id.as_deref().unwrap()
    );
    assert_eq!(d.effects[0].reason(), expected);
}

#[test]
fn reissues_a_leaf_without_authority_key_identifier() {
    let ca = ca(CA_COMMON_NAME, 2027, 2037);
    let leaf = facts(&leaf(&ca, &GOOD_SANS, (2027, 1, 1), (2028, 1, 1), false));
    assert_eq!(leaf.authority_key_id, None);
    let d = decide(
        ts("2027-02-01T00:00:00Z"),
        Some(&facts(&ca.pem)),
        Some(&leaf),
        &service("10.96.0.50"),
    );
    assert_eq!(d.effects.len(), 1);
    assert!(d.effects[0].reason().contains("(key id none)"));
}

#[test]
fn reissues_the_ca_and_the_leaf_when_the_ca_expired() {
    let old = ca(CA_COMMON_NAME, 2017, 2027);
    let leaf = facts(&leaf(&old, &GOOD_SANS, (2026, 6, 1), (2027, 1, 1), true));
    let old = facts(&old.pem);
    let now = ts("2027-01-01T00:00:00Z");
    let d = decide(now, Some(&old), Some(&leaf), &service("10.96.0.50"));
    assert_eq!(d.effects.len(), 2);
    assert_eq!(d.effects[0].reason(), "the CA expired at 2027-01-01T00:00:00Z");
    assert!(
        matches!(d.effects[0], TlsEffect::IssueCa { not_after, .. } if not_after == ts("2037-01-01T00:00:00Z"))
    );
    assert!(d.effects[1].reason().starts_with("the CA is being reissued"));
    // One second earlier the CA is still good; the leaf, past two thirds, is reissued alone.
    let d = decide(
        ts("2026-12-31T23:59:59Z"),
        Some(&old),
        Some(&leaf),
        &service("10.96.0.50"),
    );
    assert_eq!(d.effects.len(), 1);
    // …and capped at the CA's expiry.
    assert!(
        matches!(d.effects[0], TlsEffect::IssueLeaf { not_after, .. } if not_after == ts("2027-01-01T00:00:00Z"))
    );
}

#[test]
fn reissues_the_ca_when_the_certificate_is_not_a_ca() {
    let ca = ca(CA_COMMON_NAME, 2027, 2037);
    let leaf = facts(&leaf(&ca, &GOOD_SANS, (2027, 1, 1), (2028, 1, 1), true));
    let d = decide(
        ts("2027-02-01T00:00:00Z"),
        Some(&leaf),
        Some(&leaf),
        &service("10.96.0.50"),
    );
    assert_eq!(d.effects.len(), 2);
    assert!(d.effects[0].reason().ends_with("is not a CA"), "{d:?}");
}

#[test]
fn reissues_a_missing_leaf_alone() {
    let (ca, _) = good();
    let d = decide(
        ts("2027-02-01T00:00:00Z"),
        Some(&ca),
        None,
        &service("10.96.0.50"),
    );
    assert_eq!(d.effects.len(), 1);
    assert_eq!(d.effects[0].reason(), "no leaf certificate in ichor-oidc-tls");
}

#[test]
fn the_next_deadline_is_the_ca_expiry_when_it_comes_before_the_leaf_renewal() {
    let ca = ca(CA_COMMON_NAME, 2018, 2027);
    let leaf = facts(&leaf(&ca, &GOOD_SANS, (2026, 12, 1), (2027, 12, 1), true));
    let d = decide(
        ts("2026-12-02T00:00:00Z"),
        Some(&facts(&ca.pem)),
        Some(&leaf),
        &service("10.96.0.50"),
    );
    assert!(d.effects.is_empty());
    assert_eq!(d.next_deadline, Some(ts("2027-01-01T00:00:00Z")));
}

#[test]
fn reads_the_issuer_service_and_refuses_a_headless_one() {
    use k8s_openapi::api::core::v1::{Service, ServiceSpec};
    let mut svc = Service::default();
    svc.metadata.name = Some("ichor-issuer".into());
    svc.metadata.namespace = Some("ichor-system".into());
    svc.spec = Some(ServiceSpec {
        cluster_ip: Some("10.96.0.50".into()),
        ..ServiceSpec::default()
    });
    assert_eq!(IssuerService::from_service(&svc).unwrap(), service("10.96.0.50"));
    svc.spec = Some(ServiceSpec {
        cluster_ip: Some("None".into()),
        ..ServiceSpec::default()
    });
    let err = IssuerService::from_service(&svc).unwrap_err();
    assert!(
        err.to_string().contains("needs a ClusterIP (not headless)"),
        "{err}"
    );
    svc.spec = None;
    assert!(matches!(
        IssuerService::from_service(&svc),
        Err(ServiceError::Missing {
            field: "spec.clusterIP",
            ..
        })
    ));
}

#[test]
fn without_a_service_only_the_ca_is_decided_issued_when_missing_kept_until_its_expiry() {
    let now = ts("2027-03-04T05:06:07Z");
    let d = decide_ca(now, None);
    assert_eq!(d.next_deadline, None);
    assert!(
        matches!(&d.effects[..], [TlsEffect::IssueCa { not_before, .. }] if *not_before == now),
        "{:?}",
        d.effects
    );
    let (ca, _) = good();
    let kept = decide_ca(now, Some(&ca));
    assert!(kept.effects.is_empty(), "{:?}", kept.effects);
    assert_eq!(kept.next_deadline, Some(ca.not_after));
    let expired = decide_ca(ca.not_after, Some(&ca));
    assert!(
        matches!(&expired.effects[..], [TlsEffect::IssueCa { reason, .. }] if reason.contains("expired"))
    );
}
