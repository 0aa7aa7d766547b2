//! tokens (in progress).
