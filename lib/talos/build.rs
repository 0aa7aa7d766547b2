//! Generates the Talos API clients (and servers, which the tests use to fake a node) from the
//! hand-written subsets in `proto/` with `protox` (a pure-Rust protobuf compiler, so no `protoc`
//! binary is needed) and `tonic-prost-build`: the machine API (`proto/talos/machine.proto`),
//! the COSI state's `Get` (`proto/cosi/v1alpha1/`) and the machine configuration resource's spec
//! (`proto/resource/config/config.proto`). The generated clients do not depend on tonic's
//! transport; `src/client.rs` builds the TLS channel.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "proto/talos/machine.proto",
        "proto/cosi/v1alpha1/resource.proto",
        "proto/cosi/v1alpha1/state.proto",
        "proto/resource/config/config.proto",
    ];
    for proto in protos {
        println!("cargo:rerun-if-changed={proto}");
    }
    let descriptors = protox::compile(protos, ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .build_transport(false)
        .compile_fds(descriptors)?;
    Ok(())
}
