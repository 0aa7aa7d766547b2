//! `ichor completion SHELL`.

use std::process::ExitCode;

use clap::{Args, CommandFactory};
use clap_complete::Shell;

/// Arguments of `ichor completion`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  ichor completion bash > /etc/bash_completion.d/ichor\n  ichor completion zsh > \"${fpath[1]}/_ichor\"\n  ichor completion fish > ~/.config/fish/completions/ichor.fish"
)]
pub struct CompletionArgs {
    /// The shell to write the script for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Print the completion script to stdout.
pub fn run(args: CompletionArgs) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    let mut cmd = crate::Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "ichor", &mut script);
    match std::io::stdout().write_all(&script) {
        // A closed pipe (`ichor completion bash | head`) is the reader's choice, not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        other => other.map(|()| ExitCode::SUCCESS).map_err(Into::into),
    }
}
