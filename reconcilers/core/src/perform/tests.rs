//! The performers against fixed key material.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::identity::effects::{KeyDocumentChange, KeyKind, SanName};
use ichor_renderers::trust::keys::KeyTimes;
use ichor_renderers::trust::tls::CA_COMMON_NAME;
use jiff::Timestamp;

/// Fixed material, counting what was asked.
#[derive(Default)]
struct Counting {
    rsa: usize,
    hmac: usize,
}

impl KeyMaterial for Counting {
    fn rsa_pkcs8_pem(&mut self) -> Result<String, KeyMaterialError> {
        self.rsa += 1;
        Ok(crate::sim::TEST_RSA_PEM.to_owned())
    }
    fn hmac_secret(&mut self, _kid: &str) -> Result<[u8; 32], KeyMaterialError> {
        self.hmac += 1;
        Ok([7; 32])
    }
}

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn request(kind: KeyKind, kid: &str, changes: Vec<KeyDocumentChange>) -> GenerateKeyRequest {
    GenerateKeyRequest {
        kind,
        kid: kid.into(),
        created_at: ts("2026-01-01T00:00:00Z"),
        active_from: ts("2026-01-01T00:00:00Z"),
        reason: "test".into(),
        based_on_resource_version: None,
        document_changes: changes,
    }
}

#[test]
fn generates_one_key_per_request_and_applies_the_document_changes_once() {
    let mut m = Counting::default();
    let first = signing_keys(
        None,
        &[
            request(KeyKind::Rsa, "k-1", vec![]),
            request(KeyKind::Hmac, "h-1", vec![]),
        ],
        &mut m,
    )
    .unwrap();
    let retire = ts("2026-02-01T00:00:00Z");
    let changes = vec![
        KeyDocumentChange::SetRetireAfter {
            kind: KeyKind::Rsa,
            kid: "k-1".into(),
            retire_after: retire,
        },
        KeyDocumentChange::Drop {
            kind: KeyKind::Hmac,
            kid: "h-1".into(),
        },
    ];
    let second = signing_keys(
        Some(&first),
        &[
            request(KeyKind::Rsa, "k-2", changes.clone()),
            request(KeyKind::Rsa, "k-2", changes),
        ],
        &mut m,
    )
    .unwrap();
    assert_eq!((m.rsa, m.hmac), (2, 1), "k-2 is generated once");
    assert_eq!(
        second.rsa_key("k-1").and_then(KeyTimes::retire_after),
        Some(retire)
    );
    assert!(second.hmac_key("h-1").is_none());
    assert!(second.rsa_key("k-2").is_some());
}

#[test]
fn a_key_request_planned_from_another_resource_version_is_refused_as_stale() {
    let mut world = World::new();
    let mut secret = SecretData {
        name: SIGNING_SECRET.into(),
        type_: OPAQUE.into(),
        data: BTreeMap::new(),
    }
    .to_object();
    secret.resource_version = Some("5".into());
    world.apply(ichor_graph::Event::Applied(secret));
    let mut r = request(KeyKind::Rsa, "k-1", vec![]);
    r.based_on_resource_version = Some("4".into());
    let effect = EffectRequest::new(r.id(), &r).unwrap();
    let refused = perform(&world, &[&effect], &mut Counting::default()).unwrap_err();
    assert!(matches!(refused, PerformError::Stale { .. }), "{refused}");
}

#[test]
fn an_unknown_effect_is_refused_by_name() {
    let effect = EffectRequest::new("launch-rockets".to_owned(), &json!({})).unwrap();
    let refused = perform(&World::new(), &[&effect], &mut Counting::default()).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "effect launch-rockets: unknown effect; this applier is older than the graph that asked for it"
    );
}

#[test]
fn the_leaf_is_signed_by_the_rsa_ca_and_carries_the_requested_sans() {
    let now = ts("2026-01-01T00:00:00Z");
    let ca = issue_ca(
        &IssueCaRequest {
            common_name: CA_COMMON_NAME.into(),
            not_before: now,
            not_after: ts("2036-01-01T00:00:00Z"),
            reason: "test".into(),
            replaces: None,
        },
        &mut OsKeyMaterial,
    )
    .unwrap();
    let leaf = issue_leaf(
        &IssueLeafRequest {
            common_name: "ichor-issuer".into(),
            sans: vec![
                SanName::Ip("127.0.0.1".parse().unwrap()),
                SanName::Dns("localhost".into()),
            ],
            not_before: now,
            not_after: ts("2027-01-01T00:00:00Z"),
            reason: "test".into(),
            replaces: None,
        },
        &ca,
    )
    .unwrap();
    use ichor_renderers::trust::tls::{CertFacts, San};
    let ca_facts = CertFacts::from_pem(&ca.cert_pem, "ca").unwrap();
    let leaf_facts = CertFacts::from_pem(&leaf.cert_pem, "leaf").unwrap();
    assert!(leaf_facts.is_issued_by(&ca_facts));
    assert_eq!(leaf_facts.not_after, ts("2027-01-01T00:00:00Z"));
    assert!(leaf_facts.sans.contains(&San::Dns("localhost".into())));
    assert!(ca.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
    assert!(
        !format!("{ca:?}").contains("PRIVATE"),
        "Debug never shows the key"
    );
}
