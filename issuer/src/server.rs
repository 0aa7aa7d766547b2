//! server (in progress).
