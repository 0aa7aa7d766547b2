//! `ichor-issuer`: the Ichor OpenID Connect issuer. The work is in the `ichor_issuer` library.
#![forbid(unsafe_code)]

/// The allocator: a token grant allocates and frees many small strings and JSON values on two
/// worker threads and the commit thread, which mimalloc serves with less CPU than the system
/// allocator (whose per-thread arenas also grow and trim their heaps under this load).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    ichor_issuer::cli::main()
}
