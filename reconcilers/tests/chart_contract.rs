//! The chart's controller Deployment against the binary it runs: every argument parses and every
//! environment variable it sets is one `ichor-controller run` reads (clap names them in --help).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::process::Command;

fn controller_container() -> serde_yaml::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../golden/chart/users-on.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let doc = serde_yaml::Value::deserialize(doc).unwrap();
        if doc["kind"] == "Deployment" && doc["metadata"]["name"] == "ichor-controller" {
            return doc["spec"]["template"]["spec"]["containers"][0].clone();
        }
    }
    panic!("no ichor-controller Deployment in {}", path.display());
}

use serde::Deserialize as _;

#[test]
fn every_variable_the_chart_sets_is_read_by_ichor_controller_run() {
    let container = controller_container();
    let help = Command::new(env!("CARGO_BIN_EXE_ichor-controller"))
        .args(["run", "--help"])
        .output()
        .unwrap();
    assert!(help.status.success());
    let help = String::from_utf8(help.stdout).unwrap();
    let names: Vec<&str> = container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(names.len() >= 9, "{names:?}");
    for name in names {
        assert!(
            help.contains(&format!("env: {name}")),
            "{name} is not read by `run`:\n{help}"
        );
    }
}

#[test]
fn the_chart_arguments_are_accepted_by_ichor_controller_run() {
    let container = controller_container();
    let mut args: Vec<String> = container["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(args.first().map(String::as_str), Some("run"));
    // --help after the chart's arguments: clap parses them first and fails on an unknown one.
    args.push("--help".to_owned());
    let out = Command::new(env!("CARGO_BIN_EXE_ichor-controller"))
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
