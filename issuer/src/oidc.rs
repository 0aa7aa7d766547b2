//! oidc (in progress).
