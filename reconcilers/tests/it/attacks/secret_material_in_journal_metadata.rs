//! A Secret the controller watches is written with `kubectl apply`: the apiserver keeps the
//! whole object, data included, in the `kubectl.kubernetes.io/last-applied-configuration`
//! annotation, and lists every key in `metadata.managedFields`. Whoever reads the controller's
//! `--journal` file (a debugging copy, a support bundle) must find none of the Secret's bytes
//! there: not in `data`, not in `stringData`, not in any annotation, not in the managed fields.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ichor_controller::run::convert::WatchState;
use ichor_controller::run::watch::sources;
use ichor_graph::{Event, JournalWriter, Object};
use ichor_renderers::auth::credentials::CREDENTIALS_SECRET_NAME;
use ichor_renderers::trust::NAMESPACE;
use kube::api::DynamicObject;
use kube::runtime::watcher;
use serde_json::json;

/// The clear secret: an argon2id hash of the credentials Secret, and a second value set through
/// `stringData`.
const HASH: &str = "$argon2id$v=19$m=65536,t=3,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2g";
const PLAIN: &str = "plain-secret-value-0123456789";

/// Every form in which the secret bytes could be written: clear, base64, and JSON-escaped.
fn forms() -> Vec<String> {
    let mut forms = Vec::new();
    for clear in [HASH, PLAIN] {
        forms.push(clear.to_owned());
        forms.push(STANDARD.encode(clear));
        let escaped = serde_json::to_string(clear).unwrap();
        forms.push(escaped.trim_matches('"').to_owned());
    }
    // The distinctive middle of the hash, in case it is cut or re-encoded around its `$`s.
    forms.push("c2FsdHNhbHRzYWx0".to_owned());
    forms
}

/// The credentials Secret as the apiserver serves it after `kubectl apply`.
fn applied_secret() -> DynamicObject {
    let entry = json!({"alice": {"hash": HASH}}).to_string();
    let last_applied = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": CREDENTIALS_SECRET_NAME, "namespace": NAMESPACE},
        "data": {"users.json": STANDARD.encode(&entry)},
        "stringData": {"note": PLAIN},
    })
    .to_string();
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {
            "name": CREDENTIALS_SECRET_NAME, "namespace": NAMESPACE, "resourceVersion": "42",
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": last_applied,
                "example.com/copy": HASH,
            },
            "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {"f:users.json": {}}, "f:metadata": {"f:annotations": {
                    "f:example.com/copy": {}}}}}],
        },
        "data": {"users.json": STANDARD.encode(&entry), "note": STANDARD.encode(PLAIN)},
    }))
    .unwrap()
}

fn assert_no_secret_bytes(text: &str) {
    for form in forms() {
        assert!(!text.contains(&form), "{form:?} is in the journal:\n{text}");
    }
}

#[tokio::test]
async fn a_secret_applied_with_kubectl_leaves_none_of_its_bytes_in_the_controllers_journal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let (mut lp, _) = crate::run::identity_loop(Some(&path));
    let label = format!("Secret {CREDENTIALS_SECRET_NAME}");
    let source = sources("app.kubernetes.io/component=issuer", "ichor-identity")
        .into_iter()
        .find(|s| s.label == label)
        .unwrap();
    let mut watch = WatchState::new(source.resource);
    let events = watch.on_event(watcher::Event::Apply(applied_secret()));
    assert_eq!(events.len(), 1, "{events:?}");
    lp.ingest(events);
    drop(lp.take_journal());

    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains(CREDENTIALS_SECRET_NAME),
        "the Secret was journaled: {text}"
    );
    assert_no_secret_bytes(&text);
    // The journal still tells what the nodes need: the Secret and its key names.
    assert!(text.contains("users.json"), "{text}");
}

#[test]
fn a_secrets_managed_fields_and_annotations_reach_no_journal_even_when_handed_over_whole() {
    // The graph's writer on its own, given the object as the apiserver served it (managed
    // fields included): its redaction, not the controller's conversion, must hold.
    let value = serde_json::to_value(applied_secret()).unwrap();
    let secret = Object::new("Secret", NAMESPACE, CREDENTIALS_SECRET_NAME, value);
    let mut writer = JournalWriter::new(Vec::new());
    writer.append(&Event::Applied(secret)).unwrap();
    let text = String::from_utf8(writer.into_inner()).unwrap();
    assert_no_secret_bytes(&text);
    assert!(!text.contains("managedFields"), "{text}");
    assert!(!text.contains("f:users.json"), "{text}");
}
