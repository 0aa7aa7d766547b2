//! The chart's controller Deployment against the binary it runs: every argument parses and every
//! environment variable it sets is one `ichor-controller run` reads (clap names them in --help).

use std::process::Command;

#[test]
fn every_variable_the_chart_sets_is_read_by_ichor_controller_run() {
    ichor_golden::assert_chart_variables_read(
        "ichor-controller",
        std::path::Path::new(env!("CARGO_BIN_EXE_ichor-controller")),
        &["run"],
        "`run`",
    );
}

#[test]
fn the_chart_arguments_are_accepted_by_ichor_controller_run() {
    let (mut args, _names) = ichor_golden::chart_container("ichor-controller");
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
