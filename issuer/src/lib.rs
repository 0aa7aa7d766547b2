//! issuer
#![forbid(unsafe_code)]
