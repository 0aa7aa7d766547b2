//! The chart's issuer Deployment against the binary it runs: every environment variable it sets
//! is one `ichor-issuer` reads (clap names them in --help).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[test]
fn every_variable_the_chart_sets_is_read_by_ichor_issuer() {
    ichor_golden::assert_chart_variables_read(
        "ichor-issuer",
        std::path::Path::new(env!("CARGO_BIN_EXE_ichor-issuer")),
        &[],
        "ichor-issuer",
    );
}
