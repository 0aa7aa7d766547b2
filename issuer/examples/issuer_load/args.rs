//! The command line: one subcommand per load, setup step or server (what each does is in the
//! crate doc). Kept apart so that `main` is only the dispatch.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(about = "Load generator for hack/bench/issuer.sh")]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Writes the files an issuer needs for the benchmark.
    Setup {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long, default_value_t = 100)]
        users: usize,
        /// Refresh families seeded per user (ichor-cli, ichor-kube, generation 1), as if each
        /// had signed in that many times: the credentials grow as in use, without the sign-ins.
        #[arg(long, default_value_t = 0)]
        families: usize,
        /// Users (from `bench-0`) who have an authenticator app as a second factor.
        #[arg(long, default_value_t = 0)]
        factors: usize,
    },
    /// Refresh-grant throughput and latency.
    Refresh {
        /// An issuer URL (once per issuer; each client's requests alternate between them).
        #[arg(long, required = true)]
        issuer: Vec<String>,
        #[arg(long)]
        ca: PathBuf,
        #[arg(long, default_value_t = 64)]
        clients: usize,
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Rotate the families seeded by `setup --families` in this directory (all of them, dealt
        /// to the clients in turn; tokens minted with its keys.json for the first issuer URL)
        /// instead of signing in.
        #[arg(long)]
        seeded: Option<PathBuf>,
    },
    /// RSA-3072 signatures/s of the issuer's own signer on this many threads, flat out.
    Sign {
        #[arg(long, default_value_t = 2)]
        threads: usize,
        #[arg(long, default_value_t = 10)]
        seconds: u64,
    },
    /// Starts a real control plane holding the users of `setup` (until SIGTERM).
    ControlPlane {
        #[arg(long)]
        dir: PathBuf,
        /// Where the credentials go: `per-user` (one Secret per user in `ichor-credentials`, what
        /// a fresh installation has) or `legacy` (the one Secret `ichor-user-credentials` of
        /// installations made before that layout).
        #[arg(long, value_enum, default_value = "per-user")]
        layout: Layout,
    },
    /// Serves the issuer in this process on an in-memory store (until killed).
    ServeMemory {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        port: u16,
    },
    /// Mixed paced workload against several issuers, then the same with a login flood.
    Mixed {
        /// An issuer URL (give it once per issuer; requests alternate between them).
        #[arg(long, required = true)]
        issuer: Vec<String>,
        #[arg(long)]
        ca: PathBuf,
        /// An issuer process id whose VmHWM the report shows (once per issuer).
        #[arg(long)]
        pid: Vec<u32>,
        /// Seconds per phase (sustained, then flood).
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Concurrent sign-in loops during the flood.
        #[arg(long, default_value_t = 200)]
        flood: usize,
    },
    /// One user with many sessions beside as many users with one each, flat out.
    BusyUser {
        /// An issuer URL (once per issuer; each session's requests alternate between them).
        #[arg(long, required = true)]
        issuer: Vec<String>,
        #[arg(long)]
        ca: PathBuf,
        /// Sessions of the busy user, and users with one session.
        #[arg(long, default_value_t = 32)]
        sessions: usize,
        /// The first `bench-<n>` user used (each run needs `sessions + 1` unused users).
        #[arg(long, default_value_t = 0)]
        first_user: usize,
        #[arg(long, default_value_t = 10)]
        seconds: u64,
    },
    /// Many people behind one address: paced refreshes of many families, then garbage.
    Nat {
        #[arg(long)]
        issuer: String,
        #[arg(long)]
        ca: PathBuf,
        /// Users signed in from the one address, one refresh family each.
        #[arg(long, default_value_t = 500)]
        users: usize,
        /// Seconds between two refreshes of one family.
        #[arg(long, default_value_t = 10)]
        period: u64,
        /// Seconds of paced refreshes.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Garbage refresh tokens sent afterwards.
        #[arg(long, default_value_t = 100)]
        garbage: usize,
        /// Wrong passwords sent afterwards (each for another name).
        #[arg(long, default_value_t = 20)]
        wrong_passwords: usize,
    },
    /// Paced full sign-ins of distinct users, with or without the second step.
    SignIns {
        #[arg(long)]
        issuer: String,
        #[arg(long)]
        ca: PathBuf,
        /// The first `bench-<n>` user signed in; each sign-in takes the next one.
        #[arg(long, default_value_t = 0)]
        first_user: usize,
        /// Sign-ins started per second.
        #[arg(long, default_value_t = 5)]
        rate: u32,
        /// Seconds of sign-ins (`rate × seconds` users are used, each once).
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// The users have the authenticator app of `setup --factors`: answer the second step.
        #[arg(long)]
        factor: bool,
    },
    /// A flood of concurrent sign-ins.
    Logins {
        #[arg(long)]
        issuer: String,
        #[arg(long)]
        ca: PathBuf,
        #[arg(long, default_value_t = 100)]
        count: usize,
    },
}

/// The credentials layout `control-plane` seeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Layout {
    /// One Secret per user in `ichor-credentials`.
    PerUser,
    /// One key per user in the Secret `ichor-user-credentials`.
    Legacy,
}
