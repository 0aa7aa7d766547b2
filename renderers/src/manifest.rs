//! Reading manifests from files (in progress).
