//! One module per command.

pub mod completion;
