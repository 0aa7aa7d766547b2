//! `ichor dev`'s driver of the one reconcile loop (`ichor_controller_core::cycle`): the same identity
//! graph as in a cluster, over a directory of manifests instead of the Kubernetes API.
//!
//! # Source
//! - The GitOps tree (`IchorUser`, `IchorInstallation`, `TalosCluster`, `TalosMachine` YAML,
//!   read with [`ichor_server::manifest_files::load_dir`]), re-read on every [`LocalController::tick`]
//!   and diffed against the previous read, so an edit takes effect without a restart. A tree
//!   that does not parse keeps the previous objects (one bad save must not delete every user)
//!   and the problems are reported. Objects without a namespace are placed in `ichor-system`.
//! - The produced Secrets ([`files`]), the user names of the issuer local store's credentials
//!   file and the synthesised issuer Service ([`source`]).
//!
//! # Sink
//! Effects are performed by `ichor_controller_core::perform`; produced Secrets are written as files and
//! fed back as `Applied` events with a new resourceVersion, until an evaluation decides nothing.
//! A change of data keys of a produced Secret (`keys.json` when keys are dated or dropped) is
//! written to its files too. Status writes to `IchorUser` and `TalosMachine` and the trust
//! ConfigMap are kept in memory
//! (reported, never written into the user's GitOps files). `remove-credentials-key` is handed to
//! the caller's [`CredentialsRemover`] (the issuer's store owns that file and its lock).

pub mod files;
pub mod source;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;

use async_trait::async_trait;
use ichor_controller_core::cycle::{Apply, Decision, Loop, Observe, Report};
use ichor_controller_core::identity::Controller;
use ichor_controller_core::identity::conditions::stamp_transition_times;
use ichor_controller_core::identity::effects::RemoveCredentialsKeyRequest;
use ichor_controller_core::identity::nodes::users_fallback_object;
use ichor_controller_core::identity::project::credentials_secrets_listed;
use ichor_controller_core::memory::{ResourceVersions, applied, merge_into};
use ichor_controller_core::perform::{self, KeyMaterial, Outcome, SecretData};
use ichor_controller_core::problem::{Problem, ProblemKind};
use ichor_graph::{Action, EffectRequest, Event, Object, ObjectKey, World};
use ichor_renderers::crd::UsersSettings;
use ichor_renderers::manifest::ManifestErrors;
use ichor_server::manifest_files::load_dir;
use jiff::Timestamp;
use serde_json::{Value, json};

pub use files::{SecretFiles, stored_secret_names};
pub use source::{
    ISSUER_SERVICE_IP, ISSUER_SERVICE_NAME, credentials_secret, credentials_users, issuer_service,
    manifest_objects,
};

/// Why the local controller could not start or write.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// The identity graph did not build (a bug).
    #[error("the identity graph did not build: {0}")]
    Build(#[from] ichor_graph::BuildError),
    /// A Secret file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The operating system's reason.
        #[source]
        source: io::Error,
    },
    /// A Secret key cannot be a file name.
    #[error("Secret {secret}: key {key:?} cannot be stored as a file (use letters, digits, '-', '_', '.')")]
    BadKey {
        /// The Secret.
        secret: String,
        /// The key.
        key: String,
    },
}

/// Removes a user's credentials entry for the graph's garbage collection.
pub trait CredentialsRemover: Send {
    /// Removes the entry of `request.key` (absent is fine).
    ///
    /// # Errors
    /// Why it could not be removed (the graph asks again on a later tick).
    fn remove(&mut self, request: &RemoveCredentialsKeyRequest) -> Result<(), String>;
}

/// What one [`LocalController::tick`] did, for the log.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TickReport {
    /// Source events folded (manifest and credentials changes).
    pub events: usize,
    /// Every action decided, as text (`apply …`, `effect …`), with its reason.
    pub actions: Vec<String>,
    /// Problems: a manifest tree that does not parse, a failed effect or write, a node failure.
    pub problems: Vec<String>,
    /// Secrets written (names).
    pub secrets_written: Vec<String>,
    /// Whether an evaluation decided nothing within the loop's round limit.
    pub settled: bool,
}

/// Where the local controller reads and writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPaths {
    /// The GitOps tree of manifests.
    pub manifests: PathBuf,
    /// The Secrets directory (`<dir>/<name>/<key>`).
    pub secrets: PathBuf,
    /// The issuer local store's credentials file.
    pub credentials: PathBuf,
}

/// The loop's observer: node failures, for the tick's problems.
#[derive(Debug, Default)]
struct Failures(Vec<String>);

impl Observe for Failures {
    fn decided(&mut self, decision: &Decision) {
        self.0
            .extend(decision.failures.iter().map(|f| format!("node failure: {f:?}")));
    }
}

/// The local files: the source the World is read from and the sink actions go to.
struct LocalStore {
    paths: LocalPaths,
    secrets: SecretFiles,
    material: Box<dyn KeyMaterial + Send>,
    remover: Box<dyn CredentialsRemover>,
    /// Objects read from the manifest tree (without in-memory status).
    manifests: BTreeMap<ObjectKey, Object>,
    /// Status writes kept in memory, per object.
    statuses: BTreeMap<ObjectKey, Value>,
    credentials: Option<Vec<String>>,
    versions: ResourceVersions,
    /// Secrets written since the last tick began.
    written: Vec<String>,
}

impl LocalStore {
    /// The object as the World should see it: the file's content with the in-memory status.
    fn with_status(&self, mut object: Object) -> Object {
        if let Some(status) = self.statuses.get(&object.key())
            && let Some(map) = object.value.as_object_mut()
        {
            map.insert("status".to_owned(), status.clone());
        }
        object
    }

    /// Re-reads the manifest tree; the events of what changed go to `events`.
    fn poll_manifests(&mut self, events: &mut Vec<Event>, problems: &mut Vec<String>) {
        let manifests = match load_dir(&self.paths.manifests) {
            Ok(m) => m,
            Err(ManifestErrors(errors)) => {
                problems.extend(
                    errors
                        .iter()
                        .map(|e| format!("{e} (the previous manifests stay in effect)")),
                );
                return;
            }
        };
        let now: BTreeMap<ObjectKey, Object> = manifest_objects(&manifests)
            .into_iter()
            .map(|o| (o.key(), o))
            .collect();
        let gone: Vec<ObjectKey> = self
            .manifests
            .keys()
            .filter(|k| !now.contains_key(*k))
            .cloned()
            .collect();
        for key in gone {
            self.manifests.remove(&key);
            self.statuses.remove(&key);
            events.push(Event::Deleted(key));
        }
        for (key, object) in now {
            if self.manifests.get(&key).is_some_and(|o| o.value == object.value) {
                continue;
            }
            self.manifests.insert(key, object.clone());
            let merged = self.with_status(object);
            events.push(self.versions.stamp(Event::Applied(merged)));
        }
    }

    /// Re-reads the credentials file's user names; an event when they changed.
    fn poll_credentials(&mut self, events: &mut Vec<Event>) {
        let users = credentials_users(&self.paths.credentials);
        if users == self.credentials {
            return;
        }
        self.credentials = users.clone();
        if let Some(users) = users {
            events.push(self.versions.stamp(Event::Applied(credentials_secret(&users))));
        }
    }

    /// Keeps a status write of a manifest object in memory; the object with it, to fold.
    fn write_status(&mut self, world: &World, desired: &Object) -> Object {
        let key = desired.key();
        let now = world.now().unwrap_or(Timestamp::UNIX_EPOCH);
        let mut stamped = desired.value.clone();
        stamp_transition_times(&mut stamped, now);
        let mut status = self.statuses.get(&key).cloned().unwrap_or_else(|| json!({}));
        if let Some(new) = stamped.get("status") {
            merge_into(&mut status, new);
        }
        self.statuses.insert(key.clone(), status);
        let base = self
            .manifests
            .get(&key)
            .cloned()
            .unwrap_or_else(|| desired.clone());
        self.with_status(base)
    }

    /// Writes a produced Secret, as merged in memory, to its files.
    fn write_secret_object(&mut self, object: &Object) -> Result<(), Problem> {
        let secret = SecretData::from_object(object).ok_or_else(|| {
            Problem::new(
                ProblemKind::Other,
                format!("Secret {}: its data is not base64; not written", object.name),
            )
        })?;
        self.secrets
            .write(&secret)
            .map_err(|e| Problem::new(ProblemKind::Other, e.to_string()))?;
        self.written.push(secret.name);
        Ok(())
    }

    /// Carries out one evaluation's actions; the events of what was written go to `events`.
    fn carry_out(
        &mut self,
        world: &World,
        actions: &[Action],
        events: &mut Vec<Event>,
    ) -> Result<(), Problem> {
        let mut effects: Vec<&EffectRequest> = Vec::new();
        for action in actions {
            match action {
                Action::Apply { object, .. } => {
                    let object = if object.value.get("status").is_some()
                        && self.manifests.contains_key(&object.key())
                    {
                        self.write_status(world, object)
                    } else {
                        applied(world, object)
                    };
                    if &*object.kind == "Secret" {
                        // A change of data keys of a produced Secret (`keys.json` when keys are
                        // dated or dropped) goes to its files, where the issuer reads it.
                        self.write_secret_object(&object)?;
                    }
                    events.push(self.versions.stamp(Event::Applied(object)));
                }
                Action::Delete { key, .. } => events.push(Event::Deleted(key.clone())),
                Action::Effect { request, .. } => effects.push(request),
            }
        }
        if effects.is_empty() {
            return Ok(());
        }
        let outcomes = perform::perform(world, &effects, self.material.as_mut())
            .map_err(|e| Problem::new(ProblemKind::Effect, e.to_string()))?;
        for outcome in outcomes {
            match outcome {
                Outcome::Secret(secret) => {
                    self.secrets
                        .write(&secret)
                        .map_err(|e| Problem::new(ProblemKind::Other, e.to_string()))?;
                    self.written.push(secret.name.clone());
                    events.push(self.versions.stamp(Event::Applied(secret.to_object())));
                }
                Outcome::RemoveCredentialsKey(r) => {
                    self.remover
                        .remove(&r)
                        .map_err(|e| Problem::new(ProblemKind::Other, e))?;
                    self.poll_credentials(events);
                }
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Apply for LocalStore {
    async fn apply(&mut self, world: &World, actions: &[Action]) -> Report {
        let mut events = Vec::new();
        let problems = match self.carry_out(world, actions, &mut events) {
            Ok(()) => Vec::new(),
            Err(problem) => vec![problem],
        };
        Report {
            applied: actions.iter().map(ToString::to_string).collect(),
            events,
            problems,
            stale: Vec::new(),
        }
    }
}

/// The identity graph over local files: the loop with the local source and sink.
pub struct LocalController {
    lp: Loop<Failures>,
    store: LocalStore,
}

impl LocalController {
    /// A controller over `paths`, generating keys with `material` and removing credentials
    /// entries with `remover`. Reads the stored Secrets and the synthesised Service; the tree is
    /// read by the first [`LocalController::tick`].
    ///
    /// # Errors
    /// The graph did not build, or the Secrets directory cannot be read.
    pub fn new(
        paths: LocalPaths,
        material: Box<dyn KeyMaterial + Send>,
        remover: Box<dyn CredentialsRemover>,
    ) -> Result<Self, LocalError> {
        let secrets = SecretFiles::new(&paths.secrets);
        let mut store = LocalStore {
            paths,
            secrets,
            material,
            remover,
            manifests: BTreeMap::new(),
            statuses: BTreeMap::new(),
            credentials: None,
            versions: ResourceVersions::default(),
            written: Vec::new(),
        };
        // The credentials file is read whole: its users' credentials are listed, always.
        let mut events = vec![
            store.versions.stamp(Event::Applied(issuer_service())),
            store.versions.stamp(Event::Applied(credentials_secrets_listed())),
        ];
        for secret in store.secrets.read_all()? {
            events.push(store.versions.stamp(Event::Applied(secret.to_object())));
        }
        let mut lp = Loop::sole_writer(Controller::new()?, None, Failures::default());
        lp.ingest(events);
        Ok(LocalController { lp, store })
    }

    /// Tells the key timeline the token TTL and refresh lifetime the issuer beside it uses when
    /// no `IchorInstallation` sets them (its flags), so no key is dropped while a token it
    /// signed may still be presented.
    pub fn with_users_fallback(mut self, fallback: &UsersSettings) -> Self {
        self.lp.ingest([Event::Applied(users_fallback_object(fallback))]);
        self
    }

    /// The graph and its World (reports, tests).
    pub fn controller(&self) -> &Controller {
        self.lp.controller()
    }

    /// Where Secret `name` is stored.
    pub fn secret_dir(&self, name: &str) -> PathBuf {
        self.store.secrets.dir_of(name)
    }

    /// Reads the sources, folds their changes and `now`, then evaluates and applies until the
    /// graph decides nothing (at most the loop's round limit).
    pub fn tick(&mut self, now: Timestamp) -> TickReport {
        let mut report = TickReport::default();
        let mut events = Vec::new();
        // Credentials before manifests: the API writes a new user's manifest before its
        // credentials entry, so an entry read here has its user in the manifests read next. The
        // other order can read the entry without the user, and the graph would remove it.
        self.store.poll_credentials(&mut events);
        self.store.poll_manifests(&mut events, &mut report.problems);
        report.events = events.len();
        self.lp.ingest(events);
        self.lp.tick(now);
        let cycle = self.lp.settle_now(&mut self.store);
        report
            .problems
            .extend(std::mem::take(&mut self.lp.observer_mut().0));
        report
            .problems
            .extend(cycle.problems.iter().map(ToString::to_string));
        report.actions = cycle.actions;
        report.settled = cycle.settled;
        report.secrets_written = std::mem::take(&mut self.store.written);
        report
    }
}
