//! The webhooks' serving certificate and `caBundle`s: the pure decision, and the graph settling
//! them in the simulation, with the replay naming each decision's node and reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use ichor_graph::{Event, JournalReader, ObjectKey, owned_fields_match};
use ichor_renderers::trust::{CA_SECRET, NAMESPACE};
use jiff::SignedDuration;

use super::*;
use crate::identity::effects::IssueCaRequest;
use crate::identity::{Controller, replay};
use crate::perform::{self, IssuedPair};
use crate::sim::workload::start;
use crate::sim::{Sim, SimKeyMaterial, fixtures};
use ichor_renderers::trust::tls::CA_COMMON_NAME;

const SERVICE: &str = "ichor-controller-webhook";

fn secret_key() -> ObjectKey {
    ObjectKey::new("Secret", NAMESPACE, WEBHOOK_TLS_SECRET)
}

fn configuration_key() -> ObjectKey {
    ObjectKey::new(CONFIGURATION_KIND, "", WEBHOOK_CONFIGURATION)
}

fn text(sim: &Sim<Vec<u8>>, secret: &str, key: &str) -> String {
    let o = sim
        .controller()
        .world()
        .get(&ObjectKey::new("Secret", NAMESPACE, secret))
        .unwrap_or_else(|| panic!("Secret {secret}"));
    let b64 = o.value["data"][key].as_str().unwrap();
    String::from_utf8(STANDARD.decode(b64).unwrap()).unwrap()
}

/// An installation with the issuer Service (so the CA is issued) and the webhook configuration,
/// settled.
fn settled() -> Sim<Vec<u8>> {
    let mut sim = Sim::new(Vec::new()).unwrap();
    sim.push(Event::Applied(fixtures::issuer_service("10.96.0.10")))
        .unwrap();
    sim.push(Event::Applied(fixtures::webhook_configuration(SERVICE)))
        .unwrap();
    sim.step(Event::Tick(start())).unwrap();
    sim
}

/// The certificates node's view of the CA the simulation issued.
fn observed_ca(world: &ichor_graph::World) -> Certificates {
    crate::identity::nodes::certificates(
        &world
            .get(&ObjectKey::new("Secret", NAMESPACE, CA_SECRET))
            .cloned(),
        &None,
    )
}

fn replayed(journal: &[u8]) -> String {
    let mut c = Controller::new().unwrap();
    replay(JournalReader::new(journal), &mut c).unwrap().to_string()
}

#[test]
fn the_serving_certificate_names_the_service_in_all_four_forms() {
    assert_eq!(
        webhook_sans("ichor-webhook", "ichor-system"),
        [
            "ichor-webhook",
            "ichor-webhook.ichor-system",
            "ichor-webhook.ichor-system.svc",
            "ichor-webhook.ichor-system.svc.cluster.local"
        ]
    );
}

#[test]
fn no_secret_means_issue() {
    assert!(matches!(
        decide_webhook_cert(None, "ca", &[], Timestamp::UNIX_EPOCH),
        CertDecision::Issue { .. }
    ));
}

#[test]
fn the_graph_issues_the_certificate_for_the_configured_service_and_sets_every_bundle() {
    let sim = settled();
    let ca = text(&sim, CA_SECRET, TLS_CERT_KEY);
    let leaf = CertFacts::from_pem(&text(&sim, WEBHOOK_TLS_SECRET, TLS_CERT_KEY), "leaf").unwrap();
    assert!(leaf.is_issued_by(&CertFacts::from_pem(&ca, "ca").unwrap()));
    assert!(
        leaf.sans
            .contains(&San::Dns(format!("{SERVICE}.{NAMESPACE}.svc"))),
        "{:?}",
        leaf.sans
    );
    assert_eq!(text(&sim, WEBHOOK_TLS_SECRET, CA_CERT_KEY), ca);
    let configuration = sim.controller().world().get(&configuration_key()).unwrap();
    let hooks = configuration.value["webhooks"].as_array().unwrap();
    assert_eq!(hooks.len(), 2);
    for w in hooks {
        assert_eq!(w["clientConfig"]["caBundle"], STANDARD.encode(&ca));
        assert_eq!(
            w["clientConfig"]["service"]["name"], SERVICE,
            "the rest as observed"
        );
        assert_eq!(w["failurePolicy"], "Fail");
    }
}

#[test]
fn a_settled_certificate_decides_nothing_until_its_renewal_point_then_replaces_it() {
    let mut sim = settled();
    assert!(sim.evaluate().is_empty(), "a fixed point");
    let leaf = CertFacts::from_pem(&text(&sim, WEBHOOK_TLS_SECRET, TLS_CERT_KEY), "leaf").unwrap();
    let before = sim.controller().world().get(&secret_key()).unwrap().clone();
    sim.step(Event::Tick(leaf.renewal_point() - SignedDuration::from_secs(60)))
        .unwrap();
    assert_eq!(sim.controller().world().get(&secret_key()), Some(&before));
    sim.step(Event::Tick(leaf.renewal_point())).unwrap();
    let renewed = CertFacts::from_pem(&text(&sim, WEBHOOK_TLS_SECRET, TLS_CERT_KEY), "leaf").unwrap();
    assert_ne!(renewed.sha256_fingerprint, leaf.sha256_fingerprint);
    let journal = sim.into_journal().unwrap();
    let lines = replayed(&journal);
    let short = &leaf.sha256_fingerprint[..16];
    assert!(
        lines.contains(&format!(
            "effect issue-webhook-leaf replacing {short} ({}: input now changed)",
            crate::identity::names::WEBHOOK_CERTIFICATE
        )),
        "{lines}"
    );
}

#[test]
fn the_replay_shows_the_issuance_and_the_bundle_write_with_their_nodes() {
    let journal = settled().into_journal().unwrap();
    let lines = replayed(&journal);
    assert!(
        lines.contains("effect issue-webhook-leaf new (webhook-certificate: input certificates changed)"),
        "{lines}"
    );
    assert!(
        lines.contains("apply ValidatingWebhookConfiguration ichor-identity (webhook-ca-bundle: input certificates changed)"),
        "{lines}"
    );
}

#[test]
fn without_a_configuration_nothing_is_issued_and_no_bundle_is_desired() {
    let mut sim = Sim::new(Vec::new()).unwrap();
    sim.push(Event::Applied(fixtures::issuer_service("10.96.0.10")))
        .unwrap();
    sim.step(Event::Tick(start())).unwrap();
    assert!(sim.controller().world().get(&secret_key()).is_none());
    assert!(sim.evaluate().is_empty());
}

#[test]
fn a_current_bundle_matches_and_a_stale_one_is_desired_with_the_other_fields_kept() {
    let sim = settled();
    let world = sim.controller().world();
    let certs = observed_ca(world);
    let current = world.get(&configuration_key()).unwrap();
    let configurations = BTreeMap::from([(configuration_key(), current.clone())]);
    let desired = webhook_ca_bundle(&certs, &configurations);
    assert_eq!(desired.objects.len(), 1);
    assert!(owned_fields_match(&desired.objects[0].value, &current.value));

    let chart = fixtures::webhook_configuration(SERVICE);
    let configurations = BTreeMap::from([(configuration_key(), chart.clone())]);
    let desired = webhook_ca_bundle(&certs, &configurations);
    assert!(!owned_fields_match(&desired.objects[0].value, &chart.value));
    assert_eq!(
        desired.objects[0].value["webhooks"][1]["rules"],
        chart.value["webhooks"][1]["rules"]
    );
}

#[test]
fn a_redacted_serving_certificate_decides_nothing() {
    let sim = settled();
    let world = sim.controller().world();
    let certs = observed_ca(world);
    let mut secret = world.get(&secret_key()).unwrap().clone();
    secret.value["data"][TLS_CERT_KEY] = json!({"sha256": "00"});
    let configurations = BTreeMap::from([(configuration_key(), fixtures::webhook_configuration(SERVICE))]);
    let out = webhook_certificate(start(), &certs, &Some(secret), &configurations);
    assert!(out.value.effects.is_empty() && out.deadline.is_none());
}

fn ca() -> IssuedPair {
    crate::sim::fixtures::ca().unwrap()
}

fn serving(ca: &IssuedPair, from: &str, to: &str) -> BTreeMap<String, Vec<u8>> {
    let leaf = perform::issue_leaf(
        &IssueLeafRequest {
            common_name: "ichor-webhook.ichor-system.svc".into(),
            sans: webhook_sans("ichor-webhook", NAMESPACE)
                .into_iter()
                .map(SanName::Dns)
                .collect(),
            not_before: from.parse().unwrap(),
            not_after: to.parse().unwrap(),
            reason: "test".into(),
            replaces: None,
        },
        ca,
    )
    .unwrap();
    BTreeMap::from([
        ("tls.crt".to_owned(), leaf.cert_pem.into_bytes()),
        ("tls.key".to_owned(), leaf.key_pem.into_bytes()),
        ("ca.crt".to_owned(), ca.cert_pem.clone().into_bytes()),
    ])
}

#[test]
fn a_serving_certificate_two_thirds_through_its_life_is_renewed_and_not_before() {
    let ca = ca();
    let data = serving(&ca, "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z");
    let sans = webhook_sans("ichor-webhook", NAMESPACE);
    let before = "2026-08-31T00:00:00Z".parse().unwrap();
    let after = "2026-09-02T00:00:00Z".parse().unwrap();
    assert!(matches!(
        decide_webhook_cert(Some(&data), &ca.cert_pem, &sans, before),
        CertDecision::Keep { .. }
    ));
    assert_eq!(
        decide_webhook_cert(Some(&data), &ca.cert_pem, &sans, after),
        CertDecision::Issue {
            reason: "two thirds of its lifetime passed".into()
        }
    );
}

#[test]
fn a_serving_certificate_is_reissued_when_the_ca_or_the_service_name_changes() {
    let ca = ca();
    let data = serving(&ca, "2026-11-01T00:00:00Z", "2027-11-01T00:00:00Z");
    let other_ca = perform::issue_ca(
        &IssueCaRequest {
            common_name: CA_COMMON_NAME.into(),
            not_before: "2026-06-01T00:00:00Z".parse().unwrap(),
            not_after: "2036-06-01T00:00:00Z".parse().unwrap(),
            reason: "test".into(),
            replaces: None,
        },
        &mut SimKeyMaterial,
    )
    .unwrap();
    let sans = webhook_sans("ichor-webhook", NAMESPACE);
    assert_eq!(
        decide_webhook_cert(
            Some(&data),
            &other_ca.cert_pem,
            &sans,
            "2026-11-29T12:00:00Z".parse().unwrap()
        ),
        CertDecision::Issue {
            reason: "the Ichor CA changed".into()
        }
    );
    assert_eq!(
        decide_webhook_cert(
            Some(&data),
            &ca.cert_pem,
            &webhook_sans("renamed", NAMESPACE),
            "2026-11-29T12:00:00Z".parse().unwrap()
        ),
        CertDecision::Issue {
            reason: "its DNS names differ from the webhook Service's".into()
        }
    );
}
