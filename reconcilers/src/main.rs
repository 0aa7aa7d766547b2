//! `ichor-controller`: the Ichor identity controller: `run` (the in-cluster loop), `replay` (the
//! decisions of a recorded journal, offline) and `gen-journal` (a generated journal for
//! benchmarks).

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use ichor_graph::JournalReader;
use ichor_reconcile::identity::{Controller, replay_with};
use ichor_reconcile::sim::Sim;
use ichor_reconcile::sim::workload::{Workload, generate};

/// The allocator: the graph allocates and frees many small JSON values per event, which
/// mimalloc serves several times faster than the system allocator (replay throughput).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "ichor-controller", version, about = "The Ichor identity controller")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the controller in a cluster: watch the inputs, evaluate the identity graph, apply
    /// (the Lease leader only), serve /metrics, /healthz and /readyz.
    Run(Box<ichor_reconcilers::run::RunArgs>),
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

/// Prints to stdout; a closed pipe (`| head`) ends the output quietly.
fn print_out(text: &str) {
    use std::io::Write as _;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

fn run_replay(journal: &PathBuf, summary: bool, profile: bool) -> anyhow::Result<ExitCode> {
    let file = File::open(journal).with_context(|| format!("cannot open journal {}", journal.display()))?;
    let mut controller = Controller::new().context("the identity graph did not build")?;
    let started = std::time::Instant::now();
    match replay_with(
        JournalReader::new(BufReader::with_capacity(1 << 20, file)),
        &mut controller,
        !summary,
    ) {
        Ok(report) => {
            let secs = started.elapsed().as_secs_f64();
            let text = if summary {
                format!("{}\n", report.summary())
            } else {
                report.to_string()
            };
            print_out(&text);
            if profile {
                eprint!("{}", report.profile());
            }
            eprintln!(
                "replayed {} events in {secs:.3} s ({:.0} events/s)",
                report.events,
                report.events as f64 / secs.max(1e-9)
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            if !summary {
                print_out(&e.partial.to_string());
            }
            eprintln!("error: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => ichor_reconcilers::run::main(*args)
            .map(|()| ExitCode::SUCCESS)
            .map_err(anyhow::Error::from),
        Command::Replay {
            journal,
            summary,
            profile,
        } => run_replay(&journal, summary, profile),
        Command::GenJournal {
            users,
            clusters,
            machines,
            events,
            seed,
            out,
        } => (|| {
            let file = File::create(&out).with_context(|| format!("cannot create {}", out.display()))?;
            let mut sim = Sim::new(BufWriter::new(file))?;
            sim.record = false;
            let w = Workload {
                users,
                clusters,
                machines,
                events,
                seed,
            };
            generate(&mut sim, w)?;
            eprintln!("wrote {}", out.display());
            Ok(ExitCode::SUCCESS)
        })(),
    };
    result.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        ExitCode::FAILURE
    })
}
