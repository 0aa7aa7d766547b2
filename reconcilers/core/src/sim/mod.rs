//! The simulation driver of the loop: the identity graph driven to its fixed point in tests,
//! golden journals and benchmarks, with a deterministic in-memory store as its sink. NOT the
//! production applier:
//!
//! - an apply merges the desired fields into the observed object and stamps new conditions at
//!   the latest tick ([`crate::memory`], shared with `ichor dev`);
//! - effects are the real performers ([`crate::perform`]) over [`SimKeyMaterial`]: ONE fixed,
//!   public RSA test key (`testdata/rsa2048.pkcs8.pem`) for every signing key and the CA, HMAC
//!   keys derived from their kid — never use them for real; the leaf key is random;
//! - `remove-credentials-key` removes the key from the stored Secret, then deletes the user's own
//!   credentials Secret when its observed uid is the one requested.
//!
//! Every event the simulation makes (inputs and results) is written to a journal, unredacted
//! (test material only), so a simulated run can be replayed; resource versions are a counter.

pub mod fixtures;
pub mod workload;

use std::io::Write;

use async_trait::async_trait;
use ichor_graph::{Action, EffectRequest, Event, JournalError, JournalWriter, ObjectKey, Redaction, World};
use jiff::Timestamp;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::cycle::{Apply, Loop, MAX_ROUNDS, Observe, Report};
use crate::identity::{Controller, RenderChange};
use crate::memory::{ResourceVersions, applied};
use crate::perform::{self, KeyMaterial, KeyMaterialError, Outcome};
use crate::problem::{Problem, ProblemKind};

/// The public test key every simulated RSA key (and the simulated CA) uses.
pub const TEST_RSA_PEM: &str = include_str!("../../testdata/rsa2048.pkcs8.pem");

/// Why the simulation stopped.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The graph did not build.
    #[error("the identity graph did not build: {0}")]
    Build(#[from] ichor_graph::BuildError),
    /// The journal could not be written.
    #[error("the simulation's journal could not be written: {0}")]
    Journal(#[from] JournalError),
    /// An action could not be carried out.
    #[error("{0}")]
    Apply(Problem),
    /// Something the caller asked for could not be done.
    #[error("{0}")]
    Setup(String),
    /// The graph did not reach a fixed point.
    #[error("no fixed point after {0} rounds of feeding actions back")]
    NoFixedPoint(usize),
}

/// A Secret object with the given data (base64-encoded here), as the simulated store holds it.
pub fn secret(name: &str, data: &[(&str, &[u8])], type_: &str) -> ichor_graph::Object {
    perform::SecretData {
        name: name.to_owned(),
        type_: type_.to_owned(),
        data: data.iter().map(|(k, v)| ((*k).to_owned(), v.to_vec())).collect(),
    }
    .to_object()
}

/// Key material for tests: the fixed public RSA test key, HMAC keys derived from their kid.
#[derive(Debug, Clone, Copy, Default)]
pub struct SimKeyMaterial;

impl KeyMaterial for SimKeyMaterial {
    fn rsa_pkcs8_pem(&mut self) -> Result<String, KeyMaterialError> {
        Ok(TEST_RSA_PEM.to_owned())
    }

    fn hmac_secret(&mut self, kid: &str) -> Result<[u8; 32], KeyMaterialError> {
        Ok(Sha256::digest(format!("sim-hmac {kid}")).into())
    }
}

/// The simulation's observer: the actions and render changes decided, and a journal failure.
#[derive(Debug, Default)]
pub struct Recorder {
    actions: Vec<Action>,
    renders: Vec<RenderChange>,
    journal: Option<JournalError>,
}

impl Observe for Recorder {
    fn decided(&mut self, decision: &crate::cycle::Decision) {
        self.actions.extend(decision.actions.iter().cloned());
        self.renders.extend(decision.renders.iter().cloned());
    }

    fn journal_failed(&mut self, error: JournalError) {
        self.journal.get_or_insert(error);
    }
}

/// The simulated store: applies in memory, performs effects with [`SimKeyMaterial`].
#[derive(Debug, Default)]
pub struct MemorySink {
    versions: ResourceVersions,
}

impl MemorySink {
    fn perform(&mut self, world: &World, actions: &[Action]) -> Result<Vec<Event>, Problem> {
        let mut events = Vec::new();
        let mut effects: Vec<&EffectRequest> = Vec::new();
        for action in actions {
            match action {
                Action::Apply { object, .. } => {
                    events.push(self.versions.stamp(Event::Applied(applied(world, object))));
                }
                Action::Delete { key, .. } => events.push(Event::Deleted(key.clone())),
                Action::Effect { request, .. } => effects.push(request),
            }
        }
        if effects.is_empty() {
            return Ok(events);
        }
        let outcomes = perform::perform(world, &effects, &mut SimKeyMaterial)
            .map_err(|e| Problem::new(ProblemKind::Effect, e.to_string()))?;
        for outcome in outcomes {
            match outcome {
                Outcome::Secret(secret) => {
                    events.push(self.versions.stamp(Event::Applied(secret.to_object())));
                }
                Outcome::RemoveCredentialsKey(r) => {
                    let key = ObjectKey::new("Secret", r.namespace.clone(), r.secret.clone());
                    if r.in_legacy
                        && let Some(mut o) = world.get(&key).cloned()
                    {
                        if let Some(data) = o.value.get_mut("data").and_then(Value::as_object_mut) {
                            data.remove(&r.key);
                        }
                        events.push(self.versions.stamp(Event::Applied(o)));
                    }
                    // The user's own Secret after the legacy key, and only the one observed.
                    if let Some(own) = &r.per_user {
                        let key = ObjectKey::new("Secret", own.namespace.clone(), own.name.clone());
                        let observed_uid = world
                            .get(&key)
                            .and_then(|o| o.value.get("metadata")?.get("uid")?.as_str());
                        if own.uid.is_some() && observed_uid == own.uid.as_deref() {
                            events.push(Event::Deleted(key));
                        }
                    }
                }
            }
        }
        Ok(events)
    }
}

#[async_trait]
impl Apply for MemorySink {
    async fn apply(&mut self, world: &World, actions: &[Action]) -> Report {
        match self.perform(world, actions) {
            Ok(events) => Report {
                applied: actions.iter().map(ToString::to_string).collect(),
                events,
                ..Report::default()
            },
            Err(problem) => Report {
                problems: vec![problem],
                ..Report::default()
            },
        }
    }
}

/// A simulated controller: the loop, the in-memory store, and the journal of everything.
pub struct Sim<W: Write> {
    lp: Loop<Recorder, W>,
    sink: MemorySink,
    /// Every action decided so far, in order.
    pub actions: Vec<Action>,
    /// Every render change so far, in order.
    pub renders: Vec<RenderChange>,
    /// Whether to keep actions and renders (off for long benchmark journals).
    pub record: bool,
}

impl<W: Write> Sim<W> {
    /// A simulation writing its journal (unredacted: test material only) to `out`.
    ///
    /// # Errors
    /// The graph did not build.
    pub fn new(out: W) -> Result<Self, SimError> {
        let journal = JournalWriter::with_redaction(out, Redaction::none());
        let mut sim = Sim {
            lp: Loop::sole_writer(Controller::new()?, Some(journal), Recorder::default()),
            sink: MemorySink::default(),
            actions: Vec::new(),
            renders: Vec::new(),
            record: true,
        };
        // The simulated cluster answers every list: the credentials Secrets' watcher says so.
        sim.push(Event::Applied(
            crate::identity::project::credentials_secrets_listed(),
        ))?;
        Ok(sim)
    }

    /// The controller.
    pub fn controller(&self) -> &Controller {
        self.lp.controller()
    }

    /// The controller, to evaluate by hand (tests, benchmarks).
    pub fn controller_mut(&mut self) -> &mut Controller {
        self.lp.controller_mut()
    }

    /// The journal writer's output.
    ///
    /// # Errors
    /// The journal failed earlier (it was closed then).
    pub fn into_journal(mut self) -> Result<W, SimError> {
        self.check()?;
        self.lp
            .take_journal()
            .map(JournalWriter::into_inner)
            .ok_or_else(|| SimError::Setup("the journal was closed".to_owned()))
    }

    /// Flushes the journal.
    ///
    /// # Errors
    /// The writer failed.
    pub fn flush(&mut self) -> Result<(), SimError> {
        self.lp.flush();
        self.check()
    }

    fn check(&mut self) -> Result<(), SimError> {
        let recorder = self.lp.observer_mut();
        let actions = std::mem::take(&mut recorder.actions);
        let renders = std::mem::take(&mut recorder.renders);
        if let Some(e) = recorder.journal.take() {
            return Err(SimError::Journal(e));
        }
        if self.record {
            self.actions.extend(actions);
            self.renders.extend(renders);
        }
        Ok(())
    }

    /// The sequence number of the last event journaled.
    pub fn journal_seq(&self) -> Option<u64> {
        self.lp.journal_seq()
    }

    /// Journals and folds one event without evaluating. Applied objects get a new resource
    /// version.
    ///
    /// # Errors
    /// The journal could not be written.
    pub fn push(&mut self, event: Event) -> Result<(), SimError> {
        let event = self.sink.versions.stamp(event);
        self.lp.push(event);
        self.check()
    }

    /// A new simulation, writing to `out`, whose journal starts with every object of this one's
    /// World (derived objects excluded) and a tick at its `now`, then settles. Used to start a
    /// golden journal from a settled installation.
    ///
    /// # Errors
    /// As [`Sim::step`].
    pub fn fork<W2: Write>(&self, out: W2) -> Result<Sim<W2>, SimError> {
        let mut next = Sim::new(out)?;
        next.sink.versions = self.sink.versions;
        for o in self.controller().world().iter() {
            if o.kind != crate::identity::CREDENTIALS_KEY_KIND {
                next.push(Event::Applied(o.clone()))?;
            }
        }
        if let Some(now) = self.controller().world().now() {
            next.push(Event::Tick(now))?;
        }
        next.settle()?;
        Ok(next)
    }

    /// Evaluates once and returns the actions (recording them).
    pub fn evaluate(&mut self) -> Vec<Action> {
        let actions = self.lp.decide();
        let _ = self.check();
        actions
    }

    /// Pushes one event, then evaluates and feeds actions back until nothing is left to do.
    ///
    /// # Errors
    /// The journal failed, an effect failed, or there was no fixed point.
    pub fn step(&mut self, event: Event) -> Result<(), SimError> {
        self.push(event)?;
        self.settle()
    }

    /// Evaluates and feeds actions back until an evaluation decides nothing.
    ///
    /// # Errors
    /// An effect failed, or there was no fixed point after [`MAX_ROUNDS`].
    pub fn settle(&mut self) -> Result<(), SimError> {
        let report = self.lp.settle_now(&mut self.sink);
        self.check()?;
        if let Some(problem) = report.problems.into_iter().next() {
            return Err(SimError::Apply(problem));
        }
        if !report.settled {
            return Err(SimError::NoFixedPoint(MAX_ROUNDS));
        }
        Ok(())
    }

    /// Ticks at every deadline before `until`, settling after each, then at `until`.
    ///
    /// # Errors
    /// As [`Sim::step`].
    pub fn run_until(&mut self, until: Timestamp) -> Result<(), SimError> {
        loop {
            let now = self.controller().world().now();
            match self.controller().graph().next_deadline(now) {
                Some(d) if d < until && now.is_none_or(|n| d > n) => self.step(Event::Tick(d))?,
                _ => break,
            }
        }
        self.step(Event::Tick(until))
    }

    /// Performs actions as the sink would, journaling the results.
    ///
    /// # Errors
    /// An action could not be carried out.
    pub fn perform(&mut self, actions: &[Action]) -> Result<(), SimError> {
        let events = self
            .sink
            .perform(self.lp.world(), actions)
            .map_err(SimError::Apply)?;
        self.lp.ingest(events);
        self.check()
    }
}
