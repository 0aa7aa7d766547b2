//! The `ichor` command: argument parsing and the commands, each a small module that calls the
//! pure renderers and prints.
//!
//! Conventions: stdout carries only the command's result (so it can be piped); diagnostics and
//! errors go to stderr; exit code 0 is success, 1 is "the input is invalid" or a failed action,
//! 2 is a usage error (clap).
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

pub mod commands;
pub mod talos;

/// Ichor identity: users, sign-in, kubeconfigs and the kube-apiserver trust configuration.
#[derive(Debug, Parser)]
#[command(name = "ichor", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// Output format of commands that print objects.
    #[arg(short = 'o', long = "output", global = true, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,

    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// How a command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// For people: aligned columns or sections.
    Table,
    /// JSON, for scripts.
    Json,
    /// YAML, for scripts and manifests.
    Yaml,
}

/// The commands of `ichor`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Sign in to an Ichor issuer; the kubectl credential plugin.
    #[command(
        subcommand,
        after_help = "\
Logins are cached per issuer, client and audience in ~/.ichor/auth/ (directory 0700, files 0600).

Examples:
  ichor auth login --issuer https://ichor.example.com
  ichor auth token --issuer https://ichor.example.com
  ichor auth status -o json
  ichor auth logout --issuer https://ichor.example.com"
    )]
    Auth(commands::auth::AuthCommand),
    /// Work with kube-apiserver AuthenticationConfiguration files.
    #[command(subcommand)]
    Authn(commands::authn::AuthnCommand),
    /// Roll the rendered machine configuration out to the control planes.
    #[command(subcommand)]
    Config(commands::config::ConfigCommand),
    /// Render a directory of manifests offline.
    Render(commands::render::RenderArgs),
    /// Print a shell completion script.
    Completion(commands::completion::CompletionArgs),
}

/// Parse the process arguments and run the command.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    run(cli)
}

/// Run a parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Auth(cmd) => commands::auth::run(cmd, cli.output),
        Command::Authn(cmd) => commands::authn::run(cmd, cli.output),
        Command::Config(cmd) => commands::config::run(cmd, cli.output),
        Command::Render(args) => commands::render::run(args, cli.output),
        Command::Completion(args) => commands::completion::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
