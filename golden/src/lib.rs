//! Golden tests of every rendered artifact. The fixtures are directories of manifests under
//! `golden/fixtures/<shape>/` (one cluster shape each); the tests render them with the same code
//! `ichor render` runs and pin the result with insta snapshots under `golden/tests/snapshots/`.
//!
//! Snapshots of artifacts that need no fixture directory live beside their renderer (the key
//! timeline over 400 days in `renderers/src/trust/snapshots/`, fieldmeta classifications and
//! rollout plans in `renderers/src/{fieldmeta,rollout}/snapshots/`).
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

/// The fixture directory of one cluster shape.
pub fn fixture(shape: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(shape)
}

/// Every fixture shape, sorted.
pub fn shapes() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures"))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.path().is_dir())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}
