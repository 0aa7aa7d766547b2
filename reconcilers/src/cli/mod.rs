//! The `ichor-controller` command line: `run` (the in-cluster loop, [`crate::run`]), `replay`
//! (the decisions of a recorded journal, offline, [`replay`]) and `gen-journal` (a generated
//! journal for benchmarks, [`gen_journal`]). The binary only calls [`main`].

pub mod gen_journal;
pub mod replay;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::run::{RunArgs, RunError};

// The command line (its doc comments are the help text: none on the struct and the enum).
#[derive(Debug, Parser)]
#[command(name = env!("CARGO_PKG_NAME"), version, about = "The Ichor identity controller")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the controller in a cluster: watch the inputs, evaluate the identity graph, apply
    /// (the Lease leader only), serve /metrics, /healthz and /readyz.
    Run(Box<RunArgs>),
    /// Replay a journal offline and print every decision with its reason.
    Replay {
        /// The journal (JSON lines).
        journal: PathBuf,
        /// Print only the summary line (for large journals).
        #[arg(long)]
        summary: bool,
        /// Also print, per node, the instances recomputed and the time spent (to stderr).
        #[arg(long)]
        profile: bool,
    },
    /// Generate a journal of a large installation under churn (for benchmarks).
    GenJournal {
        /// IchorUsers.
        #[arg(long, default_value_t = 1000)]
        users: usize,
        /// Ichor-issuer TalosClusters.
        #[arg(long, default_value_t = 50)]
        clusters: usize,
        /// Control-plane TalosMachines.
        #[arg(long, default_value_t = 150)]
        machines: usize,
        /// Events in the journal.
        #[arg(long, default_value_t = 100_000)]
        events: u64,
        /// The churn's seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Where to write the journal.
        out: PathBuf,
    },
}

/// Why a subcommand failed (printed as `error: ` and the chain of causes).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// `run` failed.
    #[error(transparent)]
    Run(#[from] RunError),
    /// `replay` could not start.
    #[error(transparent)]
    Replay(#[from] replay::ReplayError),
    /// `gen-journal` failed.
    #[error(transparent)]
    GenJournal(#[from] gen_journal::GenJournalError),
}

/// Runs a parsed command line. A replay that stops on a bad journal line is not an error here
/// (its partial report is printed and the exit code is a failure).
fn dispatch(cli: Cli) -> Result<ExitCode, CliError> {
    match cli.command {
        Command::Run(args) => {
            crate::run::main(*args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Replay {
            journal,
            summary,
            profile,
        } => Ok(replay::run(&journal, summary, profile)?),
        Command::GenJournal {
            users,
            clusters,
            machines,
            events,
            seed,
            out,
        } => {
            let workload = gen_journal::Workload {
                users,
                clusters,
                machines,
                events,
                seed,
            };
            gen_journal::write(&out, workload)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `ichor-controller`: parses the command line, runs it, and prints an error with its causes.
pub fn main() -> ExitCode {
    dispatch(Cli::parse()).unwrap_or_else(|e| {
        eprintln!("error: {}", chain(&e));
        ExitCode::FAILURE
    })
}

/// An error and its causes, joined by `: ` (as `anyhow` prints `{:#}`).
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
