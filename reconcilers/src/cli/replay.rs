//! `ichor-controller replay`: the decisions of a recorded journal, offline, printed with their
//! reasons (or only the summary line), the throughput on stderr.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use ichor_controller_core::identity::{Controller, replay_with};
use ichor_graph::{BuildError, JournalReader};

/// Why a replay could not start.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The journal file could not be opened.
    #[error("cannot open journal {}", .path.display())]
    Open {
        /// The journal.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The identity graph did not build (a defect of this build, not of the journal).
    #[error("the identity graph did not build")]
    Graph(#[source] BuildError),
}

/// Replays `journal`: every decision to stdout (only the summary line with `summary`), the
/// per-node profile to stderr with `profile`, then the throughput to stderr. A journal that
/// stops being readable part-way prints the decisions up to there and the error, and fails.
///
/// # Errors
/// The journal could not be opened, or the graph did not build.
pub fn run(journal: &Path, summary: bool, profile: bool) -> Result<ExitCode, ReplayError> {
    let file = File::open(journal).map_err(|source| ReplayError::Open {
        path: journal.to_owned(),
        source,
    })?;
    let mut controller = Controller::new().map_err(ReplayError::Graph)?;
    let started = Instant::now();
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

/// Prints to stdout; a closed pipe (`| head`) ends the output quietly.
fn print_out(text: &str) {
    use std::io::Write as _;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}
