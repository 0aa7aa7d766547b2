//! Writes the CRD manifests generated from the Rust types (`--check` only compares).
//!
//! ```text
//! cargo run -p ichor-renderers --bin crdgen            # write them, from the repository root
//! cargo run -p ichor-renderers --bin crdgen -- --check # exit 1 when a file is out of date
//! ```
#![forbid(unsafe_code)]

use std::{path::Path, process::ExitCode};

fn main() -> ExitCode {
    let check = std::env::args().skip(1).any(|a| a == "--check");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let files = match ichor_renderers::crd::crd_files() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("crdgen: cannot render the CRDs: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut stale = 0;
    for f in files {
        let path = root.join(&f.path);
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current == f.yaml {
            continue;
        }
        if check {
            eprintln!("crdgen: {} is out of date", f.path);
            stale += 1;
            continue;
        }
        if let Some(dir) = path.parent()
            && let Err(e) = std::fs::create_dir_all(dir)
        {
            eprintln!("crdgen: cannot create {}: {e}", dir.display());
            return ExitCode::FAILURE;
        }
        if let Err(e) = std::fs::write(&path, &f.yaml) {
            eprintln!("crdgen: cannot write {}: {e}", f.path);
            return ExitCode::FAILURE;
        }
        eprintln!("crdgen: wrote {}", f.path);
    }
    if stale > 0 {
        eprintln!("crdgen: run `cargo run -p ichor-renderers --bin crdgen` and commit the result");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
