//! The identity graph over a World: [`Controller`] folds events (with the credentials
//! projection) and evaluates; [`replay`] re-runs a journal offline and lists every decision
//! with its reason, plus every change of a cluster's rendered authentication document (which is
//! not an object the graph writes, but the decision operators ask about first).

use std::collections::BTreeMap;
use std::fmt;
use std::io::BufRead;

use ichor_graph::{
    Action, BuildError, Cause, Digest, Evaluation, Event, Graph, JournalError, JournalReader, NodeFailure,
    Object, ObjectKey, Prepared, PreparedEntry, Reason, Recycler, World,
};

use super::nodes::ClusterAuth;
use super::{Identity, build, project};

/// A change of one cluster's rendered authentication document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderChange {
    /// The `TalosCluster`.
    pub cluster: ObjectKey,
    /// The render before (`None`: the cluster was not rendered yet, or did not exist).
    pub before: Option<String>,
    /// The render after (`None`: the cluster is gone).
    pub after: Option<String>,
}

impl fmt::Display for RenderChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |s: &Option<String>| s.clone().unwrap_or_else(|| "nothing".to_owned());
        write!(
            f,
            "render {}: {} (was {})",
            self.cluster,
            show(&self.after),
            show(&self.before)
        )
    }
}

fn summarize(auth: &ClusterAuth) -> String {
    match &auth.error {
        Some(e) => format!("error: {e}"),
        None => auth
            .documents
            .iter()
            .map(|(kind, sha)| format!("{kind} sha256 {sha}"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The identity graph, its World, and what was last reported of each cluster's render.
pub struct Controller {
    graph: Graph,
    handles: Identity,
    world: World,
    /// Per cluster, the digest of its `cluster-auth` output and the summary reported of it.
    renders: BTreeMap<ObjectKey, (Digest, String)>,
}

impl Controller {
    /// A controller over an empty World.
    ///
    /// # Errors
    /// The graph did not build (a bug).
    pub fn new() -> Result<Self, BuildError> {
        let (graph, handles) = build()?;
        Ok(Controller {
            graph,
            handles,
            world: World::new(),
            renders: BTreeMap::new(),
        })
    }

    /// Folds one event (and its derived events) into the World.
    pub fn fold(&mut self, event: Event) {
        project::fold(&mut self.world, event);
    }

    /// [`Controller::fold`] for an event whose object was hashed ahead; returns the object it
    /// replaced or removed.
    pub fn fold_prepared(&mut self, prepared: Prepared) -> Option<Object> {
        project::fold_prepared(&mut self.world, prepared)
    }

    /// Evaluates the graph against what changed, and the clusters whose render changed.
    ///
    /// Only the `cluster-auth` instances the evaluation changed (or dropped) are looked at, so
    /// one cluster's event costs the same however many clusters there are.
    pub fn evaluate(&mut self) -> (Evaluation, Vec<RenderChange>) {
        let eval = self.graph.evaluate(&mut self.world);
        let changed: Vec<ObjectKey> = eval.changed_instances(&self.handles.clusters).cloned().collect();
        let changes = self.render_changes(changed);
        (eval, changes)
    }

    /// The render changes of `clusters`, whose `cluster-auth` output changed or went away,
    /// recorded so that the next change of each is reported against it.
    fn render_changes(&mut self, clusters: Vec<ObjectKey>) -> Vec<RenderChange> {
        let mut out = Vec::new();
        for key in clusters {
            let digest = self.graph.instance_digest(&self.handles.clusters, &key);
            // An unchanged output summarizes as before: skip decoding it.
            if let (Some(d), Some((old, _))) = (digest, self.renders.get(&key))
                && d == *old
            {
                continue;
            }
            let now = self
                .graph
                .instance(&self.handles.clusters, &key)
                .map(|a| summarize(&a));
            let before = match (&now, digest) {
                (Some(s), Some(d)) => self.renders.insert(key.clone(), (d, s.clone())),
                _ => self.renders.remove(&key),
            }
            .map(|(_, s)| s);
            if before != now {
                out.push(RenderChange {
                    cluster: key,
                    before,
                    after: now,
                });
            }
        }
        out
    }

    /// Makes the next evaluation look at everything and diff every desired and owned object
    /// (the periodic safety net; a settled World then decides nothing).
    pub fn resync(&mut self) {
        self.graph.resync();
    }

    /// The effects the graph has requested and not yet seen the result of, except those already
    /// in `actions`, as actions with the reason `node`. The graph announces a request once; an
    /// applier whose attempt failed (or a standby that became leader) asks for them again with
    /// this.
    pub fn outstanding_effects(&self, actions: &[Action], node: &str) -> Vec<Action> {
        self.graph
            .requested_effects()
            .filter(|r| {
                !actions
                    .iter()
                    .any(|a| matches!(a, Action::Effect { request, .. } if request.id == r.id))
            })
            .map(|r| Action::Effect {
                request: r.clone(),
                reason: Reason {
                    node: Some(node.to_owned()),
                    instance: None,
                    cause: Cause::Drift,
                },
            })
            .collect()
    }

    /// The graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The node handles.
    pub fn handles(&self) -> &Identity {
        &self.handles
    }

    /// The World.
    pub fn world(&self) -> &World {
        &self.world
    }
}

/// One line of a replay report.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplayLine {
    /// An action.
    Action(Action),
    /// A cluster's render changed.
    Render(RenderChange),
    /// A node failed.
    Failure(NodeFailure),
}

/// Every decision of a replayed journal.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplayReport {
    /// Events read.
    pub events: u64,
    /// Evaluations run.
    pub evaluations: u64,
    /// The seq of the last event read.
    pub last_seq: Option<u64>,
    /// Every line with the seq of the event it followed, in decision order.
    pub lines: Vec<(u64, ReplayLine)>,
    /// Actions decided.
    pub actions: u64,
    /// Per node (by name): instances recomputed and time spent, over the whole replay.
    pub nodes: BTreeMap<String, NodeTotals>,
    /// Render changes and failures counted (kept even when the lines are not).
    pub renders: u64,
    /// Node failures counted.
    pub failures: u64,
    /// Whether the lines are kept (a summary replay of a large journal keeps counts only).
    pub keep_lines: bool,
}

/// What one node cost over a replay.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeTotals {
    /// Instances whose function ran.
    pub recomputed: u64,
    /// Wall time spent in the node (measurement only).
    pub elapsed: std::time::Duration,
}

impl ReplayReport {
    /// The summary line: events, evaluations, actions.
    pub fn summary(&self) -> String {
        format!(
            "{} events, {} evaluations, {} actions, {} render changes, {} failures",
            self.events, self.evaluations, self.actions, self.renders, self.failures
        )
    }

    fn record(&mut self, eval: Evaluation, renders: Vec<RenderChange>) {
        let seq = self.last_seq.unwrap_or(0);
        self.evaluations += 1;
        for n in eval
            .stats
            .nodes
            .iter()
            .filter(|n| n.recomputed > 0 || !n.elapsed.is_zero())
        {
            let t = match self.nodes.get_mut(&*n.name) {
                Some(t) => t,
                None => self.nodes.entry(n.name.to_string()).or_default(),
            };
            t.recomputed += n.recomputed as u64;
            t.elapsed += n.elapsed;
        }
        self.actions += eval.actions.len() as u64;
        self.renders += renders.len() as u64;
        self.failures += eval.failures.len() as u64;
        if !self.keep_lines {
            return;
        }
        self.lines
            .extend(eval.actions.into_iter().map(|a| (seq, ReplayLine::Action(a))));
        self.lines
            .extend(renders.into_iter().map(|r| (seq, ReplayLine::Render(r))));
        self.lines
            .extend(eval.failures.into_iter().map(|f| (seq, ReplayLine::Failure(f))));
    }
}

impl ReplayReport {
    /// One line per node: instances recomputed and time spent, most expensive first.
    pub fn profile(&self) -> String {
        let mut nodes: Vec<(&String, &NodeTotals)> = self.nodes.iter().collect();
        nodes.sort_by_key(|n| std::cmp::Reverse(n.1.elapsed));
        nodes
            .iter()
            .map(|(name, t)| {
                format!(
                    "{name:<24} {:>10} recomputed {:>10.3} ms\n",
                    t.recomputed,
                    t.elapsed.as_secs_f64() * 1e3
                )
            })
            .collect()
    }
}

impl fmt::Display for ReplayReport {
    /// One line per decision (`seq 12: effect issue-leaf … (certificate-effects: input now
    /// changed)`), then the summary.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (seq, line) in &self.lines {
            match line {
                ReplayLine::Action(a) => writeln!(f, "seq {seq}: {a}{}", describe(a))?,
                ReplayLine::Render(r) => writeln!(f, "seq {seq}: {r}")?,
                ReplayLine::Failure(n) => match &n.instance {
                    Some(i) => writeln!(f, "seq {seq}: node {}[{i}] failed: {}", n.node, n.error)?,
                    None => writeln!(f, "seq {seq}: node {} failed: {}", n.node, n.error)?,
                },
            }
        }
        writeln!(f, "{}", self.summary())
    }
}

/// A replay stopped by a bad journal line (the error names the line), with what was decided
/// before it.
#[derive(Debug, thiserror::Error)]
#[error("replay stopped after {} events: {error}", partial.events)]
pub struct IdentityReplayError {
    /// The journal defect.
    #[source]
    pub error: JournalError,
    /// The decisions before it.
    pub partial: Box<ReplayReport>,
}

/// A short note of what an apply writes, for people: the conditions of a status write, the
/// discovery URL of the trust ConfigMap. Empty for anything else.
pub fn describe(action: &Action) -> String {
    let Action::Apply { object, .. } = action else {
        return String::new();
    };
    let v = &object.value;
    if let Some(conds) = v
        .get("status")
        .and_then(|s| s.get("conditions"))
        .and_then(serde_json::Value::as_array)
    {
        let text: Vec<String> = conds
            .iter()
            .map(|c| {
                let field = |k: &str| c.get(k).and_then(serde_json::Value::as_str).unwrap_or("?");
                format!("{}={} {}", field("type"), field("status"), field("reason"))
            })
            .collect();
        return format!(" [{}]", text.join(", "));
    }
    if let Some(url) = v
        .get("data")
        .and_then(|d| d.get("discoveryURL"))
        .and_then(serde_json::Value::as_str)
    {
        return format!(" [discoveryURL {url}]");
    }
    String::new()
}

/// Replays a journal into a fresh [`Controller`], evaluating after every event.
///
/// # Errors
/// The first bad journal line, with the decisions before it.
pub fn replay<R: BufRead + Send>(
    journal: JournalReader<R>,
    controller: &mut Controller,
) -> Result<ReplayReport, IdentityReplayError> {
    replay_with(journal, controller, true)
}

/// [`replay`], keeping every line (`keep_lines`) or only the counts (for large journals: the
/// memory then stays that of the World and the graph).
///
/// The credentials Secret is read keys-only ([`project::credentials_keys_only`]): after a
/// replay the World holds its key names with `null` values.
///
/// # Errors
/// The first bad journal line, with the decisions before it.
pub fn replay_with<R: BufRead + Send>(
    journal: JournalReader<R>,
    controller: &mut Controller,
    keep_lines: bool,
) -> Result<ReplayReport, IdentityReplayError> {
    // Only the credentials Secret's key names matter: do not decode its values.
    let journal = journal.keys_only(project::credentials_keys_only());
    // Decoding and hashing run ahead on a second thread while this one folds and evaluates.
    journal.read_ahead(|entries, recycler| replay_entries(entries, recycler, controller, keep_lines))
}

fn replay_entries(
    journal: &mut dyn Iterator<Item = Result<PreparedEntry, JournalError>>,
    recycler: &mut Recycler,
    controller: &mut Controller,
    keep_lines: bool,
) -> Result<ReplayReport, IdentityReplayError> {
    controller.graph.reset();
    controller.world = World::new();
    controller.renders.clear();
    let mut report = ReplayReport {
        keep_lines,
        ..ReplayReport::default()
    };
    for item in journal {
        let entry = match item {
            Ok(e) => e,
            Err(error) => {
                return Err(IdentityReplayError {
                    error,
                    partial: Box::new(report),
                });
            }
        };
        report.events += 1;
        report.last_seq = Some(entry.seq);
        if let Some(done) = controller.fold_prepared(entry.prepared) {
            recycler.recycle(done);
        }
        let (eval, renders) = controller.evaluate();
        report.record(eval, renders);
    }
    Ok(report)
}

#[cfg(test)]
mod tests;
