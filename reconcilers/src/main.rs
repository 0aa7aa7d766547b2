//! `ichor-controller`: the Ichor identity controller. The work is in the `ichor_controller`
//! library (`ichor_controller::cli`).
#![forbid(unsafe_code)]

/// The allocator: the graph allocates and frees many small JSON values per event, which
/// mimalloc serves several times faster than the system allocator (replay throughput).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    ichor_controller::cli::main()
}
