//! Steps 4 and 5 of `ichor config apply --dir`: the rollout run by the one reconcile loop
//! (`ichor_controller_core::cycle::Loop`), as `ichor dev` runs it over a directory (`crate::local`).
//!
//! The World is the manifests directory as `ichor dev` reads it ([`crate::local::manifest_objects`],
//! with the trust ConfigMap of the tree, from which the graph renders the cluster's document as
//! `ichor render --dir` does), the operation record, and the controller's rollout settings from
//! the flags. The loop decides each step ([`ichor_controller_core::identity::rollout`]): the
//! apply, the `/readyz` probes, the rollback of a node that does not come back, the end of the
//! operation. The [`super::sink::FileSink`] performs them. Every event and decision goes to a
//! journal (`DIR/.ichor/journal/<cluster>-<time>.jsonl`, the controller's JSON-lines format),
//! which `ichor-controller replay` reads.
//!
//! Ticks run with `now` from the clock until the operation is `Succeeded` or `Failed`.

use std::os::unix::fs::OpenOptionsExt as _;
use std::{
    collections::{BTreeMap, BTreeSet},
    io::Write,
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use ichor_controller_core::{
    cycle::{Loop, Quiet},
    identity::{
        Controller,
        rollout::{RolloutSettings, settings_object},
    },
    memory::ResourceVersions,
};
use ichor_graph::{Event, JournalWriter, Object};
use ichor_renderers::{
    crd::{NodeState, OperationPhase, TalosOperation},
    manifest::Manifests,
    trust::{NAMESPACE, TRUST_CONFIGMAP},
};
use ichor_talos::{readyz::ReadyzProbe, talosconfig::TalosContext};

use super::{
    super::store::FileOperationStore,
    sink::{FileSink, ended, operation_object},
};
use crate::local::manifest_objects;

/// Why the offline rollout could not run.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    /// The identity graph did not build (a bug).
    #[error("the identity graph did not build: {0}")]
    Build(#[from] ichor_graph::BuildError),
    /// The journal could not be created.
    #[error("{path}: cannot create the journal: {source}")]
    Journal {
        /// The journal file.
        path: String,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// The operation record could not be written.
    #[error(transparent)]
    Store(#[from] super::super::store::StoreError),
    /// The operation record could not be written during the rollout.
    #[error("{0}; the rollout stopped (run again with --resume once the record can be written)")]
    Record(String),
}

/// Where the journals of `dir` are kept.
pub fn journal_dir(dir: &Path) -> PathBuf {
    dir.join(".ichor").join("journal")
}

/// A new journal file in `dir`, `<cluster>-<time>.jsonl` (`-2`, `-3`, … when a run of the same
/// second has one): created new only (never a planted link or an older journal), mode 0600.
///
/// # Errors
/// [`OfflineError::Journal`] naming the file.
fn new_journal(dir: &Path, cluster: &str) -> Result<(PathBuf, std::fs::File), OfflineError> {
    let stamp = jiff::Timestamp::now().strftime("%Y%m%dT%H%M%SZ").to_string();
    let mut n = 1;
    loop {
        let name = match n {
            1 => format!("{cluster}-{stamp}.jsonl"),
            _ => format!("{cluster}-{stamp}-{n}.jsonl"),
        };
        let path = dir.join(name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(file) => return Ok((path, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => n += 1,
            Err(source) => {
                return Err(OfflineError::Journal {
                    path: path.display().to_string(),
                    source,
                });
            }
        }
    }
}

/// The World the loop starts from: the tree's objects, the tree's trust ConfigMap, the
/// settings.
pub fn world_events(manifests: &Manifests, settings: &RolloutSettings) -> Vec<Event> {
    let mut versions = ResourceVersions::default();
    let mut events = Vec::new();
    let trust = manifests.configmaps.iter().find(|cm| {
        cm.metadata.name.as_deref() == Some(TRUST_CONFIGMAP)
            && cm.metadata.namespace.as_deref() == Some(NAMESPACE)
    });
    // The trust first: the cluster's render reads it, and is then never reported missing.
    if let Some(value) = trust.and_then(|cm| serde_json::to_value(cm).ok()) {
        let object = Object::new("ConfigMap", NAMESPACE, TRUST_CONFIGMAP, value);
        events.push(versions.stamp(Event::Applied(object)));
    }
    events.extend(
        manifest_objects(manifests)
            .into_iter()
            .map(|o| versions.stamp(Event::Applied(o))),
    );
    events.push(Event::Applied(settings_object(settings)));
    events
}

/// What the driver needs besides the operation.
pub(super) struct Offline<'a> {
    pub(super) dir: &'a Path,
    pub(super) manifests: &'a Manifests,
    pub(super) store: &'a FileOperationStore,
    pub(super) talos: &'a TalosContext,
    pub(super) probe: &'a ReadyzProbe,
    pub(super) configs: BTreeMap<String, String>,
    pub(super) settings: RolloutSettings,
    pub(super) node_timeout: Duration,
    pub(super) restart_grace: Duration,
    pub(super) poll_interval: Duration,
}

impl Offline<'_> {
    /// Runs the loop over `op` (saved first) until it ends.
    ///
    /// # Errors
    /// [`OfflineError`]: the graph, the journal or the record.
    pub(super) async fn run(self, op: TalosOperation) -> Result<(TalosOperation, PathBuf), OfflineError> {
        use super::super::store::OperationStore;
        self.store.save(&op)?;
        eprintln!("Recording progress in {}", self.store.location(&op.spec.cluster));
        for (i, node) in op.status.iter().flat_map(|s| s.nodes.iter()).enumerate() {
            if node.state == NodeState::Done {
                let total = op.status.as_ref().map_or(0, |s| s.nodes.len());
                eprintln!("[{}/{total}] {}: done earlier; skipped", i + 1, node.machine);
            }
        }
        let journal_dir = journal_dir(self.dir);
        super::super::store::refuse_linked_state_dir(&journal_dir)?;
        std::fs::create_dir_all(&journal_dir).map_err(|source| OfflineError::Journal {
            path: journal_dir.display().to_string(),
            source,
        })?;
        let (journal_path, file) = new_journal(&journal_dir, &op.spec.cluster)?;
        let out: Box<dyn Write + Send> = Box::new(std::io::BufWriter::new(file));
        let mut lp: Loop<Quiet> = Loop::sole_writer(Controller::new()?, Some(JournalWriter::new(out)), Quiet);
        let mut events = world_events(self.manifests, &self.settings);
        events.push(Event::Applied(operation_object(&op, 1)));
        lp.ingest(events);
        let mut sink = FileSink {
            store: self.store,
            talos: self.talos,
            probe: self.probe,
            configs: self.configs,
            call_timeout: self.node_timeout,
            apiserver_port: self.settings.apiserver_port,
            restart_grace: self.restart_grace,
            op,
            version: 1,
            versions: ResourceVersions::after(1_000_000),
            started: BTreeMap::new(),
            applied_at: BTreeMap::new(),
            last_answer: BTreeMap::new(),
            unwritable: None,
            previous_read: BTreeSet::new(),
        };
        loop {
            let now = jiff::Timestamp::now();
            lp.tick(now);
            let report = lp.settle(&mut sink, &|| true).await;
            for p in &report.problems {
                eprintln!("warning: {p}");
            }
            lp.flush();
            if let Some(reason) = sink.unwritable.take() {
                return Err(OfflineError::Record(reason));
            }
            if ended(&sink.op) {
                break;
            }
            let status = sink.op.status.clone().unwrap_or_default();
            if status.phase == Some(OperationPhase::Pending) && report.settled {
                // The graph waits for something no tick brings offline (a cluster, a control
                // plane): that is the answer.
                break;
            }
            let wait = lp
                .next_deadline()
                .and_then(|d| Duration::try_from(d.duration_since(jiff::Timestamp::now())).ok())
                .unwrap_or(self.poll_interval)
                .clamp(
                    Duration::from_millis(10),
                    self.poll_interval.max(Duration::from_millis(10)),
                );
            let wait = lp.retry_delay().map_or(wait, |r| r.max(wait));
            tokio::time::sleep(wait).await;
        }
        lp.flush();
        Ok((sink.op, journal_path))
    }
}

/// The end of the run, on stderr; the exit code.
pub(super) fn summarise(op: &TalosOperation, journal: &Path, resume: &str) -> ExitCode {
    let status = op.status.clone().unwrap_or_default();
    eprintln!("Journal: {}", journal.display());
    match status.phase {
        Some(OperationPhase::Succeeded) => {
            eprintln!(
                "Done: {} control plane(s) of {} run the rendered configuration.",
                status.nodes.len(),
                op.spec.cluster
            );
            ExitCode::SUCCESS
        }
        Some(OperationPhase::Failed) => {
            let i = status
                .current_step
                .and_then(|s| usize::try_from(s).ok())
                .or_else(|| status.nodes.iter().position(|n| n.state != NodeState::Done))
                .unwrap_or_default();
            let total = status.nodes.len();
            let (machine, message) = status
                .nodes
                .get(i)
                .map(|n| (n.machine.clone(), n.message.clone().unwrap_or_default()))
                .unwrap_or_default();
            eprintln!(
                "[{}/{total}] {machine}: FAILED: {}",
                i + 1,
                crate::terminal::escape_controls(&message)
            );
            let untouched: Vec<&str> = status
                .nodes
                .iter()
                .skip(i + 1)
                .filter(|n| n.state != NodeState::Done)
                .map(|n| n.machine.as_str())
                .collect();
            let untouched = if untouched.is_empty() {
                "no later control plane".to_owned()
            } else {
                untouched.join(", ")
            };
            eprintln!("Stopped at {machine}. Not touched: {untouched}.");
            eprintln!("Fix the cause, then resume at {machine} with:\n  {resume}");
            ExitCode::FAILURE
        }
        _ => {
            eprintln!(
                "error: {}",
                status.message.as_deref().unwrap_or("the rollout did not start")
            );
            ExitCode::FAILURE
        }
    }
}
