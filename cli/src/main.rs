//! `ichor`: the command-line tool of Ichor identity. This executable answers `ichor auth token`
//! from a fresh cached login and runs `ichor-full` for everything else (see
//! `ichor_cli::launcher`).
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    ichor_cli::launcher::main()
}
