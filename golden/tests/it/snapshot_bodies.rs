//! The bodies of the authentication snapshots (`golden/tests/it/snapshots/`,
//! `renderers/src/authn/snapshots/`), which the validator tests hold to the real consumers.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// The body of every snapshot file whose name `keep` accepts, with its file name, sorted by
/// path; a body that is not YAML of `T` is left out. (The insta header is a YAML document of
/// its own; the body follows it.)
pub fn snapshot_bodies<T: DeserializeOwned>(keep: impl Fn(&str) -> bool) -> Vec<(String, T)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = ["tests/it/snapshots", "../renderers/src/authn/snapshots"]
        .iter()
        .flat_map(|d| std::fs::read_dir(root.join(d)).expect("a snapshot directory"))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| keep(&p.file_name().unwrap().to_string_lossy()))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a snapshot");
        let body = text.splitn(3, "---\n").nth(2).unwrap_or("");
        let Ok(value) = serde_yaml::from_str::<T>(body) else {
            continue;
        };
        out.push((file.file_name().unwrap().to_string_lossy().into_owned(), value));
    }
    out
}
