//! The chart's issuer Deployment against the binary it runs: every environment variable it sets
//! is one `ichor-issuer` reads (clap names them in --help).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Command;

#[test]
fn every_variable_the_chart_sets_is_read_by_ichor_issuer() {
    let (_args, names) = ichor_golden::chart_container("ichor-issuer");
    let help = Command::new(env!("CARGO_BIN_EXE_ichor-issuer"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(help.status.success());
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(names.len() >= 8, "{names:?}");
    for name in names {
        assert!(
            help.contains(&format!("env: {name}")),
            "{name} is not read by ichor-issuer:\n{help}"
        );
    }
}
