//! Which Kubernetes API resource holds each kind the identity graph names, and the conversions
//! between the graph's [`Object`] and the API's JSON.

use ichor_graph::Object;
use kube::core::ApiResource;
use serde_json::{Map, Value, json};

/// The API group of the Ichor custom resources.
pub use ichor_renderers::contract::GROUP as ICHOR_GROUP;
/// The version of the Ichor custom resources.
pub use ichor_renderers::contract::VERSION as ICHOR_VERSION;

/// Where a kind lives in the API and what the controller may write to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// Group, version, kind and plural.
    pub api: ApiResource,
    /// Whether objects of the kind live in a namespace.
    pub namespaced: bool,
    /// Whether the kind is an *input* (written by people or other controllers): the controller
    /// never writes its `spec` and never deletes it; only its `status` subresource.
    pub input: bool,
}

fn resource(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool, input: bool) -> Resource {
    let api_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Resource {
        api: ApiResource {
            group: group.to_owned(),
            version: version.to_owned(),
            api_version,
            kind: kind.to_owned(),
            plural: plural.to_owned(),
        },
        namespaced,
        input,
    }
}

/// The resource of `kind`, `None` for a kind this applier does not know (a graph newer than it).
pub fn resource_for(kind: &str) -> Option<Resource> {
    let ichor =
        |plural: &str, namespaced: bool| resource(ICHOR_GROUP, ICHOR_VERSION, kind, plural, namespaced, true);
    Some(match kind {
        "Secret" => resource("", "v1", kind, "secrets", true, false),
        "ConfigMap" => resource("", "v1", kind, "configmaps", true, false),
        "Service" => resource("", "v1", kind, "services", true, true),
        "IchorUser" => ichor("ichorusers", true),
        "TalosCluster" => ichor("talosclusters", true),
        "TalosMachine" => ichor("talosmachines", true),
        "TalosOperation" => ichor("talosoperations", true),
        "IchorInstallation" => ichor("ichorinstallations", false),
        "ValidatingWebhookConfiguration" => resource(
            "admissionregistration.k8s.io",
            "v1",
            kind,
            "validatingwebhookconfigurations",
            false,
            false,
        ),
        _ => return None,
    })
}

/// Whether a desired object is a status write: its value holds `status` and nothing else the
/// controller would write (`apiVersion`, `kind` and `metadata` only identify it).
pub fn is_status_write(value: &Value) -> bool {
    value.as_object().is_some_and(|map| {
        map.contains_key("status")
            && map
                .keys()
                .all(|k| matches!(k.as_str(), "status" | "apiVersion" | "kind" | "metadata"))
    })
}

/// The body of a server-side apply of `object`: its value with `apiVersion`, `kind`, name and
/// namespace set from the key (a desired object is partial and may leave them out).
pub fn apply_body(object: &Object, resource: &Resource) -> Value {
    let mut value = match &object.value {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    value.insert("apiVersion".into(), json!(resource.api.api_version));
    value.insert("kind".into(), json!(resource.api.kind));
    let meta = value
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    if let Some(meta) = meta.as_object_mut() {
        meta.insert("name".into(), json!(object.name));
        if resource.namespaced {
            meta.insert("namespace".into(), json!(object.namespace));
        } else {
            meta.remove("namespace");
        }
        // Never carried into an apply: the server owns them.
        for k in [
            "resourceVersion",
            "uid",
            "managedFields",
            "creationTimestamp",
            "generation",
        ] {
            meta.remove(k);
        }
    }
    Value::Object(value)
}

/// The object as the graph observes it, from the API server's JSON: `metadata.managedFields`
/// dropped (bookkeeping of the server, not state), the resourceVersion lifted into
/// [`Object::resource_version`]. `kind` is the graph's kind; the key's namespace and name come
/// from the returned metadata, falling back to `fallback`'s.
pub fn observed(kind: &str, fallback: &Object, mut value: Value) -> Object {
    let meta = value.get_mut("metadata").and_then(Value::as_object_mut);
    let (namespace, name, rv) = match meta {
        Some(meta) => {
            meta.remove("managedFields");
            let s = |k: &str| meta.get(k).and_then(Value::as_str).map(str::to_owned);
            (s("namespace"), s("name"), s("resourceVersion"))
        }
        None => (None, None, None),
    };
    let mut object = Object::new(
        kind,
        namespace.unwrap_or_else(|| fallback.namespace.clone()),
        name.unwrap_or_else(|| fallback.name.clone()),
        value,
    );
    object.resource_version = rv;
    object
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ichor_kind_is_an_input_in_the_ichor_group_and_owned_kinds_are_not() {
        for kind in [
            "IchorUser",
            "TalosCluster",
            "TalosMachine",
            "TalosOperation",
            "IchorInstallation",
        ] {
            let r = resource_for(kind).unwrap_or_else(|| panic!("{kind}"));
            assert!(r.input, "{kind}");
            assert_eq!(r.api.api_version, "ichor.maesh.dev/v1alpha1");
        }
        assert!(!resource_for("IchorInstallation").is_some_and(|r| r.namespaced));
        assert!(!resource_for("ConfigMap").is_some_and(|r| r.input));
        assert_eq!(
            resource_for("Secret").map(|r| r.api.api_version),
            Some("v1".into())
        );
        assert_eq!(resource_for("Deployment"), None);
    }

    #[test]
    fn only_an_object_without_spec_or_data_is_a_status_write() {
        assert!(is_status_write(&json!({"status": {"conditions": []}})));
        assert!(is_status_write(
            &json!({"apiVersion": "v1", "metadata": {}, "status": {}})
        ));
        assert!(!is_status_write(&json!({"status": {}, "spec": {}})));
        assert!(!is_status_write(&json!({"data": {}})));
    }

    #[test]
    fn the_apply_body_names_the_object_and_carries_no_server_fields() {
        let object = Object::new(
            "ConfigMap",
            "ichor-system",
            "ichor-oidc-trust",
            json!({"metadata": {"resourceVersion": "7", "labels": {"a": "b"}}, "data": {"k": "v"}}),
        );
        let body = apply_body(&object, &resource_for("ConfigMap").unwrap_or_else(|| panic!()));
        assert_eq!(
            body,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "ichor-oidc-trust", "namespace": "ichor-system", "labels": {"a": "b"}},
                "data": {"k": "v"}})
        );
    }
}
