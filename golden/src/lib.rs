//! Golden tests of every rendered artifact. The fixtures are directories of manifests under
//! `golden/fixtures/<shape>/` (one cluster shape each); the tests render them with the same code
//! `ichor render` runs and pin the result with insta snapshots under `golden/tests/snapshots/`.
//!
//! Snapshots of artifacts that need no fixture directory live beside their renderer (the key
//! timeline over 400 days in `renderers/src/trust/snapshots/`, fieldmeta classifications and
//! rollout plans in `renderers/src/{fieldmeta,rollout}/snapshots/`).
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

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

/// What the rendered chart (`golden/chart/users-on.yaml`) gives the container of Deployment
/// `name`: its arguments and the names of its environment variables, for the tests that hold the
/// binaries to the chart's contract.
///
/// # Panics
/// When the snapshot is missing or has no such Deployment (a test helper).
#[allow(clippy::expect_used)]
pub fn chart_container(name: &str) -> (Vec<String>, Vec<String>) {
    use serde::Deserialize as _;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("chart/users-on.yaml");
    let text = std::fs::read_to_string(&path).expect("the rendered chart snapshot");
    let container = serde_yaml::Deserializer::from_str(&text)
        .filter_map(|d| serde_yaml::Value::deserialize(d).ok())
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == name)
        .map(|d| d["spec"]["template"]["spec"]["containers"][0].clone())
        .expect("the Deployment in the rendered chart");
    let strings = |v: &serde_yaml::Value, field: Option<&str>| -> Vec<String> {
        v.as_sequence()
            .into_iter()
            .flatten()
            .filter_map(|e| field.map_or(Some(e), |f| e.get(f)))
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    (
        strings(&container["args"], None),
        strings(&container["env"], Some("name")),
    )
}

/// Holds the binary `binary` to the chart: runs `binary ARGS --help` and asserts that it succeeds
/// and that clap names every environment variable the chart sets on the container of Deployment
/// `container` (at least eight of them) as one it reads. `what` names the command in a failure.
///
/// # Panics
/// When the binary cannot run, or a variable is not read (the assertion of the tests).
#[allow(clippy::expect_used)]
pub fn assert_chart_variables_read(container: &str, binary: &Path, args: &[&str], what: &str) {
    let (_args, names) = chart_container(container);
    let help = Command::new(binary)
        .args(args)
        .arg("--help")
        .output()
        .expect("running the binary");
    assert!(help.status.success());
    let help = String::from_utf8(help.stdout).expect("UTF-8 help");
    assert!(names.len() >= 8, "{names:?}");
    for name in names {
        assert!(
            help.contains(&format!("env: {name}")),
            "{name} is not read by {what}:\n{help}"
        );
    }
}
