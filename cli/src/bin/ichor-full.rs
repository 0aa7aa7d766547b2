//! `ichor-full`: every command of `ichor`, which `ichor` runs for all but a cached
//! `ichor auth token`. The work is in the `ichor_cli` library.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    ichor_cli::main()
}
