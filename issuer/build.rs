//! Two generated files in `OUT_DIR`:
//!
//! - The `UserService` gRPC code from `proto/ichor/v1alpha1/user.proto`, with `protox` (a
//!   pure-Rust protobuf compiler, so no `protoc` binary is needed) and `tonic-prost-build`. Server
//!   and client are both generated (the CLI uses the client); neither depends on tonic's
//!   transport, so the client runs over any `tonic` channel the caller builds. Messages that carry
//!   a password get no generated `Debug` (see `src/api/proto.rs`).
//! - `ui_dist.rs`: the built web UI (`../ui/dist`, committed) as a table of
//!   `(path relative to ui/dist, include_bytes!(absolute path))` sorted by path, which
//!   `src/ui.rs` serves. Without `ui/dist` the table is empty (the UI routes then explain how to
//!   build it) and the build still succeeds.

use std::{
    error::Error,
    fmt::Write as _,
    path::{Path, PathBuf},
};

fn main() -> Result<(), Box<dyn Error>> {
    compile_proto()?;
    embed_ui()?;
    Ok(())
}

fn compile_proto() -> Result<(), Box<dyn Error>> {
    let proto = "proto/ichor/v1alpha1/user.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .build_transport(false)
        // These carry passwords or second-factor secrets: their `Debug` is written by hand (redacted) in `src/api/proto.rs`.
        .skip_debug([
            "ichor.v1alpha1.CreateUserRequest",
            "ichor.v1alpha1.CreateUserResponse",
            "ichor.v1alpha1.SetPasswordRequest",
            "ichor.v1alpha1.SetPasswordResponse",
            "ichor.v1alpha1.ChangeOwnPasswordRequest",
            "ichor.v1alpha1.BeginTotpRequest",
            "ichor.v1alpha1.BeginTotpResponse",
            "ichor.v1alpha1.ConfirmTotpRequest",
            "ichor.v1alpha1.ConfirmTotpResponse",
            "ichor.v1alpha1.BeginPasskeyRegistrationRequest",
            "ichor.v1alpha1.BeginPasskeyRegistrationResponse",
            "ichor.v1alpha1.FinishPasskeyRegistrationRequest",
            "ichor.v1alpha1.FinishPasskeyRegistrationResponse",
            "ichor.v1alpha1.RegenerateRecoveryCodesRequest",
            "ichor.v1alpha1.RegenerateRecoveryCodesResponse",
            "ichor.v1alpha1.RemoveFactorRequest",
        ])
        .compile_fds(descriptors)?;
    Ok(())
}

/// Writes `$OUT_DIR/ui_dist.rs` from the files under `../ui/dist`.
fn embed_ui() -> Result<(), Box<dyn Error>> {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let dist = manifest.join("../ui/dist");
    // A directory is scanned as a whole (a file added or removed reruns this script); a missing
    // one reruns it on every build until it exists.
    println!("cargo:rerun-if-changed={}", dist.display());
    let mut files = Vec::new();
    if dist.is_dir() {
        let dist = dist.canonicalize()?;
        walk(&dist, "", &mut files)?;
    } else {
        println!(
            "cargo:warning=ui/dist is missing: this build carries no web UI (run `npm ci && npm run build` in ui/)"
        );
    }
    files.sort();
    let mut out = String::from(
        "/// The files of the built web UI: (path relative to `ui/dist`, contents), sorted by path.\n\
         pub static FILES: &[(&str, &[u8])] = &[\n",
    );
    for (rel, abs) in &files {
        println!("cargo:rerun-if-changed={}", abs.display());
        let abs = abs
            .to_str()
            .ok_or_else(|| format!("{}: the path is not UTF-8", abs.display()))?;
        writeln!(out, "    ({rel:?}, include_bytes!({abs:?})),")?;
    }
    out.push_str("];\n");
    let target = PathBuf::from(std::env::var("OUT_DIR")?).join("ui_dist.rs");
    std::fs::write(target, out)?;
    Ok(())
}

/// Collects the regular files under `dir` (skipping hidden entries) as
/// `(path relative to ui/dist with `/` separators, absolute path)`.
fn walk(dir: &Path, prefix: &str, files: &mut Vec<(String, PathBuf)>) -> Result<(), Box<dyn Error>> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name
            .to_str()
            .ok_or_else(|| format!("{}: the file name is not UTF-8", entry.path().display()))?;
        if name.starts_with('.') {
            continue;
        }
        let rel = format!("{prefix}{name}");
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk(&entry.path(), &format!("{rel}/"), files)?;
        } else if kind.is_file() {
            files.push((rel, entry.path()));
        }
    }
    Ok(())
}
