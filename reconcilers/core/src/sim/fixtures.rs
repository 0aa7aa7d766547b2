//! Input objects for simulations: installations, the issuer Service, clusters, machines, users
//! and the credentials Secret, as the watchers would deliver them.

use ichor_graph::{Event, Object, ObjectKey};
use ichor_renderers::auth::credentials::CREDENTIALS_SECRET_NAME;
use ichor_renderers::contract::{
    API_VERSION, CLUSTERS_WEBHOOK, COMPONENT_LABEL, GROUP, ISSUER_COMPONENT, ISSUER_SERVICE,
    MANAGED_BY_LABEL, PART_OF_LABEL, PART_OF_VALUE, USERS_WEBHOOK, VERSION, WEBHOOK_CONFIGURATION,
};
use ichor_renderers::contract::{CREDENTIALS_NAMESPACE, USER_LABEL, user_credentials_secret};
use ichor_renderers::trust::NAMESPACE;
use serde_json::{Map, Value, json};

use super::{SimKeyMaterial, secret};
use crate::identity::effects::IssueCaRequest;
use crate::perform::{self, IssuedPair, PerformError};

/// The `IchorInstallation` named `ichor` with the given token TTL and refresh lifetime.
pub fn installation(token_ttl: &str, refresh_lifetime: &str) -> Object {
    Object::new(
        "IchorInstallation",
        "",
        "ichor",
        json!({"apiVersion": API_VERSION, "kind": "IchorInstallation",
            "metadata": {"name": "ichor"},
            "spec": {"users": {"tokenTTL": token_ttl, "refreshLifetime": refresh_lifetime}}}),
    )
}

/// The issuer Service with the given ClusterIP.
pub fn issuer_service(cluster_ip: &str) -> Object {
    Object::new(
        "Service",
        NAMESPACE,
        ISSUER_SERVICE,
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": ISSUER_SERVICE, "namespace": NAMESPACE,
                "labels": {COMPONENT_LABEL: ISSUER_COMPONENT, PART_OF_LABEL: PART_OF_VALUE}},
            "spec": {"clusterIP": cluster_ip, "ports": [{"name": "internal", "port": 8444}]}}),
    )
}

/// The identity webhooks' `ValidatingWebhookConfiguration` (cluster-scoped) as the chart
/// installs it: two webhooks calling Service `service` in the Ichor namespace, no `caBundle`.
pub fn webhook_configuration(service: &str) -> Object {
    let hook = |name: &str, path: &str| {
        json!({"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Fail",
            "clientConfig": {"service": {"name": service, "namespace": NAMESPACE, "path": path, "port": 443}},
            "rules": [{"apiGroups": [GROUP], "apiVersions": [VERSION],
                "operations": ["CREATE", "UPDATE"], "resources": ["ichorusers"]}]})
    };
    Object::new(
        "ValidatingWebhookConfiguration",
        "",
        WEBHOOK_CONFIGURATION,
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": WEBHOOK_CONFIGURATION, "labels": {MANAGED_BY_LABEL: "Helm"}},
            "webhooks": [hook(USERS_WEBHOOK, "/validate/ichorusers"),
                hook(CLUSTERS_WEBHOOK, "/validate/talosclusters")]}),
    )
}

/// How a cluster authenticates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// Ichor's issuer only.
    Ichor,
    /// One external provider only.
    External,
}

/// A `TalosCluster` on contract v1.14 with endpoint `https://10.<n>.0.5:6443`.
pub fn cluster(name: &str, n: u32, auth: Auth) -> Object {
    let authentication = match auth {
        Auth::Ichor => json!({"ichor": {"enabled": true, "url": "https://ichor.example.com"}}),
        Auth::External => json!({"external": [{"issuerURL": "https://idp.example.org/realms/main",
            "audiences": ["kubernetes"]}]}),
    };
    Object::new(
        "TalosCluster",
        NAMESPACE,
        name,
        json!({"apiVersion": API_VERSION, "kind": "TalosCluster",
            "metadata": {"name": name, "namespace": NAMESPACE, "generation": 1},
            "spec": {"versionContract": "v1.14", "endpoint": format!("https://10.{}.{}.5:6443", n / 250, n % 250),
                "authentication": authentication}}),
    )
}

/// A control-plane `TalosMachine` of `cluster`, reporting the given applied document hashes.
pub fn control_plane(name: &str, cluster: &str, address: &str, applied: &[(&str, &str)]) -> Object {
    let applied: Map<String, Value> = applied.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect();
    let mut value = json!({"apiVersion": API_VERSION, "kind": "TalosMachine",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"cluster": cluster, "role": "controlplane", "address": address}});
    if !applied.is_empty() {
        value["status"] = json!({"appliedDocumentHashes": applied});
    }
    Object::new("TalosMachine", NAMESPACE, name, value)
}

/// The machine with its applied document hashes replaced (what the machine controller reports
/// after `ichor config apply`), keeping its conditions.
pub fn with_applied(machine: &Object, applied: &[(String, String)]) -> Object {
    let mut m = machine.clone();
    let map: Map<String, Value> = applied.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    m.value["status"]["appliedDocumentHashes"] = Value::Object(map);
    m.resource_version = None;
    m
}

/// An `IchorUser` at the given generation.
pub fn user(name: &str, roles: &[&str], disabled: bool, generation: i64) -> Object {
    Object::new(
        "IchorUser",
        NAMESPACE,
        name,
        json!({"apiVersion": API_VERSION, "kind": "IchorUser",
            "metadata": {"name": name, "namespace": NAMESPACE, "generation": generation},
            "spec": {"displayName": name, "roles": roles, "disabled": disabled}}),
    )
}

/// The credentials Secret with one (fake, unparsed by the graph) entry per user.
pub fn credentials(users: &[&str]) -> Object {
    let entries: Vec<(String, Vec<u8>)> = users
        .iter()
        .map(|u| {
            let entry = format!(
                "{{\"v\":1,\"hash\":\"$argon2id$v=19$m=65536,t=3,p=4$fake-{u}\",\"notBefore\":\"2027-01-01T00:00:00Z\",\"mustChange\":false}}"
            );
            ((*u).to_owned(), entry.into_bytes())
        })
        .collect();
    let refs: Vec<(&str, &[u8])> = entries.iter().map(|(k, v)| (k.as_str(), v.as_slice())).collect();
    secret(CREDENTIALS_SECRET_NAME, &refs, "Opaque")
}

/// `user`'s own credentials Secret of the credentials namespace as the controller's metadata
/// watch delivers it: name, namespace, `uid` and the user label, no type and no data.
pub fn per_user_credentials(user: &str, uid: &str) -> Object {
    let name = user_credentials_secret(user);
    Object::new(
        "Secret",
        CREDENTIALS_NAMESPACE,
        name.clone(),
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": CREDENTIALS_NAMESPACE, "uid": uid,
                "labels": {USER_LABEL: user}}}),
    )
}

/// The deletion event of an object.
pub fn deleted(o: &Object) -> Event {
    Event::Deleted(ObjectKey::new(
        o.kind.clone(),
        o.namespace.clone(),
        o.name.clone(),
    ))
}

/// An Ichor CA issued with the simulation's fixed RSA key (test material), valid from
/// 2026-01-01 to 2036-01-01.
///
/// # Errors
/// The certificate could not be issued (a bug of the performer).
pub fn ca() -> Result<IssuedPair, PerformError> {
    perform::issue_ca(
        &IssueCaRequest {
            common_name: ichor_renderers::trust::tls::CA_COMMON_NAME.into(),
            not_before: jiff::Timestamp::constant(1_767_225_600, 0),
            not_after: jiff::Timestamp::constant(2_082_758_400, 0),
            reason: "test".into(),
            replaces: None,
        },
        &mut SimKeyMaterial,
    )
}
