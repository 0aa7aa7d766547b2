//! `ichor render --dir DIR`: render a directory of manifests offline.

use std::{path::PathBuf, process::ExitCode};

use clap::Args;
use ichor_renderers::cluster;
use ichor_server::manifest_files;

use crate::OutputFormat;

/// Arguments of `ichor render`.
#[derive(Debug, Args)]
#[command(after_help = "\
Reads every *.yaml, *.yml and *.json file below DIR (TalosCluster, TalosMachine, IchorUser,
IchorInstallation and the ConfigMap ichor-system/ichor-oidc-trust) and prints, per cluster, the
rendered KubeAuthenticationConfig, how each machine compares with it and the rollout plan.
Errors name the file, the document and the field. Exit code: 0 rendered, 1 any error.

Examples:
  ichor render --dir ./clusters/prod
  ichor render --dir ./clusters/prod -o yaml > rendered.yaml
  ichor render --dir ./clusters/prod --now 2027-01-01T00:00:00Z")]
pub struct RenderArgs {
    /// The directory of manifests.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// Render as of this instant (RFC 3339) instead of now; stamps the conditions.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<jiff::Timestamp>,
}

/// Run `ichor render`.
pub fn run(args: RenderArgs, output: OutputFormat) -> anyhow::Result<ExitCode> {
    let manifests = match manifest_files::load_dir(&args.dir) {
        Ok(m) => m,
        Err(errors) => {
            eprintln!("{errors}");
            eprintln!(
                "{}: {} error(s); nothing rendered",
                args.dir.display(),
                errors.0.len()
            );
            return Ok(ExitCode::FAILURE);
        }
    };
    let now = args.now.unwrap_or_else(jiff::Timestamp::now);
    let report = cluster::render_manifests(&manifests);
    match output {
        OutputFormat::Table => print!("{report}"),
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&stamped(&report, now)?)?),
        OutputFormat::Yaml => print!("{}", serde_yaml::to_string(&stamped(&report, now)?)?),
    }
    if report.is_ok() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("{}: rendered with errors (see above)", args.dir.display());
        Ok(ExitCode::FAILURE)
    }
}

/// The report as JSON with `renderedAt`, so a saved render says when it was made.
fn stamped(report: &cluster::RenderReport, now: jiff::Timestamp) -> anyhow::Result<serde_json::Value> {
    let mut v = serde_json::to_value(report)?;
    if let Some(obj) = v.as_object_mut() {
        obj.insert("renderedAt".into(), serde_json::Value::String(now.to_string()));
    }
    Ok(v)
}
