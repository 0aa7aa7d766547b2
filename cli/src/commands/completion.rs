//! `ichor completion SHELL`.

use std::process::ExitCode;

use clap::{Args, CommandFactory};
use clap_complete::Shell;

/// Arguments of `ichor completion`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  ichor completion bash > /etc/bash_completion.d/ichor\n  ichor completion zsh > \"${fpath[1]}/_ichor\"\n  ichor completion fish > ~/.config/fish/completions/ichor.fish")]
pub struct CompletionArgs {
    /// The shell to write the script for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Print the completion script to stdout.
pub fn run(args: CompletionArgs) -> anyhow::Result<ExitCode> {
    let mut cmd = crate::Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "ichor", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}
