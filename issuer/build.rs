//! Generates the `UserService` gRPC code from `proto/ichor/v1alpha1/user.proto` with `protox`
//! (a pure-Rust protobuf compiler, so no `protoc` binary is needed) and `tonic-prost-build`.
//! Server and client are both generated (the CLI uses the client); neither depends on tonic's
//! transport, so the client runs over any `tonic` channel the caller builds. Messages that
//! carry a password get no generated `Debug` (see `src/api/proto.rs`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/ichor/v1alpha1/user.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .build_transport(false)
        // These carry passwords: their `Debug` is written by hand (redacted) in `src/api/proto.rs`.
        .skip_debug([
            "ichor.v1alpha1.CreateUserRequest",
            "ichor.v1alpha1.CreateUserResponse",
            "ichor.v1alpha1.SetPasswordRequest",
            "ichor.v1alpha1.SetPasswordResponse",
            "ichor.v1alpha1.ChangeOwnPasswordRequest",
        ])
        .compile_fds(descriptors)?;
    Ok(())
}
