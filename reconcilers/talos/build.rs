//! Generates the Talos machine API client (and a server, which the tests use to fake a node)
//! from the hand-written subset in `proto/talos/machine.proto` with `protox` (a pure-Rust
//! protobuf compiler, so no `protoc` binary is needed) and `tonic-prost-build`. The generated
//! client does not depend on tonic's transport; `src/client.rs` builds the TLS channel.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/talos/machine.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .build_transport(false)
        .compile_fds(descriptors)?;
    Ok(())
}
