//! The `ichor-issuer` command line (in progress).

/// Parse flags and run the issuer.
pub fn main() -> std::process::ExitCode {
    eprintln!("ichor-issuer: not built yet");
    std::process::ExitCode::FAILURE
}
