//! The reconcile engine of Ichor identity: a memoised DAG of pure nodes over an event-sourced
//! World, a diff of desired against observed objects, a journal and its replay.
//!
//! The engine is generic: it knows objects as `(kind, namespace, name)` plus JSON, never
//! Kubernetes types. The flow is:
//!
//! 1. Events ([`Event`]: applied, deleted, tick) are numbered in a [`journal`] and folded into
//!    a [`World`].
//! 2. A [`Graph`] (built with [`GraphBuilder`]) evaluates pure node functions in topological
//!    order. Each node instance is memoised by the sha256 of its inputs' canonical encoding; an
//!    instance whose inputs did not change is skipped, and so is everything downstream of it.
//!    Families fan out one instance per object key.
//! 3. Nodes marked with [`GraphBuilder::emit`] produce [`Desired`] objects (only the owned
//!    fields) and effect requests; the diff against the World yields [`Action`]s, each with a
//!    [`Reason`] naming the node, the instance and the changed inputs.
//! 4. [`replay`] re-runs a recorded journal offline and lists every decision.
//!
//! # Example
//!
//! ```
//! use ichor_graph::{Action, Desired, Event, GraphBuilder, Object, ObjectKey, World};
//! use serde_json::json;
//!
//! // users → one status object per user; the count of users is a singleton.
//! let mut b = GraphBuilder::new();
//! let users = b.objects("users", "User");
//! let status = b.family("user-status", &users, (), |key: &ObjectKey, user: &Object, _: &()| {
//!     let enabled = user.value["spec"]["enabled"].as_bool().unwrap_or(false);
//!     Desired {
//!         objects: vec![Object::new("UserStatus", &*key.namespace, &*key.name, json!({"ready": enabled}))],
//!         effects: vec![],
//!     }
//! });
//! b.emit(&status);
//! let count = b.node("user-count", users.all(), |all| all.len());
//! let mut graph = b.build()?;
//!
//! let mut world = World::new();
//! world.apply(Event::Applied(Object::new("User", "ns", "alice", json!({"spec": {"enabled": true}}))));
//! let eval = graph.evaluate(&mut world);
//! assert_eq!(graph.output(&count), Some(1));
//! let Action::Apply { object, reason } = &eval.actions[0] else { panic!("an apply") };
//! assert_eq!(object.value, json!({"ready": true}));
//! assert_eq!(reason.to_string(), "user-status[User ns/alice]: initial");
//!
//! // Observing the applied object reaches a fixed point: nothing more to do, nothing recomputed.
//! world.apply(Event::Applied(object.clone()));
//! let eval = graph.evaluate(&mut world);
//! assert!(eval.actions.is_empty());
//! assert_eq!(eval.stats.recomputed, 0);
//! # Ok::<(), ichor_graph::BuildError>(())
//! ```
#![forbid(unsafe_code)]

mod builder;
pub mod canonical;
mod diff;
mod engine;
mod event;
mod inputs;
pub mod journal;
mod keys_only;
mod object;
mod replay;
mod set_digest;
mod stats;
mod world;

pub use builder::{BuildError, Emitter, GraphBuilder, Timed};
pub use canonical::Digest;
pub use diff::{Action, Cause, Desired, EffectRequest, Ownership, Reason, diff, owned_fields_match};
pub use engine::{Conflict, Evaluation, Graph, NodeFailure};
pub use event::{Entry, Event};
pub use inputs::{All, Count, Family, Input, Inputs, Joined, NoPrimary, Node};
pub use journal::{JournalError, JournalReader, JournalWriter, PreparedEntry, Recycler, Redaction};
pub use keys_only::KeysOnly;
pub use object::{Object, ObjectKey};
pub use replay::{ReplayError, ReplayReport, ReplayedAction, replay, replay_in_batches};
pub use stats::{EvalStats, NodeStats};
pub use world::{Prepared, World};

#[doc(hidden)]
pub use inputs::{InputSpec, ReadError, Reader};
