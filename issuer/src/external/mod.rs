//! The site's own OpenID Connect provider beside Ichor's issuer: people who sign in there keep
//! using Ichor's API, the UI and `kubectl` after Ichor's own users are turned on.
//!
//! - [`provider`]: the validated configuration ([`ExternalProvider`]): issuer URL, client id, CA,
//!   the claims and prefixes that make a Kubernetes identity of a token;
//! - [`identity`]: the pure mapping of a verified token's claims to that identity
//!   ([`ExternalIdentity`]), prefixes applied and `system:` names refused;
//! - [`verifier`]: [`ExternalVerifier`], which verifies an ID token against the provider's
//!   discovery document and JWKS with the `openidconnect` crate (signature, `iss`, `aud` = the
//!   client id, `exp`), re-reading the JWKS for a key it does not know, at most every
//!   [`verifier::JWKS_REFETCH_INTERVAL`];
//! - [`trust`]: whether the kube-apiserver trusts the provider as the API maps it
//!   ([`trust::TrustCheck`], followed from the `TalosCluster`).
//!
//! An external identity has no Ichor roles: Kubernetes RBAC alone decides what it may do, and
//! the API impersonates it as `<prefix><name>` with its prefixed groups.

pub mod identity;
pub mod provider;
pub mod trust;
pub mod verifier;

pub use identity::{ExternalIdentity, IdentityError};
pub use provider::{ExternalProvider, ProviderError};
pub use verifier::{ExternalVerifier, VerifierError};
