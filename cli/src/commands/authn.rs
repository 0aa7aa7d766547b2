//! `ichor authn …`: kube-apiserver `AuthenticationConfiguration` files.

use std::{path::PathBuf, process::ExitCode};

use anyhow::Context;
use clap::{Args, Subcommand};
use ichor_renderers::authn::{self, FieldError, ValidationOptions};
use serde::Serialize;

use crate::OutputFormat;

/// The largest file `ichor authn validate` reads (the kube-apiserver config is small).
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Subcommands of `ichor authn`.
#[derive(Debug, Subcommand)]
pub enum AuthnCommand {
    /// Validate an AuthenticationConfiguration file with the kube-apiserver's rules.
    #[command(after_help = "\
Every error is printed as `path: message`, with the kube-apiserver's own field paths and messages.
Exit code: 0 valid, 1 invalid (or unreadable).

Examples:
  ichor authn validate /etc/kubernetes/authentication-config.yaml
  ichor authn validate config.json --disallowed-issuer https://10.0.0.5:6443
  ichor authn validate config.yaml -o json")]
    Validate(ValidateArgs),
}

/// Arguments of `ichor authn validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The file (YAML or JSON; `-` reads standard input).
    pub file: PathBuf,
    /// An issuer URL no JWT authenticator may use: the cluster's service-account issuer
    /// (on Talos, the control-plane endpoint URL). Repeatable.
    #[arg(long = "disallowed-issuer", value_name = "URL")]
    pub disallowed_issuers: Vec<String>,
}

#[derive(Serialize)]
struct Report<'a> {
    file: String,
    valid: bool,
    errors: Vec<ErrorLine<'a>>,
}

#[derive(Serialize)]
struct ErrorLine<'a> {
    path: &'a str,
    message: String,
}

/// Run an `ichor authn` subcommand.
pub fn run(cmd: AuthnCommand, output: OutputFormat) -> anyhow::Result<ExitCode> {
    match cmd {
        AuthnCommand::Validate(args) => validate(args, output),
    }
}

fn read_bounded(path: &PathBuf) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::new();
    let limit = MAX_FILE_BYTES + 1;
    if path.as_os_str() == "-" {
        std::io::stdin()
            .take(limit)
            .read_to_end(&mut buf)
            .context("cannot read standard input")?;
    } else {
        let file = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
        file.take(limit)
            .read_to_end(&mut buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
    }
    anyhow::ensure!(
        buf.len() as u64 <= MAX_FILE_BYTES,
        "{}: the file is larger than {} bytes, which no AuthenticationConfiguration needs",
        path.display(),
        MAX_FILE_BYTES
    );
    Ok(buf)
}

fn validate(args: ValidateArgs, output: OutputFormat) -> anyhow::Result<ExitCode> {
    let name = args.file.display().to_string();
    let bytes = read_bounded(&args.file)?;
    let (errors, parse_error): (Vec<FieldError>, Option<String>) = match authn::parse(&bytes, &name) {
        Ok(cfg) => {
            let options = ValidationOptions {
                disallowed_issuers: args.disallowed_issuers,
            };
            (authn::validate(&cfg, &options), None)
        }
        Err(e) => (vec![], Some(e.to_string())),
    };
    let valid = errors.is_empty() && parse_error.is_none();
    let lines: Vec<ErrorLine<'_>> = match &parse_error {
        Some(msg) => vec![ErrorLine {
            path: "",
            message: msg.clone(),
        }],
        None => errors
            .iter()
            .map(|e| {
                let text = e.to_string();
                let message = text
                    .strip_prefix(&format!("{}: ", e.path))
                    .unwrap_or(&text)
                    .to_owned();
                ErrorLine {
                    path: &e.path,
                    message,
                }
            })
            .collect(),
    };
    match output {
        OutputFormat::Table => {
            if let Some(msg) = &parse_error {
                println!("{msg}");
            }
            for e in &errors {
                println!("{e}");
            }
            if valid {
                eprintln!("{name}: valid");
            } else {
                eprintln!(
                    "{name}: invalid ({} error{})",
                    lines.len(),
                    if lines.len() == 1 { "" } else { "s" }
                );
            }
        }
        OutputFormat::Json => {
            println!(
                "{}",
                serde_json::to_string_pretty(&Report {
                    file: name,
                    valid,
                    errors: lines
                })?
            );
        }
        OutputFormat::Yaml => print!(
            "{}",
            serde_yaml::to_string(&Report {
                file: name,
                valid,
                errors: lines
            })?
        ),
    }
    Ok(if valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
