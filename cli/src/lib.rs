//! The `ichor` command: argument parsing and the commands, each a small module that calls the
//! pure renderers and prints.
//!
//! Conventions: stdout carries only the command's result (so it can be piped); diagnostics and
//! errors go to stderr; exit code 0 is success, 1 is "the input is invalid" or a failed action,
//! 2 is a usage error (clap).
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

pub mod api_client;
pub mod commands;
pub mod launcher;
pub mod local;
pub mod terminal;

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
    /// Manage Ichor's users (through ichor-ui's UserService at --issuer).
    #[command(
        subcommand,
        after_help = "\
Every command except `create --bootstrap` signs in with your cached ichor-ui login; create it with
`ichor auth login --issuer <url> --audience ichor-ui`.

Examples:
  ichor user list --issuer https://ichor.example.com
  ichor user create alice --role operator --generate --issuer https://ichor.example.com
  ichor user update alice --add-role admin --issuer https://ichor.example.com
  ichor user delete alice --yes --issuer https://ichor.example.com
  ichor user create admin --role admin --generate --bootstrap"
    )]
    User(commands::user::UserCommand),
    /// Turn Ichor users on for a cluster: credentials namespace, first admin, issuer, issuer trust.
    #[command(after_help = "\
Uses your own kubeconfig and helm v3.10+, on an installed Ichor chart. First it checks, writing
nothing: the TalosCluster exists; the chart's deployed Helm release in ichor-system (--release,
or the only one) either runs the issuer at --ui-url already or not at all (another URL is
refused: changing it invalidates every token); helm runs. Then, in order: creates the
namespace ichor-credentials (one credentials Secret per user; no other Secret is created, an
existing ichor-user-credentials of an earlier release is kept) if absent, creates the first
administrator with a generated password (printed once to stderr, before any later step can
fail; it must be changed at the first sign-in), runs `helm upgrade <release> <its own chart> --reuse-values` with
ichorUI.users.enabled=true and ichorUI.users.externalURL=<url> (and the cluster added to
controller.rollout.clusters when that list lacks it, so the controller rolls it out), then sets
spec.authentication.ichor on the TalosCluster, and creates the Secret <cluster>-talosconfig the
rollout reads from --talosconfig and --kube-ca when it is missing (an existing one is kept). Of
the talosconfig it stores only the cluster's context (named like --cluster, or --talos-context),
of the CA file only its certificates. --no-rollout leaves controller.rollout.clusters as it is
and creates no such Secret, for a site that rolls the control planes out another way. A second
run changes nothing. It prints the next commands on stdout: itself with --talosconfig and
--kube-ca while <cluster>-talosconfig is missing, then the `ichor config apply` one that rolls
the change out.

Examples:
  ichor init --ui-url https://ichor.example.com --cluster prod
  ichor init --ui-url https://ichor.example.com --cluster prod \\
      --talosconfig ./talosconfig --kube-ca ./kube-ca.crt
  ichor init --ui-url https://ichor.example.com --cluster prod \\
      --talosconfig ~/.talos/config --talos-context prod-admin --kube-ca ./kube-ca.crt
  ichor init --ui-url https://ichor.example.com --cluster prod --no-rollout
  ichor init --ui-url https://ichor.example.com --cluster prod --admin-user root
  ichor init --ui-url https://ichor.example.com --cluster prod --release ichor --helm /opt/helm")]
    Init(commands::init::InitArgs),
    /// Run the whole identity system on this machine: issuer, API and graph over a local
    /// directory of manifests, on 127.0.0.1.
    Dev(commands::dev::DevArgs),
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
        Command::User(cmd) => commands::user::run(cmd, cli.output),
        Command::Init(args) => commands::init::run(args),
        Command::Dev(args) => commands::dev::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // An error may quote a server's words: no control character reaches the terminal.
            eprintln!(
                "error: {}",
                terminal::escape_controls_but_newlines(&format!("{e:#}"))
            );
            ExitCode::FAILURE
        }
    }
}
