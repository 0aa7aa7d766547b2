//! [`Policy`]: the RBAC objects an [`super::Authorizer`] evaluates (ClusterRoles, Roles and their
//! bindings), parsed from multi-document YAML.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde::de::DeserializeOwned;

/// The built-in roles as shipped in the chart: the one source of their rules.
pub const BUILTIN_ROLES_YAML: &str = include_str!("../../../helm/ichor/files/ichor-roles.yaml");

/// The API version of every RBAC object this module reads.
pub const RBAC_API_VERSION: &str = "rbac.authorization.k8s.io/v1";

/// A set of RBAC objects.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Policy {
    /// ClusterRoles, by name.
    pub cluster_roles: Vec<ClusterRole>,
    /// ClusterRoleBindings.
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
    /// Roles (each with its namespace).
    pub roles: Vec<Role>,
    /// RoleBindings (each with its namespace).
    pub role_bindings: Vec<RoleBinding>,
}

/// A document that is not an RBAC object this module can read. Names the document (1-based) and
/// the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The document is not valid YAML or does not fit the object's schema.
    #[error("document {index}: {reason}")]
    Invalid {
        /// The 1-based position of the document.
        index: usize,
        /// What is wrong.
        reason: String,
    },
    /// The document is another API version.
    #[error("document {index}: apiVersion {found:?} is not {RBAC_API_VERSION}")]
    ApiVersion {
        /// The 1-based position of the document.
        index: usize,
        /// The version given.
        found: String,
    },
    /// The document is a kind this module does not evaluate.
    #[error(
        "document {index}: kind {found:?} is not one of ClusterRole, ClusterRoleBinding, Role, RoleBinding"
    )]
    Kind {
        /// The 1-based position of the document.
        index: usize,
        /// The kind given.
        found: String,
    },
    /// A namespaced object without `metadata.namespace`.
    #[error("document {index}: {kind} {name:?} has no metadata.namespace")]
    NoNamespace {
        /// The 1-based position of the document.
        index: usize,
        /// `Role` or `RoleBinding`.
        kind: &'static str,
        /// Its name.
        name: String,
    },
}

impl Policy {
    /// The built-in roles ([`BUILTIN_ROLES_YAML`]).
    ///
    /// # Errors
    /// Never for the shipped file (a test pins it); the error is kept so no caller panics.
    pub fn builtin() -> Result<Self, PolicyError> {
        Self::parse(BUILTIN_ROLES_YAML)
    }

    /// Parses multi-document YAML of ClusterRoles, ClusterRoleBindings, Roles and RoleBindings
    /// (empty documents are skipped; any other kind is refused).
    ///
    /// # Errors
    /// The first document that is not such an object.
    pub fn parse(yaml: &str) -> Result<Self, PolicyError> {
        let mut policy = Self::default();
        for (i, document) in serde_yaml::Deserializer::from_str(yaml).enumerate() {
            let index = i + 1;
            let invalid = |e: serde_yaml::Error| PolicyError::Invalid {
                index,
                reason: e.to_string(),
            };
            let value = serde_yaml::Value::deserialize_from(document).map_err(invalid)?;
            if value.is_null() {
                continue;
            }
            let field = |name: &str| value.get(name).and_then(serde_yaml::Value::as_str).unwrap_or("");
            let api_version = field("apiVersion").to_owned();
            if api_version != RBAC_API_VERSION {
                return Err(PolicyError::ApiVersion {
                    index,
                    found: api_version,
                });
            }
            match field("kind") {
                "ClusterRole" => policy.cluster_roles.push(object(value, index)?),
                "ClusterRoleBinding" => policy.cluster_role_bindings.push(object(value, index)?),
                "Role" => {
                    let role: Role = object(value, index)?;
                    require_namespace(index, "Role", &role.metadata)?;
                    policy.roles.push(role);
                }
                "RoleBinding" => {
                    let binding: RoleBinding = object(value, index)?;
                    require_namespace(index, "RoleBinding", &binding.metadata)?;
                    policy.role_bindings.push(binding);
                }
                other => {
                    return Err(PolicyError::Kind {
                        index,
                        found: other.to_owned(),
                    });
                }
            }
        }
        Ok(policy)
    }

    /// This policy with every object of `other` added (for example a site's own roles).
    #[must_use]
    pub fn extend(mut self, other: Policy) -> Self {
        self.cluster_roles.extend(other.cluster_roles);
        self.cluster_role_bindings.extend(other.cluster_role_bindings);
        self.roles.extend(other.roles);
        self.role_bindings.extend(other.role_bindings);
        self
    }

    /// The ClusterRole with this name.
    pub fn cluster_role(&self, name: &str) -> Option<&ClusterRole> {
        self.cluster_roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name))
    }

    /// The Role with this name in this namespace.
    pub fn role(&self, namespace: &str, name: &str) -> Option<&Role> {
        self.roles.iter().find(|r| {
            r.metadata.namespace.as_deref() == Some(namespace) && r.metadata.name.as_deref() == Some(name)
        })
    }
}

/// Helper so `serde_yaml::Value` can be read from one document of a multi-document stream.
trait DeserializeFrom: Sized {
    fn deserialize_from(document: serde_yaml::Deserializer<'_>) -> Result<Self, serde_yaml::Error>;
}

impl DeserializeFrom for serde_yaml::Value {
    fn deserialize_from(document: serde_yaml::Deserializer<'_>) -> Result<Self, serde_yaml::Error> {
        serde::Deserialize::deserialize(document)
    }
}

fn object<T: DeserializeOwned>(value: serde_yaml::Value, index: usize) -> Result<T, PolicyError> {
    serde_yaml::from_value(value).map_err(|e| PolicyError::Invalid {
        index,
        reason: e.to_string(),
    })
}

fn require_namespace(
    index: usize,
    kind: &'static str,
    metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Result<(), PolicyError> {
    match metadata.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => Ok(()),
        _ => Err(PolicyError::NoNamespace {
            index,
            kind,
            name: metadata.name.clone().unwrap_or_default(),
        }),
    }
}
