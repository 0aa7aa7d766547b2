//! Registering nodes: [`GraphBuilder`] → [`Graph`].

use std::collections::HashSet;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

use jiff::Timestamp;
use petgraph::algo::toposort;
use petgraph::graph::{DiGraph, NodeIndex};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::diff::{Desired, Ownership};
use crate::engine::Graph;
use crate::inputs::{
    Family, InputKind, InputSpec, Inputs, NoPrimary, Node, PrimaryRef, ReadError, Reader, SlotId,
    with_primary,
};
use crate::object::{Object, ObjectKey};

static NEXT_BUILDER: AtomicU64 = AtomicU64::new(1);

/// A node's output together with the next instant at which it would change (a key to
/// activate, a certificate to renew). The engine reports the earliest such deadline so the
/// controller can schedule a tick for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Timed<O> {
    /// The output.
    pub value: O,
    /// When the output would next change, if ever.
    pub deadline: Option<Timestamp>,
}

impl<O> Timed<O> {
    /// An output that changes at `deadline`.
    pub fn until(value: O, deadline: Timestamp) -> Self {
        Self {
            value,
            deadline: Some(deadline),
        }
    }

    /// An output with no deadline.
    pub fn forever(value: O) -> Self {
        Self {
            value,
            deadline: None,
        }
    }
}

/// Why computing a node instance failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ComputeError {
    #[error("an input did not decode as the node's input type: {0}")]
    Input(serde_json::Error),
    #[error("the node's own object did not decode as its type: {0}")]
    Primary(serde_json::Error),
    #[error("the output could not be encoded as JSON: {0}")]
    Output(serde_json::Error),
}

impl From<ReadError> for ComputeError {
    fn from(e: ReadError) -> Self {
        ComputeError::Input(e.0)
    }
}

/// A node's output as the engine keeps it: a [`Desired`] stays typed (the emitter's objects are
/// taken from it without a JSON round trip); any other output is held as JSON.
#[derive(Debug, Clone)]
pub(crate) enum Output {
    Json(Value),
    Desired(Desired),
}

impl Output {
    /// Converts a node's output: typed when it is a [`Desired`], JSON otherwise.
    fn of<O: Serialize + 'static>(out: O) -> Result<Self, ComputeError> {
        let mut slot = Some(out);
        if let Some(d) = (&mut slot as &mut dyn std::any::Any)
            .downcast_mut::<Option<Desired>>()
            .and_then(Option::take)
        {
            return Ok(Output::Desired(d));
        }
        let value = slot.as_ref().map(serde_json::to_value).transpose();
        Ok(Output::Json(
            value.map_err(ComputeError::Output)?.unwrap_or(Value::Null),
        ))
    }

    /// The output as JSON: borrowed when held as JSON.
    pub(crate) fn json(&self) -> Result<std::borrow::Cow<'_, Value>, serde_json::Error> {
        match self {
            Output::Json(v) => Ok(std::borrow::Cow::Borrowed(v)),
            Output::Desired(d) => serde_json::to_value(d).map(std::borrow::Cow::Owned),
        }
    }

    /// The sha256 of the output's canonical JSON encoding.
    pub(crate) fn digest(&self) -> crate::canonical::Digest {
        match self {
            Output::Json(v) => crate::canonical::digest_value(v),
            Output::Desired(d) => crate::canonical::digest_desired(d),
        }
    }
}

pub(crate) type Computed = Result<(Output, Option<Timestamp>), ComputeError>;
pub(crate) type ComputeNode = Box<dyn Fn(&Reader<'_>) -> Computed + Send + Sync>;
pub(crate) type ComputeFamily =
    Box<dyn Fn(&ObjectKey, PrimaryRef<'_>, &Reader<'_>) -> Computed + Send + Sync>;

pub(crate) enum SlotKind {
    Now,
    Object(ObjectKey),
    Kind(String),
    Node {
        inputs: Vec<InputSpec>,
        compute: ComputeNode,
    },
    Family {
        primary: SlotId,
        inputs: Vec<InputSpec>,
        compute: ComputeFamily,
        /// Whether the output depends only on the primary instance's existence (see
        /// [`GraphBuilder::exists`]): an instance is then never recomputed while it exists.
        existence_only: bool,
    },
}

pub(crate) struct SlotDef {
    pub(crate) name: String,
    /// The name again, shared: every evaluation reports it per node ([`crate::NodeStats`]).
    pub(crate) shared_name: std::sync::Arc<str>,
    pub(crate) kind: SlotKind,
    pub(crate) emits: bool,
}

impl SlotDef {
    pub(crate) fn inputs(&self) -> &[InputSpec] {
        match &self.kind {
            SlotKind::Node { inputs, .. } | SlotKind::Family { inputs, .. } => inputs,
            _ => &[],
        }
    }
}

/// A mistake in the graph's registration, found when it is built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// Two nodes share a name; names appear in every action's reason, so they must be unique.
    #[error("two nodes are named {name:?}; give each node a unique name")]
    DuplicateName {
        /// The repeated name.
        name: String,
    },
    /// A node has an empty name.
    #[error("a node has an empty name; every node needs a name for the reasons it gives")]
    EmptyName,
    /// An input (or primary family, or emitted node) is a handle from another builder.
    #[error(
        "node {node:?}: input {input} is a handle from another GraphBuilder; use handles of this builder"
    )]
    ForeignHandle {
        /// The node holding the handle.
        node: String,
        /// The input's position (0 is the primary family of a family node).
        input: usize,
    },
    /// An input refers to a node that is not registered before this one.
    #[error("node {node:?}: input {input} refers to no registered node")]
    MissingInput {
        /// The node holding the input.
        node: String,
        /// The input's position.
        input: usize,
    },
    /// A joined input was given to a singleton node, which has no own object to join on.
    #[error("node {node:?}: input {input} is a joined input, which only a family node can read")]
    JoinedInSingleton {
        /// The singleton node.
        node: String,
        /// The input's position.
        input: usize,
    },
    /// The nodes' dependencies form a cycle.
    #[error("the graph has a cycle through node {node:?}; a node cannot depend on its own output")]
    Cycle {
        /// A node on the cycle.
        node: String,
    },
}

/// Registers nodes with typed inputs and outputs, then builds the [`Graph`].
///
/// Registration never fails on the spot: mistakes are collected and [`GraphBuilder::build`]
/// reports the first one, so a graph either builds whole or not at all.
pub struct GraphBuilder {
    id: u64,
    pub(crate) slots: Vec<SlotDef>,
    names: HashSet<String>,
    errors: Vec<BuildError>,
    ownership: Ownership,
    now: Option<SlotId>,
}

impl Default for GraphBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl GraphBuilder {
    /// An empty builder with the default [`Ownership`].
    pub fn new() -> Self {
        Self {
            id: NEXT_BUILDER.fetch_add(1, Ordering::Relaxed),
            slots: Vec::new(),
            names: HashSet::new(),
            errors: Vec::new(),
            ownership: Ownership::default(),
            now: None,
        }
    }

    /// Sets which observed objects this controller owns (and so may delete).
    pub fn ownership(&mut self, ownership: Ownership) -> &mut Self {
        self.ownership = ownership;
        self
    }

    fn add(&mut self, name: &str, kind: SlotKind) -> SlotId {
        if name.is_empty() {
            self.errors.push(BuildError::EmptyName);
        } else if !self.names.insert(name.to_owned()) {
            self.errors.push(BuildError::DuplicateName {
                name: name.to_owned(),
            });
        }
        self.slots.push(SlotDef {
            name: name.to_owned(),
            shared_name: name.into(),
            kind,
            emits: false,
        });
        self.slots.len() - 1
    }

    fn node_handle<T>(&self, slot: SlotId) -> Node<T> {
        Node {
            slot,
            builder: self.id,
            _t: PhantomData,
        }
    }

    fn family_handle<T>(&self, slot: SlotId) -> Family<T> {
        Family {
            slot,
            builder: self.id,
            _t: PhantomData,
        }
    }

    /// The time of the latest tick (node name `now`). Nodes reading it wait for the first tick.
    pub fn now(&mut self) -> Node<Timestamp> {
        let slot = match self.now {
            Some(s) => s,
            None => {
                let s = self.add("now", SlotKind::Now);
                self.now = Some(s);
                s
            }
        };
        self.node_handle(slot)
    }

    /// One observed object by key, `None` while it does not exist.
    pub fn object(&mut self, name: &str, key: ObjectKey) -> Node<Option<Object>> {
        let slot = self.add(name, SlotKind::Object(key));
        self.node_handle(slot)
    }

    /// Every observed object of one kind, as a family with one instance per object.
    pub fn objects(&mut self, name: &str, kind: &str) -> Family<Object> {
        let slot = self.add(name, SlotKind::Kind(kind.to_owned()));
        self.family_handle(slot)
    }

    /// A singleton node: `f` computes its output from its inputs' values.
    pub fn node<I, O, F>(&mut self, name: &str, inputs: I, f: F) -> Node<O>
    where
        I: Inputs<NoPrimary>,
        I::Values: 'static,
        O: Serialize + 'static,
        F: Fn(&I::Values) -> O + Send + Sync + 'static,
    {
        self.node_timed(name, inputs, move |v| Timed::forever(f(v)))
    }

    /// A singleton node whose output comes with a deadline (see [`Timed`]).
    pub fn node_timed<I, O, F>(&mut self, name: &str, inputs: I, f: F) -> Node<O>
    where
        I: Inputs<NoPrimary>,
        I::Values: 'static,
        O: Serialize + 'static,
        F: Fn(&I::Values) -> Timed<O> + Send + Sync + 'static,
    {
        let specs = inputs.specs();
        let compute: ComputeNode = Box::new(move |reader| {
            let values = I::read(reader)?;
            let out = f(&values);
            Ok((Output::of(out.value)?, out.deadline))
        });
        let slot = self.add(
            name,
            SlotKind::Node {
                inputs: specs,
                compute,
            },
        );
        self.node_handle(slot)
    }

    /// A node family: one instance per instance of `primary` (e.g. per observed object of a
    /// kind). `f` receives the instance key, the instance's own primary value and the values
    /// of `inputs` (shared singleton outputs, whole families, or joined instances).
    pub fn family<P, I, O, F>(&mut self, name: &str, primary: &Family<P>, inputs: I, f: F) -> Family<O>
    where
        P: DeserializeOwned + 'static,
        I: Inputs<P>,
        I::Values: 'static,
        O: Serialize + 'static,
        F: Fn(&ObjectKey, &P, &I::Values) -> O + Send + Sync + 'static,
    {
        self.family_timed(name, primary, inputs, move |k, p, v| Timed::forever(f(k, p, v)))
    }

    /// A node family whose outputs come with deadlines (see [`Timed`]).
    pub fn family_timed<P, I, O, F>(&mut self, name: &str, primary: &Family<P>, inputs: I, f: F) -> Family<O>
    where
        P: DeserializeOwned + 'static,
        I: Inputs<P>,
        I::Values: 'static,
        O: Serialize + 'static,
        F: Fn(&ObjectKey, &P, &I::Values) -> Timed<O> + Send + Sync + 'static,
    {
        let specs = inputs.specs();
        let compute: ComputeFamily = Box::new(move |key, primary, reader| {
            // The own object decodes first, then the inputs, as each failure names its cause.
            let out = with_primary(primary, |p: &P| -> Result<Timed<O>, ComputeError> {
                let values = I::read(reader)?;
                Ok(f(key, p, &values))
            })
            .map_err(ComputeError::Primary)??;
            Ok((Output::of(out.value)?, out.deadline))
        });
        self.add_family(name, primary, specs, compute, false)
    }

    /// A family with one instance per instance of `primary`, whose output is `true`: it changes
    /// only when instances come or go, never when one changes, and an existing instance is never
    /// recomputed (it costs nothing per change of its primary). Join it to make a family node
    /// depend on whether another object exists, not on its content (e.g. garbage collection of
    /// what belongs to a deleted object).
    pub fn exists<P>(&mut self, name: &str, primary: &Family<P>) -> Family<bool> {
        let compute: ComputeFamily = Box::new(|_, _, _| Ok((Output::of(true)?, None)));
        self.add_family(name, primary, Vec::new(), compute, true)
    }

    /// Registers a family node over `primary`, which must be a handle of this builder.
    fn add_family<P, O>(
        &mut self,
        name: &str,
        primary: &Family<P>,
        inputs: Vec<InputSpec>,
        compute: ComputeFamily,
        existence_only: bool,
    ) -> Family<O> {
        if primary.builder != self.id {
            self.errors.push(BuildError::ForeignHandle {
                node: name.to_owned(),
                input: 0,
            });
        }
        let slot = self.add(
            name,
            SlotKind::Family {
                primary: primary.slot,
                inputs,
                compute,
                existence_only,
            },
        );
        self.family_handle(slot)
    }

    /// Marks a node whose output is [`Desired`]: its objects and effects become actions.
    pub fn emit<E: Emitter>(&mut self, node: &E) -> &mut Self {
        let (slot, builder) = node.slot();
        match self.slots.get_mut(slot) {
            Some(def) if builder == self.id => def.emits = true,
            _ => self.errors.push(BuildError::ForeignHandle {
                node: "emit".into(),
                input: 0,
            }),
        }
        self
    }

    /// Checks the registration and builds the graph.
    ///
    /// # Errors
    /// The first registration mistake: duplicate or empty names, handles of another builder,
    /// inputs that refer to no earlier node, joined inputs on singleton nodes, cycles.
    pub fn build(self) -> Result<Graph, BuildError> {
        if let Some(e) = self.errors.into_iter().next() {
            return Err(e);
        }
        let mut dag: DiGraph<SlotId, ()> = DiGraph::new();
        let idx: Vec<NodeIndex> = (0..self.slots.len()).map(|i| dag.add_node(i)).collect();
        for (slot, def) in self.slots.iter().enumerate() {
            let mut deps: Vec<(usize, SlotId, u64)> = def
                .inputs()
                .iter()
                .enumerate()
                .map(|(i, s)| (i + 1, s.slot, s.builder))
                .collect();
            if let SlotKind::Family { primary, .. } = &def.kind {
                deps.push((0, *primary, self.id));
            }
            for (position, input, builder) in deps {
                if builder != self.id {
                    return Err(BuildError::ForeignHandle {
                        node: def.name.clone(),
                        input: position,
                    });
                }
                let (Some(&from), Some(&to)) = (idx.get(input), idx.get(slot)) else {
                    return Err(BuildError::MissingInput {
                        node: def.name.clone(),
                        input: position,
                    });
                };
                dag.add_edge(from, to, ());
            }
            if matches!(def.kind, SlotKind::Node { .. })
                && let Some(i) = def
                    .inputs()
                    .iter()
                    .position(|s| matches!(s.kind, InputKind::Joined(_)))
            {
                return Err(BuildError::JoinedInSingleton {
                    node: def.name.clone(),
                    input: i + 1,
                });
            }
        }
        let order = toposort(&dag, None).map_err(|cycle| BuildError::Cycle {
            node: self
                .slots
                .get(cycle.node_id().index())
                .map(|d| d.name.clone())
                .unwrap_or_default(),
        })?;
        let order: Vec<SlotId> = order.into_iter().map(|i| i.index()).collect();
        Ok(Graph::new(self.id, self.slots, order, self.ownership))
    }
}

/// A handle whose output is [`Desired`]: a `Node<Desired>` or a `Family<Desired>`.
pub trait Emitter {
    #[doc(hidden)]
    fn slot(&self) -> (SlotId, u64);
}

impl Emitter for Node<Desired> {
    fn slot(&self) -> (SlotId, u64) {
        (self.slot, self.builder)
    }
}

impl Emitter for Family<Desired> {
    fn slot(&self) -> (SlotId, u64) {
        (self.slot, self.builder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_two_nodes_with_one_name() {
        let mut b = GraphBuilder::new();
        let users = b.objects("users", "User");
        let _ = b.node("users", users.all(), |u| u.len());
        assert_eq!(
            b.build().err(),
            Some(BuildError::DuplicateName { name: "users".into() })
        );
    }

    #[test]
    fn refuses_a_handle_from_another_builder() {
        let mut other = GraphBuilder::new();
        let foreign = other.objects("users", "User");
        let mut b = GraphBuilder::new();
        let _ = b.objects("clusters", "Cluster");
        let _ = b.node("count", foreign.all(), |u| u.len());
        assert_eq!(
            b.build().err(),
            Some(BuildError::ForeignHandle {
                node: "count".into(),
                input: 1
            })
        );
    }

    #[test]
    fn refuses_a_handle_to_a_node_not_yet_registered() {
        let mut other = GraphBuilder::new();
        let _ = other.objects("a", "A");
        let later = other.objects("b", "B");
        let mut b = GraphBuilder::new();
        let users = b.objects("users", "User");
        // Forge a handle of this builder to slot 5, which does not exist.
        let dangling: Family<Object> = Family {
            slot: 5,
            builder: b.id,
            _t: PhantomData,
        };
        let _ = later;
        let _ = b.family("f", &users, dangling.all(), |_, _, _| 0);
        assert_eq!(
            b.build().err(),
            Some(BuildError::MissingInput {
                node: "f".into(),
                input: 1
            })
        );
    }

    #[test]
    fn refuses_a_cycle() {
        let mut b = GraphBuilder::new();
        let users = b.objects("users", "User");
        let a = b.family("a", &users, (), |_, _, _| 0u8);
        // Forge the cycle a -> b -> a, impossible with the typed API alone.
        let ahead: Family<u8> = Family {
            slot: 2,
            builder: b.id,
            _t: PhantomData,
        };
        let _ = b.family("b", &users, (a.all(), ahead.all()), |_, _, _| 0u8);
        if let Some(SlotDef {
            kind: SlotKind::Family { inputs, .. },
            ..
        }) = b.slots.get_mut(1)
        {
            inputs.push(InputSpec {
                slot: 2,
                builder: b.id,
                kind: InputKind::All,
            });
        }
        assert!(matches!(b.build().err(), Some(BuildError::Cycle { .. })));
    }

    #[test]
    fn refuses_an_empty_name() {
        let mut b = GraphBuilder::new();
        let _ = b.objects("", "User");
        assert_eq!(b.build().err(), Some(BuildError::EmptyName));
    }
}
