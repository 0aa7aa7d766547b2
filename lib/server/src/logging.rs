//! Log set-up shared by the binaries: `tracing` events to stderr, the level from `RUST_LOG`
//! (default `info`), as human-readable lines (coloured only on a terminal) or one JSON object per
//! line whose event fields sit at the top level (`{"timestamp","level","message","target",…}`),
//! the layout log pipelines index without configuration.

use clap::ValueEnum;

/// The log line format (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Starts logging in `format`. A second call (tests, an embedding process that set up its own
/// subscriber) keeps the subscriber already installed.
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
