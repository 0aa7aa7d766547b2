//! keys (in progress).
