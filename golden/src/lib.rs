//! golden
#![forbid(unsafe_code)]
