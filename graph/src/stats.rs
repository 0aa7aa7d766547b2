//! Observability: what one evaluation did, for the runtime to turn into metrics.

use std::sync::Arc;
use std::time::Duration;

/// Counters and timings of one evaluation.
///
/// `recomputed + skipped + failed` covers every node instance that exists after the
/// evaluation; `skipped` includes instances never looked at because nothing upstream changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EvalStats {
    /// Node instances whose function ran.
    pub recomputed: usize,
    /// Node instances not recomputed (their inputs' digest did not change).
    pub skipped: usize,
    /// Node instances whose function failed (see [`crate::NodeFailure`]).
    pub failed: usize,
    /// Observed objects hashed (those changed by events since the last evaluation).
    pub objects_hashed: usize,
    /// Apply actions.
    pub applies: usize,
    /// Delete actions.
    pub deletes: usize,
    /// Effect actions.
    pub effects: usize,
    /// Per computed node (not sources), in evaluation order.
    pub nodes: Vec<NodeStats>,
    /// Wall time of the whole evaluation (measurement only; never used in logic).
    pub elapsed: Duration,
}

/// Counters and time of one node (all its instances) in one evaluation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// The node's name (shared with the graph: reporting it costs no copy).
    pub name: Arc<str>,
    /// Instances after the evaluation (1 or 0 for a singleton node).
    pub instances: usize,
    /// Instances whose function ran.
    pub recomputed: usize,
    /// Instances not recomputed.
    pub skipped: usize,
    /// Instances whose function failed.
    pub failed: usize,
    /// Wall time spent on this node.
    pub elapsed: Duration,
}

impl EvalStats {
    /// The stats of the node with this name, if it exists.
    pub fn node(&self, name: &str) -> Option<&NodeStats> {
        self.nodes.iter().find(|n| &*n.name == name)
    }
}
