//! `ichor config apply`: the apiserver-restart rollout of the rendered `KubeAuthenticationConfig`
//! (seed 000, "Amendment: the apiserver restart rolls out one control plane at a time").
//!
//! 1. Render the manifests directory (`--dir`, as `ichor render`) and take the cluster's
//!    rollout plan (`ichor_renderers::rollout::plan`): the control planes that need the restart,
//!    in order.
//! 2. Show the plan and its warnings (stdout), then ask for confirmation on the terminal
//!    (`--yes` skips; no terminal and no `--yes` refuses). `--dry-run` stops after the plan.
//! 3. Check everything needed before touching any node: each machine's configuration in
//!    `--machine-config-dir` takes the rendered document ([`super::machine_config`]), the
//!    talosconfig is usable, the `/readyz` trust is given.
//! 4. For each control plane in plan order: `Version`, then `ApplyConfiguration` with the full
//!    machine configuration and mode `NO_REBOOT` ([`crate::talos::client`]), then wait for its
//!    `https://<address>:6443/readyz` to go down and come back ([`super::readyz`]), all within
//!    `--node-timeout`. Progress is printed per node on stderr and recorded in a
//!    `TalosOperation` ([`super::operation`], [`super::store`]).
//! 5. The first failure stops the rollout: later nodes are not touched, and the message gives
//!    the command that resumes at the failed node (`--resume`; a plain re-run for the same
//!    render offers it too). Nodes recorded `Done` are never applied again.

use std::{
    collections::BTreeMap,
    io::{BufRead, IsTerminal, Write},
    path::{Path, PathBuf},
    process::ExitCode,
    time::{Duration, Instant},
};

use clap::Args;
use ichor_renderers::{
    cluster::{self, AUTHENTICATION_DOCUMENT, ClusterReport, RenderReport},
    crd::{MachineRole, OperationPhase, TalosOperation},
    rollout::{self, APISERVER_PORT},
};
use ichor_server::manifest_files;

use super::{
    machine_config::{self, Merge},
    operation::{self, DONE},
    readyz::{Observation, ReadyWatch, ReadyzProbe, Verdict},
    store::{FileOperationStore, OperationStore, StoreError},
};
use crate::{
    OutputFormat,
    talos::{
        client::TalosClient,
        talosconfig::{self, APID_PORT, Endpoint, TalosContext},
    },
};

/// How long a connection to the Talos API may take to set up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one `/readyz` probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Arguments of `ichor config apply`.
#[derive(Debug, Args)]
#[command(after_help = "\
Restarts the Kubernetes API server on each control plane that needs the rendered
KubeAuthenticationConfig, one at a time, with no reboot and no drain. For each node: the Talos
API ApplyConfiguration (mode NO_REBOOT) with the node's full machine configuration, in which the
rendered document replaces the old one (a document-level replace) or is appended; then the wait
for https://<address>:6443/readyz to go down and come back (or to stay ready past
--restart-grace). The next node starts only after that.

The node's current configuration is read from --machine-config-dir: one <machine>.yaml per
control plane, multi-document, e.g.
  talosctl -n <address> get machineconfig -o jsonpath='{.spec}' > DIR/<machine>.yaml
Keep that directory outside --dir (render reads every YAML file below --dir).

Progress is recorded in DIR/.ichor/operations/<cluster>.yaml as a TalosOperation. The first
failure stops the rollout, leaves later nodes untouched and prints the command that resumes at
the failed node; nodes already done are not applied again.

Exit code: 0 applied (or nothing to do, or a dry run), 1 refused or stopped on a failure.

Examples:
  ichor config apply --dir ./clusters/prod --dry-run
  ichor config apply --dir ./clusters/prod --machine-config-dir ./machineconfigs \\
      --kube-ca-file ./kube-ca.crt
  ichor config apply --dir ./clusters/prod --machine-config-dir ./machineconfigs \\
      --kube-ca-file ./kube-ca.crt --resume --yes")]
pub struct ApplyArgs {
    /// The directory of manifests (as `ichor render --dir`).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// The TalosCluster (name or namespace/name); may be left out when DIR has one cluster.
    #[arg(long, value_name = "NAME")]
    pub cluster: Option<String>,
    /// Print the plan and check the inputs; send nothing to any node.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Continue the interrupted operation of this cluster at its first node not done.
    #[arg(long)]
    pub resume: bool,
    /// The directory of each control plane's current machine configuration, `<machine>.yaml`.
    #[arg(long, value_name = "DIR")]
    pub machine_config_dir: Option<PathBuf>,
    /// The talosconfig with the os:admin client certificate [default: ~/.talos/config].
    #[arg(long, value_name = "FILE", env = "TALOSCONFIG")]
    pub talosconfig: Option<PathBuf>,
    /// The talosconfig context to use instead of its current one.
    #[arg(long, value_name = "NAME")]
    pub talos_context: Option<String>,
    /// The Kubernetes CA (PEM) that signs the kube-apiserver certificates, to verify /readyz.
    #[arg(long, value_name = "FILE")]
    pub kube_ca_file: Option<PathBuf>,
    /// Do not verify the kube-apiserver certificate on /readyz (the Talos API is always verified).
    #[arg(long, conflicts_with = "kube_ca_file")]
    pub insecure_skip_readyz_tls_verify: bool,
    /// How long one node may take, from the apply to /readyz back.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub node_timeout: Duration,
    /// After the apply, a /readyz never seen down counts as restarted once this has passed.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub restart_grace: Duration,
    /// The time between two /readyz probes.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub poll_interval: Duration,
    /// The kube-apiserver port (KubeAPIServerConfig.apiPort when the cluster moved it).
    #[arg(long, value_name = "PORT", default_value_t = APISERVER_PORT)]
    pub apiserver_port: u16,
}

/// `5m`, `90s`, `250ms`, `1h30m` (jiff's friendly format) as a non-negative duration.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let d: jiff::SignedDuration = s
        .parse()
        .map_err(|e| format!("{s:?} is not a duration like 5m, 90s or 250ms ({e})"))?;
    Duration::try_from(d).map_err(|_| format!("{s:?}: a duration must not be negative"))
}

/// A duration for people: `2.5s`, `5m00s`.
fn human(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs >= 60.0 {
        let whole = d.as_secs();
        format!("{}m{:02}s", whole / 60, whole % 60)
    } else {
        format!("{secs:.1}s")
    }
}

/// One control plane to restart.
#[derive(Debug, Clone)]
struct Target {
    /// Its index in the operation's `status.nodes`.
    step: usize,
    machine: String,
    address: String,
    readyz_url: String,
    /// The full machine configuration to apply (filled by the preflight).
    data: Vec<u8>,
}

/// The per-step settings.
#[derive(Debug, Clone, Copy)]
struct Timing {
    node_timeout: Duration,
    restart_grace: Duration,
    poll_interval: Duration,
}

/// Run `ichor config apply`.
pub fn run(args: ApplyArgs, output: OutputFormat) -> anyhow::Result<ExitCode> {
    let manifests = match manifest_files::load_dir(&args.dir) {
        Ok(m) => m,
        Err(errors) => {
            eprintln!("{errors}");
            eprintln!(
                "{}: {} error(s); nothing applied",
                args.dir.display(),
                errors.0.len()
            );
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

    let store = FileOperationStore::new(&args.dir);
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
                        args.dir.display()
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
        let Some(readyz_url) = readyz_url(&address, args.apiserver_port) else {
            eprintln!("error: control plane {machine}: {address:?} is not an IP address or DNS name");
            return Ok(ExitCode::FAILURE);
        };
        targets.push(Target {
            step,
            machine,
            address,
            readyz_url,
            data: Vec::new(),
        });
    }
    let done = |t: &Target| {
        resume_op
            .as_ref()
            .and_then(|op| operation::nodes(op).get(t.step))
            .is_some_and(|n| n.state == DONE)
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
                    let detail = node
                        .message
                        .as_deref()
                        .map(|m| format!(": {m}"))
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
    let mut merged: BTreeMap<usize, (Vec<u8>, Merge, String)> = BTreeMap::new();
    match &args.machine_config_dir {
        Some(dir) => {
            for t in &remaining {
                match merged_config(dir, &t.machine, yaml) {
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
        if let Some((data, _, _)) = merged.remove(&t.step) {
            t.data = data;
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

    let mut op = resume_op.unwrap_or_else(|| {
        let machines: Vec<String> = targets.iter().map(|t| t.machine.clone()).collect();
        operation::new_operation(namespace, name, sha, &machines)
    });
    let timing = Timing {
        node_timeout: args.node_timeout,
        restart_grace: args.restart_grace,
        poll_interval: args.poll_interval,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let code = runtime.block_on(execute(&mut op, &targets, &talos, &probe, &store, timing))?;
    Ok(code)
}

/// The cluster named `wanted` (name or namespace/name), or the only one.
fn select_cluster<'a>(report: &'a RenderReport, wanted: Option<&str>) -> Result<&'a ClusterReport, String> {
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
fn readyz_url(address: &str, port: u16) -> Option<String> {
    let base = rollout::readyz_url(address)?;
    if port == APISERVER_PORT {
        return Some(base);
    }
    let mut url = url::Url::parse(&base).ok()?;
    url.set_port(Some(port)).ok()?;
    Some(url.to_string())
}

/// The machine's configuration from `dir` with the rendered document in it.
fn merged_config(dir: &Path, machine: &str, document: &str) -> Result<(Vec<u8>, Merge, String), String> {
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
    let (merged, merge) = machine_config::replace_document(&file, &text, AUTHENTICATION_DOCUMENT, document)
        .map_err(|e| e.to_string())?;
    Ok((merged.into_bytes(), merge, file))
}

/// Asks `question` on the terminal.
fn confirm(question: &str) -> Result<bool, String> {
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
fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
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

/// The progress lines, `[i/n] machine: …` on stderr.
struct Progress {
    total: usize,
}

impl Progress {
    fn say(&self, t: &Target, message: &str) {
        eprintln!("[{}/{}] {}: {message}", t.step + 1, self.total, t.machine);
    }
}

/// Where a step stands, for the timeout message.
#[derive(Debug, Default)]
struct StepState {
    applied: bool,
    last: Option<Observation>,
}

impl StepState {
    fn describe(&self) -> String {
        match (&self.applied, &self.last) {
            (false, _) => "before the configuration was applied".to_owned(),
            (true, None) => "waiting for /readyz (no answer yet)".to_owned(),
            (true, Some(Observation::Ready)) => {
                "waiting for /readyz to restart (it stayed ready; raise --node-timeout above --restart-grace)"
                    .to_owned()
            }
            (true, Some(Observation::NotReady(why))) => format!("waiting for /readyz (last: {why})"),
        }
    }
}

/// Runs the steps not done, one at a time; stops at the first failure.
async fn execute(
    op: &mut TalosOperation,
    targets: &[Target],
    talos: &TalosContext,
    probe: &ReadyzProbe,
    store: &dyn OperationStore,
    timing: Timing,
) -> Result<ExitCode, StoreError> {
    let progress = Progress { total: targets.len() };
    store.save(op)?;
    eprintln!("Recording progress in {}", store.location(&op.spec.cluster));
    for (i, t) in targets.iter().enumerate() {
        if operation::nodes(op).get(t.step).is_some_and(|n| n.state == DONE) {
            progress.say(t, "done earlier; skipped");
            continue;
        }
        operation::start_step(op, t.step, jiff::Timestamp::now());
        store.save(op)?;
        let started = Instant::now();
        let mut state = StepState::default();
        let outcome = tokio::time::timeout(
            timing.node_timeout,
            run_step(op, t, talos, probe, store, timing, &progress, &mut state),
        )
        .await;
        let failure = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(message)) => Some(message),
            Err(_) => Some(format!(
                "timed out after {} (--node-timeout) {}",
                human(timing.node_timeout),
                state.describe()
            )),
        };
        let Some(message) = failure else {
            operation::finish_step(op, t.step, jiff::Timestamp::now());
            store.save(op)?;
            progress.say(t, &format!("done in {}", human(started.elapsed())));
            continue;
        };
        let untouched: Vec<&str> = targets[i + 1..]
            .iter()
            .filter(|l| operation::nodes(op).get(l.step).is_none_or(|n| n.state != DONE))
            .map(|l| l.machine.as_str())
            .collect();
        let untouched = if untouched.is_empty() {
            "no later control plane".to_owned()
        } else {
            untouched.join(", ")
        };
        let resume = resume_command();
        let summary = format!(
            "stopped at {}: {message}; not touched: {untouched}. Fix the cause, then resume with: {resume}",
            t.machine
        );
        operation::fail_step(op, t.step, &message, &summary, jiff::Timestamp::now());
        store.save(op)?;
        progress.say(t, &format!("FAILED: {message}"));
        eprintln!("Stopped at {}. Not touched: {untouched}.", t.machine);
        eprintln!("Fix the cause, then resume at {} with:\n  {resume}", t.machine);
        return Ok(ExitCode::FAILURE);
    }
    operation::succeed(op);
    store.save(op)?;
    eprintln!(
        "Done: {} control plane(s) of {} run the rendered configuration.",
        targets.len(),
        op.spec.cluster
    );
    Ok(ExitCode::SUCCESS)
}

/// One node: Version, ApplyConfiguration (NO_REBOOT), then the `/readyz` wait.
#[allow(clippy::too_many_arguments)]
async fn run_step(
    op: &mut TalosOperation,
    t: &Target,
    talos: &TalosContext,
    probe: &ReadyzProbe,
    store: &dyn OperationStore,
    timing: Timing,
    progress: &Progress,
    state: &mut StepState,
) -> Result<(), String> {
    let endpoint = talos.endpoints.first().cloned().unwrap_or_else(|| Endpoint {
        host: t.address.clone(),
        port: APID_PORT,
    });
    let mut client = TalosClient::connect(talos, &endpoint, CONNECT_TIMEOUT, timing.node_timeout)
        .await
        .map_err(|e| e.to_string())?;
    let version = client.version(&t.address).await.map_err(|e| e.to_string())?;
    progress.say(
        t,
        &format!("Talos {version} (via {endpoint}); applying the configuration, mode NO_REBOOT"),
    );
    let outcome = client
        .apply_no_reboot(&t.address, t.data.clone())
        .await
        .map_err(|e| e.to_string())?;
    let applied_at = Instant::now();
    state.applied = true;
    progress.say(t, &format!("applied: {}", outcome.details));
    for w in &outcome.warnings {
        progress.say(t, &format!("warning from Talos: {w}"));
    }
    operation::waiting_ready(op, t.step);
    store.save(op).map_err(|e| e.to_string())?;
    progress.say(
        t,
        &format!(
            "waiting for {} to go down and come back (or stay ready for {})",
            t.readyz_url,
            human(timing.restart_grace)
        ),
    );
    let mut watch = ReadyWatch::new(timing.restart_grace);
    loop {
        let observation = probe.check(&t.readyz_url).await;
        let since = applied_at.elapsed();
        if state.last.as_ref() != Some(&observation) {
            match &observation {
                Observation::Ready => {
                    progress.say(t, &format!("/readyz ready ({} after the apply)", human(since)))
                }
                Observation::NotReady(why) => {
                    progress.say(
                        t,
                        &format!("/readyz not ready: {why} ({} after the apply)", human(since)),
                    );
                }
            }
        }
        let verdict = watch.observe(since, &observation);
        state.last = Some(observation);
        match verdict {
            Verdict::Waiting => tokio::time::sleep(timing.poll_interval).await,
            Verdict::CameBack => {
                progress.say(t, "the API server restarted and is ready");
                return Ok(());
            }
            Verdict::StayedReady => {
                progress.say(
                    t,
                    &format!(
                        "/readyz stayed ready for {}: no restart was seen (quicker than the probe interval, \
                         or the node already ran this configuration)",
                        human(timing.restart_grace)
                    ),
                );
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_the_friendly_format_and_refuse_negative_ones() {
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn the_readyz_url_takes_another_port_and_brackets_ipv6() {
        assert_eq!(
            readyz_url("10.0.0.1", 6443).as_deref(),
            Some("https://10.0.0.1:6443/readyz")
        );
        assert_eq!(
            readyz_url("fd00::1", 7443).as_deref(),
            Some("https://[fd00::1]:7443/readyz")
        );
        assert_eq!(readyz_url("not an address", 6443), None);
    }

    #[test]
    fn durations_print_for_people() {
        assert_eq!(human(Duration::from_millis(2500)), "2.5s");
        assert_eq!(human(Duration::from_secs(300)), "5m00s");
    }
}
