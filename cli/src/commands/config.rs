//! `ichor config …`: the rendered machine configuration on the nodes of a cluster.

pub mod apply;
pub mod operation;
pub mod store;

use std::process::ExitCode;

use clap::Subcommand;

use crate::OutputFormat;

/// The `ichor config` subcommands.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Roll the rendered KubeAuthenticationConfig out: restarts the Kubernetes API server on each
    /// control plane, one at a time; no reboot.
    Apply(apply::ApplyArgs),
}

/// Run an `ichor config` subcommand.
pub fn run(cmd: ConfigCommand, output: OutputFormat) -> anyhow::Result<ExitCode> {
    match cmd {
        ConfigCommand::Apply(args) => apply::run(args, output),
    }
}
