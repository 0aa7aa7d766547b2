//! One module per command.

pub mod authn;
pub mod completion;
pub mod dev;
pub mod render;
