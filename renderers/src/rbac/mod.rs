//! Kubernetes RBAC, evaluated in process: the built-in Ichor roles and an authorizer with the
//! semantics of the kube-apiserver's RBAC authorizer.
//!
//! - [`policy`]: the parsed RBAC objects ([`Policy`]); [`Policy::builtin`] is the one source of
//!   the role rules, `helm/ichor/files/ichor-roles.yaml`, compiled in, which the chart ships too;
//! - [`authorizer`]: [`Authorizer::allows`] on a [`Subject`] and the request [`Attributes`].
//!
//! The embedded mode (`ichor dev`) has no kube-apiserver to ask, so the `UserService` asks this
//! authorizer with the same attributes it would send in a `SubjectAccessReview`, and gets the
//! answer Kubernetes would give for the same objects.

pub mod authorizer;
pub mod policy;

pub use authorizer::{Attributes, Authorizer, Subject};
pub use policy::{BUILTIN_ROLES_YAML, Policy, PolicyError};

#[cfg(test)]
mod tests;
