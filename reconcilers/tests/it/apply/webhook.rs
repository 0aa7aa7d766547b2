//! The webhooks' serving certificate (the issue-webhook-leaf effect) and the caBundle patch.

use super::*;

fn webhook_configuration(rv: &str, bundles: [&str; 2]) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "ichor-identity", "resourceVersion": rv},
        "webhooks": [
            {"name": "ichorusers.ichor.maesh.dev", "admissionReviewVersions": ["v1"], "sideEffects": "None",
             "clientConfig": {"caBundle": bundles[0],
                "service": {"name": "ichor-webhook", "namespace": NS, "path": "/validate/ichorusers", "port": 9443}}},
            {"name": "talosclusters.ichor.maesh.dev", "admissionReviewVersions": ["v1"], "sideEffects": "None",
             "clientConfig": {"caBundle": bundles[1],
                "service": {"name": "ichor-webhook", "namespace": NS, "path": "/validate/talosclusters", "port": 9443}}}]})
}

fn configuration_object(rv: &str, bundles: [&str; 2]) -> Object {
    let mut o = Object::new(
        "ValidatingWebhookConfiguration",
        "",
        "ichor-identity",
        webhook_configuration(rv, bundles),
    );
    o.resource_version = Some(rv.into());
    o
}

const CONFIGURATION_PATH: &str =
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/ichor-identity";

#[tokio::test]
async fn the_webhook_leaf_effect_writes_ichor_webhook_tls_signed_by_the_observed_ca() {
    let ca = ca();
    let expected_ca = ca.cert_pem.clone();
    let request = IssueLeafRequest {
        common_name: "ichor-webhook.ichor-system.svc".into(),
        sans: webhook_sans("ichor-webhook", NS)
            .into_iter()
            .map(SanName::Dns)
            .collect(),
        not_before: now(),
        not_after: "2027-11-29T12:00:00Z".parse().unwrap(),
        reason: "no serving certificate yet".into(),
        replaces: None,
    };
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (create, send) = next(&mut handle).await;
        assert_eq!(
            (create.method.as_str(), create.path.as_str()),
            ("POST", "/api/v1/namespaces/ichor-system/secrets")
        );
        assert_eq!(create.body["metadata"]["name"], "ichor-webhook-tls");
        assert_eq!(create.body["type"], "kubernetes.io/tls");
        let text = |k: &str| {
            String::from_utf8(STANDARD.decode(create.body["data"][k].as_str().unwrap()).unwrap()).unwrap()
        };
        assert_eq!(text("ca.crt"), expected_ca);
        let leaf = CertFacts::from_pem(&text("tls.crt"), "leaf").unwrap();
        assert!(leaf.is_issued_by(&CertFacts::from_pem(&expected_ca, "ca").unwrap()));
        let mut sans: Vec<San> = webhook_sans("ichor-webhook", NS)
            .into_iter()
            .map(San::Dns)
            .collect();
        sans.sort();
        assert_eq!(leaf.sans, sans);
        assert_eq!(leaf.not_after, "2027-11-29T12:00:00Z".parse().unwrap());
        let mut created = create.body.clone();
        created["metadata"]["resourceVersion"] = json!("1");
        reply(send, 201, &created);
        handle
    });
    let action = Action::Effect {
        request: EffectRequest::new("issue-webhook-leaf new", &request).unwrap(),
        reason: reason(),
    };
    let report = apply_scripted(client, server, &world(vec![ca_secret(&ca)]), &[action]).await;
    assert!(
        report.problems.is_empty() && report.stale.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.applied, ["effect issue-webhook-leaf new (test: initial)"]);
    let [Event::Applied(secret)] = report.events.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(secret.resource_version.as_deref(), Some("1"));
}

fn bundle_action(bundle: &str) -> Action {
    let mut desired = configuration_object("44", [bundle, bundle]);
    desired.value = json!({"webhooks": desired.value["webhooks"].clone()});
    desired.resource_version = None;
    Action::Apply {
        object: desired,
        reason: reason(),
    }
}

#[tokio::test]
async fn only_the_differing_ca_bundles_are_patched_conditioned_on_the_observed_version() {
    let bundle = STANDARD.encode(ca().cert_pem);
    let (client, mut handle) = client();
    let expected = bundle.clone();
    let server = tokio::spawn(async move {
        let (patch, send) = next(&mut handle).await;
        assert_eq!(
            (patch.method.as_str(), patch.path.as_str()),
            ("PATCH", CONFIGURATION_PATH)
        );
        assert_eq!(
            patch.content_type.as_deref(),
            Some("application/strategic-merge-patch+json")
        );
        assert_eq!(
            patch.body,
            json!({"metadata": {"resourceVersion": "44"},
                "webhooks": [{"name": "talosclusters.ichor.maesh.dev", "clientConfig": {"caBundle": expected}}]}),
            "only the stale caBundle, conditioned on the resourceVersion"
        );
        reply(
            send,
            200,
            &webhook_configuration("45", [expected.as_str(), expected.as_str()]),
        );
        handle
    });
    let w = world(vec![configuration_object("44", [bundle.as_str(), "b2xk"])]);
    let report = apply_scripted(client, server, &w, &[bundle_action(&bundle)]).await;
    assert!(
        report.problems.is_empty() && report.stale.is_empty(),
        "{report:?}"
    );
    let [Event::Applied(o)] = report.events.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(o.resource_version.as_deref(), Some("45"));
    assert_eq!(o.namespace.as_str(), "", "cluster-scoped");
}

#[tokio::test]
async fn a_ca_bundle_patch_meeting_a_conflict_is_stale_and_hands_back_the_configuration_as_read_again() {
    let bundle = STANDARD.encode(ca().cert_pem);
    let (client, mut handle) = client();
    let server = tokio::spawn(async move {
        let (patch, send) = next(&mut handle).await;
        assert_eq!(patch.method, "PATCH");
        reply(
            send,
            409,
            &conflict("validatingwebhookconfigurations.admissionregistration.k8s.io \"ichor-identity\""),
        );
        let (read, send) = next(&mut handle).await;
        assert_eq!(
            (read.method.as_str(), read.path.as_str()),
            ("GET", CONFIGURATION_PATH)
        );
        reply(send, 200, &webhook_configuration("46", ["bmV3", "bmV3"]));
        handle
    });
    let w = world(vec![configuration_object("44", ["b2xk", "b2xk"])]);
    let report = apply_scripted(client, server, &w, &[bundle_action(&bundle)]).await;
    assert!(
        report.problems.is_empty() && report.applied.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.stale.len(), 1, "{report:?}");
    let [Event::Applied(o)] = report.events.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(o.resource_version.as_deref(), Some("46"));
}
