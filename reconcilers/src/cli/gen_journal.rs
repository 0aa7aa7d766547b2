//! `ichor-controller gen-journal`: a journal of a large installation under churn, for the replay
//! benchmarks (`hack/bench/identity.sh`). The generator is the simulation of
//! `ichor_controller_core::sim`, test material that the shipped controller does not link: it is
//! here only in a build with the `sim` feature (`cargo build -p ichor-controller --features sim`);
//! without it the subcommand says so and fails.

use std::path::{Path, PathBuf};

/// The installation and churn to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workload {
    /// IchorUsers.
    pub users: usize,
    /// Ichor-issuer TalosClusters.
    pub clusters: usize,
    /// Control-plane TalosMachines.
    pub machines: usize,
    /// Events in the journal.
    pub events: u64,
    /// The churn's seed.
    pub seed: u64,
}

/// Why no journal was generated.
#[derive(Debug, thiserror::Error)]
pub enum GenJournalError {
    /// The output file could not be created.
    #[error("cannot create {}", .path.display())]
    Create {
        /// The output file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The simulation failed (the graph, an effect or the journal's writer).
    #[cfg(feature = "sim")]
    #[error(transparent)]
    Sim(#[from] ichor_controller_core::sim::SimError),
    /// This build has no generator.
    #[error(
        "this ichor-controller is built without the journal generator (test material, not shipped); \
         build one with `cargo build --release -p ichor-controller --features sim`"
    )]
    NotBuilt,
}

/// Writes the journal of `workload` to `out` (unredacted: simulated material only) and says so
/// on stderr.
///
/// # Errors
/// `out` could not be created or written, or the simulation failed.
#[cfg(feature = "sim")]
pub fn write(out: &Path, workload: Workload) -> Result<(), GenJournalError> {
    use std::fs::File;
    use std::io::BufWriter;

    use ichor_controller_core::sim::Sim;
    use ichor_controller_core::sim::workload::{self, generate};

    let file = File::create(out).map_err(|source| GenJournalError::Create {
        path: out.to_owned(),
        source,
    })?;
    let mut sim = Sim::new(BufWriter::new(file))?;
    sim.record = false;
    let Workload {
        users,
        clusters,
        machines,
        events,
        seed,
    } = workload;
    generate(
        &mut sim,
        workload::Workload {
            users,
            clusters,
            machines,
            events,
            seed,
        },
    )?;
    eprintln!("wrote {}", out.display());
    Ok(())
}

/// Without the `sim` feature: fails with [`GenJournalError::NotBuilt`], creating nothing.
///
/// # Errors
/// Always.
#[cfg(not(feature = "sim"))]
pub fn write(out: &Path, workload: Workload) -> Result<(), GenJournalError> {
    let _ = (out, workload);
    Err(GenJournalError::NotBuilt)
}
