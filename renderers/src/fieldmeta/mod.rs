//! fieldmeta (in progress).
