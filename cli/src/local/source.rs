//! The World's local source of `ichor dev`, besides the Secret files: the objects of the
//! GitOps tree, the user names of the issuer local store's credentials file (as the keys of a
//! synthesised `ichor-user-credentials`), and a synthesised issuer Service `localhost`
//! (label `app.kubernetes.io/component=ui`, ClusterIP 127.0.0.1), so the leaf carries the IP
//! SAN 127.0.0.1 and the DNS SAN `localhost`.

use std::fs;
use std::path::Path;

use ichor_controller_core::identity::ISSUER_COMPONENT;
use ichor_controller_core::perform::OPAQUE;
use ichor_graph::Object;
use ichor_renderers::auth::credentials::CREDENTIALS_SECRET_NAME;
use ichor_renderers::contract::{COMPONENT_LABEL, PART_OF_LABEL, PART_OF_VALUE};
use ichor_renderers::manifest::Manifests;
use ichor_renderers::trust::NAMESPACE;
use serde_json::{Value, json};

/// The name of the synthesised issuer Service (its DNS SANs start with it).
pub const ISSUER_SERVICE_NAME: &str = "localhost";
/// The synthesised issuer Service's ClusterIP (the leaf's IP SAN).
pub const ISSUER_SERVICE_IP: &str = "127.0.0.1";

/// The synthesised issuer Service (ClusterIP 127.0.0.1).
pub fn issuer_service() -> Object {
    Object::new(
        "Service",
        NAMESPACE,
        ISSUER_SERVICE_NAME,
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": ISSUER_SERVICE_NAME, "namespace": NAMESPACE,
                "labels": {COMPONENT_LABEL: ISSUER_COMPONENT, PART_OF_LABEL: PART_OF_VALUE}},
            "spec": {"clusterIP": ISSUER_SERVICE_IP, "type": "ClusterIP",
                "ports": [{"name": "internal", "port": ichor_renderers::trust::INTERNAL_PORT}]}}),
    )
}

fn to_object<T: serde::Serialize>(kind: &str, typed: &T) -> Option<Object> {
    let mut value = serde_json::to_value(typed).ok()?;
    let meta = value.get_mut("metadata")?.as_object_mut()?;
    let name = meta.get("name")?.as_str()?.to_owned();
    let namespace = match meta.get("namespace").and_then(Value::as_str) {
        Some(ns) if !ns.is_empty() => ns.to_owned(),
        _ => {
            meta.insert("namespace".to_owned(), json!(NAMESPACE));
            NAMESPACE.to_owned()
        }
    };
    Some(Object::new(kind, namespace, name, value))
}

/// The objects of a manifest tree the graph watches (ConfigMaps are left out: the trust
/// ConfigMap is the graph's own).
pub fn manifest_objects(m: &Manifests) -> Vec<Object> {
    let mut out = Vec::new();
    out.extend(m.users.iter().filter_map(|u| to_object("IchorUser", u)));
    out.extend(
        m.installations
            .iter()
            .filter_map(|o| to_object("IchorInstallation", o)),
    );
    out.extend(m.clusters.iter().filter_map(|o| to_object("TalosCluster", o)));
    out.extend(m.machines.iter().filter_map(|o| to_object("TalosMachine", o)));
    out
}

/// The user names holding an entry in the local credentials file (`None`: no file yet, or one
/// that does not parse — then nothing is derived from it).
pub fn credentials_users(path: &Path) -> Option<Vec<String>> {
    let bytes = fs::read(path).ok()?;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    let mut users: Vec<String> = value.get("entries")?.as_object()?.keys().cloned().collect();
    users.sort();
    Some(users)
}

/// The credentials Secret the graph sees for these users: one (empty) key per user. Only the key
/// names matter to the graph; no hash ever enters the World.
pub fn credentials_secret(users: &[String]) -> Object {
    let data: serde_json::Map<String, Value> = users.iter().map(|u| (u.clone(), json!(""))).collect();
    Object::new(
        "Secret",
        NAMESPACE,
        CREDENTIALS_SECRET_NAME,
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": CREDENTIALS_SECRET_NAME, "namespace": NAMESPACE},
            "type": OPAQUE, "data": data}),
    )
}
