//! `ichor config apply`: the apiserver-restart rollout of the rendered `KubeAuthenticationConfig`
//! (seed 000, "Amendment: the apiserver restart rolls out one control plane at a time").
//!
//! Without `--dir`, the rollout runs in the cluster: [`in_cluster`] creates (or finds) the
//! `TalosOperation` the controller carries out and follows it. With `--dir`, this process does
//! the rollout itself from a manifests directory and local machine configurations, as follows.
//!
//! 1. Render the manifests directory (`--dir`, as `ichor render`) and take the cluster's
//!    rollout plan (`ichor_renderers::rollout::plan`): the control planes that need the restart,
//!    in order.
//! 2. Show the plan and its warnings (stdout), then ask for confirmation on the terminal
//!    (`--yes` skips; no terminal and no `--yes` refuses). `--dry-run` stops after the plan.
//! 3. Check everything needed before touching any node: each machine's configuration in
//!    `--machine-config-dir` takes the rendered document ([`ichor_talos::machine_config`]), the
//!    talosconfig is usable, the `/readyz` trust is given.
//! 4. The rollout runs through the one reconcile loop ([`offline`]), as `ichor dev` does: the
//!    World is the manifests directory, the operation record (`DIR/.ichor/operations/`,
//!    [`super::operation`], [`super::store`]) and the rollout settings from the flags; the graph
//!    decides each step as in the cluster, and a file sink ([`sink`]) performs it: for each
//!    control plane in plan order `Version`, then the rollout step the controller performs too
//!    ([`ichor_talos::rollout`]): the document the node ran is recorded, and the full machine
//!    configuration is applied with mode `NO_REBOOT`; then `/readyz` is probed
//!    ([`ichor_talos::readyz`]) until it went down and came back, within `--node-timeout`.
//!    Progress is printed per node on stderr; every event goes to a journal in
//!    `DIR/.ichor/journal/` that `ichor-controller replay` reads.
//! 5. A node whose `/readyz` does not come back is rolled back to the document it ran before
//!    and the operation fails, touching no later node; so does a refused step. The message gives
//!    the command that resumes at the failed node (`--resume`; a plain re-run for the same render
//!    offers it too): the record's failed node is put back to `Pending` before the loop runs.
//!    Nodes recorded `Done` are never applied again.
//!
//! This module is steps 1 to 3 (the plan, its output and the checks before any node is
//! touched); `args` holds the flags, `inputs` what those steps read and ask (the cluster,
//! each machine's merged configuration, the confirmation), `offline` and `sink` steps 4 and 5.

use std::{
    collections::{BTreeMap, BTreeSet},
    process::ExitCode,
    time::Duration,
};

use ichor_controller_core::identity::rollout::RolloutSettings;
use ichor_renderers::{
    cluster::{self, AUTHENTICATION_DOCUMENT},
    crd::{MachineRole, NodeState, OperationPhase, is_object_name},
    rollout::APISERVER_PORT,
};
use ichor_server::manifest_files;
use ichor_talos::{machine_config::Merge, readyz::ReadyzProbe, talosconfig};

use super::{
    operation,
    store::{FileOperationStore, OperationStore},
};
use crate::OutputFormat;
use inputs::{confirm, merged_config, readyz_url, select_cluster, short};
use offline::Offline;

mod args;
mod in_cluster;
mod inputs;
pub mod offline;
mod preflight;
mod sink;
#[cfg(test)]
mod tests;

pub use args::ApplyArgs;

/// How long one `/readyz` probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// One control plane to restart.
#[derive(Debug, Clone)]
struct Target {
    /// Its index in the operation's `status.nodes`.
    step: usize,
    machine: String,
    /// Its configuration as read from `--machine-config-dir` (filled by the preflight), which
    /// takes the rendered document and is applied whole.
    config: String,
    /// Ichor has not applied its document to it yet: a foreign `jwt` list is refused.
    adopting: bool,
}

/// Run `ichor config apply`.
pub fn run(args: ApplyArgs, output: OutputFormat) -> anyhow::Result<ExitCode> {
    let Some(dir) = args.dir.clone() else {
        return in_cluster::run(&args, output);
    };
    let manifests = match manifest_files::load_dir(&dir) {
        Ok(m) => m,
        Err(errors) => {
            eprintln!("{errors}");
            eprintln!("{}: {} error(s); nothing applied", dir.display(), errors.0.len());
            return Ok(ExitCode::FAILURE);
        }
    };
    let report = cluster::render_manifests(&manifests);
    if !report.problems.is_empty() {
        for p in &report.problems {
            eprintln!("problem: {p}");
        }
        eprintln!("nothing applied: the render depends on these inputs; fix them first");
        return Ok(ExitCode::FAILURE);
    }
    let c = match select_cluster(&report, args.cluster.as_deref()) {
        Ok(c) => c,
        Err(message) => {
            eprintln!("error: {message}");
            return Ok(ExitCode::FAILURE);
        }
    };
    for e in c.errors.iter().chain(&c.rollout_error) {
        eprintln!("error: cluster {}: {e}", c.cluster);
    }
    let (Some(sha), Some(yaml), Some(plan)) = (&c.sha256, &c.yaml, &c.rollout) else {
        eprintln!(
            "error: cluster {}: nothing was rendered, so nothing is applied",
            c.cluster
        );
        return Ok(ExitCode::FAILURE);
    };
    let (namespace, name) = c.cluster.split_once('/').unwrap_or(("", c.cluster.as_str()));
    // Both name files under DIR/.ichor/ (the record, the journal): only Kubernetes object names.
    if !is_object_name(namespace) || !is_object_name(name) {
        eprintln!(
            "error: cluster {:?}: its namespace and name must be Kubernetes object names (lowercase \
             letters, digits, '-' and '.'); nothing applied",
            c.cluster
        );
        return Ok(ExitCode::FAILURE);
    }

    let store = FileOperationStore::new(&dir);
    let existing = store.load(name)?.filter(|op| op.spec.cluster == name);
    let finished = existing.as_ref().is_some_and(|op| {
        op.status.as_ref().and_then(|st| st.phase) == Some(OperationPhase::Succeeded)
            && operation::rendered_sha(op) == Some(sha.as_str())
    });
    if finished && !args.resume {
        // The manifests' machine statuses may lag behind (a GitOps tree is not updated by the
        // apply), so the plan can still list nodes the record says are done.
        println!("{}", plan.to_string().trim_end());
        eprintln!(
            "nothing to do: the operation in {} already applied this render (sha256 {}) to every node; \
             remove that file to apply it again",
            store.location(name),
            short(sha)
        );
        return Ok(ExitCode::SUCCESS);
    }
    let resumable = existing.filter(operation::is_resumable);
    let resume_op = resumable
        .as_ref()
        .filter(|op| operation::rendered_sha(op) == Some(sha.as_str()))
        .cloned();
    if let (Some(old), None) = (&resumable, &resume_op) {
        let old_sha = operation::rendered_sha(old).unwrap_or("unknown");
        if args.resume {
            eprintln!(
                "error: --resume: the interrupted operation in {} applies the render sha256 {}, but the \
                 manifests now render sha256 {}; run without --resume to roll the new render to every node",
                store.location(name),
                short(old_sha),
                short(sha)
            );
            return Ok(ExitCode::FAILURE);
        }
        eprintln!(
            "note: the interrupted operation in {} was for the render sha256 {}; the manifests now render \
             sha256 {}, so a new operation starts with every node of the plan",
            store.location(name),
            short(old_sha),
            short(sha)
        );
    }
    if args.resume && resume_op.is_none() {
        eprintln!(
            "error: --resume: there is no interrupted operation for cluster {name} in {}; run without \
             --resume to start one",
            store.location(name)
        );
        return Ok(ExitCode::FAILURE);
    }

    // The nodes, in plan order: the stored operation's when resuming, else the plan's.
    let addresses: BTreeMap<String, String> = manifests
        .machines
        .iter()
        .filter(|m| {
            m.spec.cluster == name
                && m.spec.role == MachineRole::ControlPlane
                && m.metadata.namespace.as_deref().unwrap_or_default() == namespace
        })
        .filter_map(|m| m.metadata.name.clone().map(|n| (n, m.spec.address.clone())))
        .collect();
    // Control planes Ichor has not applied its document to yet: their current one may trust
    // issuers configured by hand, which an adoption must not remove.
    let adopting: BTreeSet<String> = manifests
        .machines
        .iter()
        .filter(|m| {
            m.spec.cluster == name
                && m.metadata.namespace.as_deref().unwrap_or_default() == namespace
                && m.status
                    .as_ref()
                    .is_none_or(|s| !s.applied_document_hashes.contains_key(AUTHENTICATION_DOCUMENT))
        })
        .filter_map(|m| m.metadata.name.clone())
        .collect();
    let pairs: Vec<(String, String)> = match &resume_op {
        Some(op) => {
            let mut pairs = Vec::new();
            for node in operation::nodes(op) {
                let Some(address) = addresses.get(&node.machine) else {
                    eprintln!(
                        "error: the operation in {} names control plane {}, which is no longer a control \
                         plane of cluster {name} in {}; move the record away to start a new operation",
                        store.location(name),
                        node.machine,
                        dir.display()
                    );
                    return Ok(ExitCode::FAILURE);
                };
                pairs.push((node.machine.clone(), address.clone()));
            }
            pairs
        }
        None => plan
            .steps
            .iter()
            .map(|s| (s.machine.clone(), s.address.clone()))
            .collect(),
    };
    let mut targets = Vec::new();
    for (step, (machine, address)) in pairs.into_iter().enumerate() {
        if readyz_url(&address, args.apiserver_port).is_none() {
            eprintln!("error: control plane {machine}: {address:?} is not an IP address or DNS name");
            return Ok(ExitCode::FAILURE);
        }
        targets.push(Target {
            adopting: adopting.contains(&machine),
            step,
            machine,
            config: String::new(),
        });
    }
    let done = |t: &Target| {
        resume_op
            .as_ref()
            .and_then(|op| operation::nodes(op).get(t.step))
            .is_some_and(|n| n.state == NodeState::Done)
    };

    // The plan (stdout: it is this command's result).
    match output {
        OutputFormat::Table => {
            println!("{}", plan.to_string().trim_end());
            if args.apiserver_port != APISERVER_PORT && !plan.is_empty() {
                println!(
                    "(/readyz is checked on port {}, --apiserver-port)",
                    args.apiserver_port
                );
            }
            if let Some(op) = &resume_op {
                println!(
                    "\nResuming the operation in {} (render sha256 {}):",
                    store.location(name),
                    short(sha)
                );
                for (i, node) in operation::nodes(op).iter().enumerate() {
                    // The record is a file in the tree: its text reaches the terminal escaped.
                    let detail = node
                        .message
                        .as_deref()
                        .map(|m| format!(": {}", m.escape_debug()))
                        .unwrap_or_default();
                    println!("{}. {:<24} {}{detail}", i + 1, node.machine, node.state);
                }
            }
        }
        OutputFormat::Json | OutputFormat::Yaml => {
            let value = serde_json::json!({
                "cluster": c.cluster,
                "sha256": sha,
                "plan": plan,
                "resume": resume_op,
            });
            if output == OutputFormat::Json {
                println!("{}", serde_json::to_string_pretty(&value)?);
            } else {
                print!("{}", serde_yaml::to_string(&value)?);
            }
        }
    }
    let remaining: Vec<Target> = targets.iter().filter(|t| !done(t)).cloned().collect();
    if remaining.is_empty() {
        eprintln!("nothing to do: every control plane runs the rendered configuration");
        return Ok(ExitCode::SUCCESS);
    }

    // Everything that can fail is checked before any node is touched.
    let mut problems = Vec::new();
    let mut merged: BTreeMap<usize, (String, Merge, String)> = BTreeMap::new();
    match &args.machine_config_dir {
        Some(dir) => {
            for t in &remaining {
                match merged_config(dir, &t.machine, yaml, t.adopting) {
                    Ok((data, merge, file)) => {
                        merged.insert(t.step, (data, merge, file));
                    }
                    Err(e) => problems.push(e),
                }
            }
        }
        None if args.dry_run => {}
        None => problems.push(
            "--machine-config-dir DIR is required: ApplyConfiguration takes the node's full machine \
             configuration, so DIR must hold each control plane's current one as <machine>.yaml"
                .to_owned(),
        ),
    }
    if args.dry_run {
        for t in &remaining {
            if let Some((_, merge, file)) = merged.get(&t.step) {
                let verb = match merge {
                    Merge::Replaced => "replaces the",
                    Merge::Appended => "is appended as the new",
                };
                println!(
                    "{}: in {file}, the rendered document {verb} {AUTHENTICATION_DOCUMENT} document",
                    t.machine
                );
            }
        }
        for p in &problems {
            eprintln!("error: {p}");
        }
        eprintln!("dry run: nothing was sent to any node");
        return Ok(if problems.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    if args.kube_ca_file.is_none() && !args.insecure_skip_readyz_tls_verify {
        problems.push(
            "/readyz needs the Kubernetes CA: pass --kube-ca-file FILE (the certificate-authority-data of \
             an admin kubeconfig), or --insecure-skip-readyz-tls-verify to skip verifying /readyz only"
                .to_owned(),
        );
    }
    let probe = match ReadyzProbe::new(args.kube_ca_file.as_deref(), PROBE_TIMEOUT) {
        Ok(p) => Some(p),
        Err(e) => {
            problems.push(e.to_string());
            None
        }
    };
    let talos = match args.talosconfig.clone().or_else(talosconfig::default_path) {
        Some(path) => match talosconfig::load(&path, args.talos_context.as_deref()) {
            Ok(ctx) => Some(ctx),
            Err(e) => {
                problems.push(e.to_string());
                None
            }
        },
        None => {
            problems.push("no talosconfig: pass --talosconfig FILE or set TALOSCONFIG".to_owned());
            None
        }
    };
    let (Some(probe), Some(talos), true) = (probe, talos, problems.is_empty()) else {
        for p in &problems {
            eprintln!("error: {p}");
        }
        eprintln!("nothing applied");
        return Ok(ExitCode::FAILURE);
    };
    for t in &mut targets {
        if let Some((config, _, _)) = merged.remove(&t.step) {
            t.config = config;
        }
    }

    if !args.yes {
        let question = match &resume_op {
            Some(_) => format!(
                "An operation for this render stopped before its end. Resume it at {} ({} of {} control \
                 planes left)? [y/N] ",
                remaining.first().map(|t| t.machine.as_str()).unwrap_or_default(),
                remaining.len(),
                targets.len()
            ),
            None => format!(
                "Restart the Kubernetes API server on {} control plane(s) of {name}, one at a time? [y/N] ",
                remaining.len()
            ),
        };
        match confirm(&question) {
            Ok(true) => {}
            Ok(false) => {
                eprintln!("aborted: nothing applied");
                return Ok(ExitCode::FAILURE);
            }
            Err(message) => {
                eprintln!("error: {message}");
                return Ok(ExitCode::FAILURE);
            }
        }
    }

    let op = match resume_op {
        Some(stored) => operation::resume_record(&stored, namespace, name, sha, &addresses),
        None => {
            let machines: Vec<String> = targets.iter().map(|t| t.machine.clone()).collect();
            operation::new_operation(namespace, name, sha, &machines)
        }
    };
    let settings = RolloutSettings {
        poll_interval_millis: u64::try_from(args.poll_interval.as_millis()).unwrap_or(u64::MAX),
        apiserver_port: args.apiserver_port,
        ..RolloutSettings::default()
    }
    .with_durations(args.node_timeout, args.restart_grace);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let offline = Offline {
        dir: &dir,
        manifests: &manifests,
        store: &store,
        talos: &talos,
        probe: &probe,
        configs: targets
            .iter()
            .map(|t| (t.machine.clone(), t.config.clone()))
            .collect(),
        settings,
        node_timeout: args.node_timeout,
        restart_grace: args.restart_grace,
        poll_interval: args.poll_interval,
    };
    let (op, journal) = runtime.block_on(offline.run(op))?;
    Ok(offline::summarise(&op, &journal, &resume_command()))
}

/// The command that resumes: this one, with `--resume` (and without `--dry-run`).
fn resume_command() -> String {
    let mut words = vec!["ichor".to_owned()];
    let mut has_resume = false;
    for a in std::env::args().skip(1) {
        if a == "--dry-run" {
            continue;
        }
        has_resume |= a == "--resume";
        words.push(
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'' || c == '"') {
                format!("'{}'", a.replace('\'', r"'\''"))
            } else {
                a
            },
        );
    }
    if !has_resume {
        words.push("--resume".to_owned());
    }
    words.join(" ")
}
