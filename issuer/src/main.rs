//! `ichor-issuer`: the Ichor OpenID Connect issuer. The work is in the `ichor_issuer` library.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    ichor_issuer::cli::main()
}
