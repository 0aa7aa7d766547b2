//! Steps 4 and 5 of `ichor config apply`: the control planes restarted one at a time (Talos
//! `Version`, `ApplyConfiguration` with `NO_REBOOT`, then the `/readyz` wait), progress on stderr
//! and in the `TalosOperation` record, and the stop at the first failure with the command that
//! resumes.

use std::{
    process::ExitCode,
    time::{Duration, Instant},
};

use ichor_renderers::crd::TalosOperation;
use ichor_talos::{
    client::TalosClient,
    readyz::{Observation, ReadyWatch, ReadyzProbe, Verdict},
    talosconfig::{APID_PORT, Endpoint, TalosContext},
};

use super::{
    super::{
        operation::{self, DONE},
        store::{OperationStore, StoreError},
    },
    Target, Timing,
};

/// How long a connection to the Talos API may take to set up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A duration for people: `2.5s`, `5m00s`.
pub(super) fn human(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs >= 60.0 {
        let whole = d.as_secs();
        format!("{}m{:02}s", whole / 60, whole % 60)
    } else {
        format!("{secs:.1}s")
    }
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
    /// One progress line; `message` may quote a node (its version, its warnings), so its control
    /// characters are escaped.
    fn say(&self, t: &Target, message: &str) {
        let message = crate::terminal::escape_controls(message);
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
pub(super) async fn execute(
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
