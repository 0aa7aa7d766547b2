//! The chart's issuer Deployment against the binary it runs: every environment variable it sets
//! is one `ichor-issuer` reads (clap names them in --help).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::process::Command;

use serde::Deserialize as _;

#[test]
fn every_variable_the_chart_sets_is_read_by_ichor_issuer() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../golden/chart/users-on.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let container = serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_yaml::Value::deserialize(d).unwrap())
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == "ichor-issuer")
        .map(|d| d["spec"]["template"]["spec"]["containers"][0].clone())
        .expect("the ichor-issuer Deployment");
    let help = Command::new(env!("CARGO_BIN_EXE_ichor-issuer"))
        .arg("--help")
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
    assert!(names.len() >= 8, "{names:?}");
    for name in names {
        assert!(
            help.contains(&format!("env: {name}")),
            "{name} is not read by ichor-issuer:\n{help}"
        );
    }
}
