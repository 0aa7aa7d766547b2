//! Structured authentication for the kube-apiserver: the typed `AuthenticationConfiguration`,
//! the kube-apiserver's own validation of it as pure code, the builder from
//! `TalosCluster.spec.authentication` and the Talos `KubeAuthenticationConfig` document
//! (the seed's `pkg/render/authentication.go` plus `ValidateAuthenticationConfiguration`).
//!
//! Talos does not validate this document and an invalid one crash-loops every kube-apiserver,
//! so [`render`] validates before anything leaves it; `ichor authn validate FILE` uses
//! [`model::parse`] and [`validate::validate`] directly.
//!
//! # Caveats
//! CEL is not compiled (see [`cel`]); Go's `net/url` and `strconv.Quote` are emulated (see
//! [`gourl`] and [`goquote`] for where they only approximate). Rules that depend on disabled
//! feature gates (V-E1, V-N2) are not emitted: the gates are on by default (locked on for
//! `AnonymousAuthConfigurableEndpoints` since 1.34).

pub mod build;
pub mod cel;
pub mod celcheck;
pub mod celparse;
pub mod field;
pub mod goquote;
pub mod gourl;
pub mod goyaml;
pub mod model;
pub mod prefix;
pub mod render;
pub mod second_factor;
pub mod talos;
pub mod validate;

#[cfg(test)]
mod tests;

pub use build::{IchorTrust, build};
pub use field::{ErrorKind, FieldError, FieldValue, aggregate};
pub use model::{AuthenticationConfiguration, ParseError, parse};
pub use render::{RenderError, Rendered, render};
pub use talos::KubeAuthenticationConfig;
pub use validate::{ValidationOptions, validate};
