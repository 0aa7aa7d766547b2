//! `IchorUser`: a person who signs in to Ichor. GitOps-friendly: no secret in it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// A person who signs in to Ichor. The object name is the identity: it becomes the ID token's
/// `sub` and the Kubernetes user `ichor:<name>`.
///
/// # Guarantees
/// The object never holds a password, a hash, a token or a session, so it can live in Git. The
/// password hash is kept apart, in one key of the Secret `ichor-user-credentials`.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "ichor.maesh.dev",
    version = "v1alpha1",
    kind = "IchorUser",
    plural = "ichorusers",
    singular = "ichoruser",
    shortname = "iu",
    namespaced,
    status = "IchorUserStatus",
    derive = "PartialEq",
    doc = "A person who signs in to Ichor. The name is the identity (sub, Kubernetes user ichor:<name>). Never holds a secret.",
    printcolumn(name = "Display name", type_ = "string", json_path = ".spec.displayName"),
    printcolumn(name = "Roles", type_ = "string", json_path = ".spec.roles"),
    printcolumn(name = "Disabled", type_ = "boolean", json_path = ".spec.disabled"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    validation = Rule::new("size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')")
        .message("metadata.name must be a DNS label: at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit")
        .field_path(".metadata.name"),
)]
#[serde(rename_all = "camelCase")]
pub struct IchorUserSpec {
    /// The name shown in the UI. Informational; no control characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    #[x_kube(
        validation = Rule::new(crate::auth::text::NO_CONTROL_CHARACTERS_CEL)
            .message("must not contain control characters"),
    )]
    pub display_name: Option<String>,

    /// The user's e-mail address. Informational: never used to sign in. No control characters
    /// and no spaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 254))]
    #[x_kube(
        validation = Rule::new(crate::auth::text::NO_CONTROL_CHARACTERS_OR_SPACES_CEL)
            .message("must not contain control characters or spaces"),
    )]
    pub email: Option<String>,

    /// The roles (Kubernetes groups `ichor:<role>`) the user is in. Built in: `viewer`,
    /// `operator`, `admin`; a custom role is a ClusterRole bound to group `ichor:<role>`.
    #[serde(default)]
    #[schemars(
        length(max = 16),
        inner(regex(pattern = "^[a-z][a-z0-9-]{0,30}$"), length(max = 31)),
        extend("x-kubernetes-list-type" = "set")
    )]
    #[x_kube(
        validation = Rule::new("self.all(r, r.matches('^[a-z][a-z0-9-]{0,30}$'))")
            .message("each role must match ^[a-z][a-z0-9-]{0,30}$"),
        validation = Rule::new("size(self) <= 16").message("at most 16 roles"),
    )]
    pub roles: Vec<String>,

    /// A disabled user cannot sign in, and every refresh is refused.
    #[serde(default)]
    pub disabled: bool,
}

/// What the controller observed about a user. Written by the controller only.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IchorUserStatus {
    /// `Ready` (the user can sign in) and `PasswordSet` (a password hash exists); `Unknown`,
    /// reason `CredentialsNotListed`, where they depend on a password the controller cannot see
    /// (the users' credentials Secrets not listed, and this user's not seen).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The generation the conditions were computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The `IchorUser` CRD as installed: the derived one with `metadata.name` declared in its
/// schema, so that the name rule reports its field (`fieldPath: .metadata.name`; the apiserver
/// takes no `fieldPath` outside the declared schema, and without one a `kubectl` user reads
/// `<nil>: Invalid value`). A CRD may declare `metadata.name` and `metadata.generateName` at
/// its root and nothing else of `metadata`.
pub fn ichor_user_crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
    use kube::CustomResourceExt as _;
    let mut crd = IchorUser::crd();
    for version in &mut crd.spec.versions {
        if let Some(root) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            let name = JSONSchemaProps {
                type_: Some("string".into()),
                ..JSONSchemaProps::default()
            };
            let metadata = JSONSchemaProps {
                type_: Some("object".into()),
                properties: Some(std::iter::once(("name".to_owned(), name)).collect()),
                ..JSONSchemaProps::default()
            };
            root.properties
                .get_or_insert_with(Default::default)
                .insert("metadata".into(), metadata);
        }
    }
    crd
}
