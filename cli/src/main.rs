//! `ichor`: the command-line tool of Ichor identity. The work is in the `ichor_cli` library.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    ichor_cli::main()
}
