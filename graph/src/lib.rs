//! graph
#![forbid(unsafe_code)]
