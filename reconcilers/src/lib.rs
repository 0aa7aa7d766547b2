//! reconcilers
#![forbid(unsafe_code)]
