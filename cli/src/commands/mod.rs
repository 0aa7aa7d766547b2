//! One module per command.

pub mod auth;
pub mod authn;
pub mod completion;
pub mod config;
pub mod dev;
pub mod init;
pub mod render;
pub mod user;
