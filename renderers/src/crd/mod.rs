//! crd (in progress).
