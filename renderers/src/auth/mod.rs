//! auth (in progress).
