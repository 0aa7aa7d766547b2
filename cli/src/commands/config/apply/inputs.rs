//! What the plan and the checks of `ichor config apply` read and ask: the cluster to apply, each
//! control plane's `/readyz` URL and merged machine configuration, and the confirmation on the
//! terminal.

use std::{
    io::{BufRead, IsTerminal, Write},
    path::Path,
};

use ichor_renderers::{
    cluster::{AUTHENTICATION_DOCUMENT, ClusterReport, RenderReport},
    rollout::{self, APISERVER_PORT},
};

use ichor_talos::machine_config::{self, Merge};

/// The cluster named `wanted` (name or namespace/name), or the only one.
pub(super) fn select_cluster<'a>(
    report: &'a RenderReport,
    wanted: Option<&str>,
) -> Result<&'a ClusterReport, String> {
    let names = || {
        report
            .clusters
            .iter()
            .map(|c| c.cluster.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match wanted {
        Some(w) => {
            let found: Vec<&ClusterReport> = report
                .clusters
                .iter()
                .filter(|c| c.cluster == w || c.cluster.split_once('/').is_some_and(|(_, n)| n == w))
                .collect();
            match found.as_slice() {
                [one] => Ok(one),
                [] => Err(format!(
                    "--cluster {w}: no such TalosCluster (the directory has: {})",
                    names()
                )),
                _ => Err(format!(
                    "--cluster {w}: several namespaces have it; write namespace/name"
                )),
            }
        }
        None => match report.clusters.as_slice() {
            [one] => Ok(one),
            [] => Err("the directory has no TalosCluster".to_owned()),
            _ => Err(format!(
                "the directory has several clusters ({}); pass --cluster NAME",
                names()
            )),
        },
    }
}

/// `https://<address>:<port>/readyz`.
pub(super) fn readyz_url(address: &str, port: u16) -> Option<String> {
    let base = rollout::readyz_url(address)?;
    if port == APISERVER_PORT {
        return Some(base);
    }
    let mut url = url::Url::parse(&base).ok()?;
    url.set_port(Some(port)).ok()?;
    Some(url.to_string())
}

/// The machine's configuration from `dir` as read, checked to take the rendered document (how
/// it does), and the file's name; `adopting`: Ichor has not applied that document to the
/// machine before (see [`machine_config::replace_document`]).
pub(super) fn merged_config(
    dir: &Path,
    machine: &str,
    document: &str,
    adopting: bool,
) -> Result<(String, Merge, String), String> {
    use std::io::Read;
    let path = dir.join(format!("{machine}.yaml"));
    let file = path.display().to_string();
    let mut text = String::new();
    std::fs::File::open(&path)
        .and_then(|f| {
            f.take(machine_config::MAX_BYTES as u64 + 1)
                .read_to_string(&mut text)
        })
        .map_err(|e| {
            format!("{file}: cannot read control plane {machine}'s current machine configuration ({e})")
        })?;
    let (_, merge) =
        machine_config::replace_document(&file, &text, AUTHENTICATION_DOCUMENT, document, adopting)
            .map_err(|e| e.to_string())?;
    Ok((text, merge, file))
}

/// Asks `question` on the terminal.
pub(super) fn confirm(question: &str) -> Result<bool, String> {
    if !std::io::stdin().is_terminal() {
        return Err(
            "refusing to restart API servers without confirmation: there is no terminal to ask \
                    on; review the plan (--dry-run), then pass --yes"
                .to_owned(),
        );
    }
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| format!("cannot read the answer: {e}"))?;
    Ok(matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes"))
}

/// The first 12 hex digits of a sha256, for messages.
pub(super) fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}
