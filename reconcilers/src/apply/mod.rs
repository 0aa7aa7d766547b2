//! The Kubernetes applier of `ichor-controller`: the cluster sink of the one reconcile loop
//! (`ichor_controller_core::cycle`). It takes one evaluation's actions and performs
//! them against the API server, and returns what the server answered so the caller folds it
//! back into the World (`Event::Applied` / `Event::Deleted`) without waiting for the watch.
//!
//! | action | request |
//! |---|---|
//! | apply of an owned object (the trust ConfigMap) | server-side apply, field manager [`FIELD_MANAGER`], `force` |
//! | apply holding only `status` (IchorUser, TalosMachine) | server-side apply on the `/status` subresource, conditioned on the observed resourceVersion |
//! | apply of the webhook configuration (`caBundle` only) | strategic merge patch of each differing webhook's `clientConfig.caBundle`, conditioned on the observed resourceVersion ([`webhook`]) |
//! | delete of an owned object | DELETE with a resourceVersion precondition; 404 is success |
//! | apply of `data` keys of an owned Secret (`keys.json` when keys are dated or dropped) | update (PUT) of the Secret as observed with those keys replaced, conditioned on its resourceVersion |
//! | effects | [`ichor_controller_core::perform::perform`] on a blocking thread; each Secret created (absent) or replaced with the resourceVersion the performer read |
//! | `remove-credentials-key` | GET of the key's `IchorUser` (quorum read; the key is kept, stale, when the user exists and is not being deleted), then JSON merge patch `{"metadata":{"resourceVersion":…},"data":{"<user>":null}}` of `ichor-user-credentials` (when it holds the key), then DELETE of the user's own Secret of the credentials namespace (when observed) with `preconditions: {uid}`, its answer asked for as metadata and never read |
//! | `credentials-layout`, `credentials-sweep`, `retire-legacy-credentials`, `credentials-return`, `recreate-legacy-credentials` | the move off the legacy credentials Secret ([`migration`]) |
//! | `rollout-apply`, `rollout-rollback`, `rollout-probe` | the Talos machine API and `/readyz` of one control plane, recorded in the operation's status ([`rollout`]) |
//!
//! **A 409 is never decided here.** A conditional write the API server refuses because its
//! object changed since it was observed is *stale*: the applier reads again what the write
//! depended on (the object; for a credentials key also its `IchorUser`), hands it back with
//! the report's events and lists the write under [`Report::stale`]; the loop folds what was
//! read and the graph decides again in the next round, with its reason, in the journal. Only a
//! server-side apply with `force` (no precondition) is retried, when a create races another.
//!
//! Safety rules: the spec of an input kind (IchorUser, TalosCluster, TalosMachine,
//! TalosOperation, IchorInstallation, Service) is never written and input objects are never
//! deleted; no message formats Secret data.

mod credentials;
mod effects;
mod error;
pub mod migration;
mod objects;
pub mod resources;
pub mod returning;
pub mod rollout;
pub mod webhook;

pub use error::ApplyError;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ichor_graph::{Action, EffectRequest, Event, Object, ObjectKey, World};
use jiff::Timestamp;
use kube::api::{Api, DynamicObject};
use serde_json::Value;

use error::{Failure, classify, to_value};
use ichor_controller_core::cycle::Report;
use ichor_controller_core::perform::KeyMaterial;
use ichor_controller_core::problem::{Problem, ProblemKind};
use resources::{Resource, observed, resource_for};

/// The field manager of every write of the controller.
pub use ichor_renderers::contract::CONTROLLER_FIELD_MANAGER as FIELD_MANAGER;

/// How conflicts are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all (at least one).
    pub attempts: u32,
    /// Pause before the second attempt; doubled for each further one (capped at 2 s).
    pub backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 5,
            backoff: Duration::from_millis(50),
        }
    }
}

impl RetryPolicy {
    /// The pause before attempt `n` (0-based; none before the first).
    pub fn pause(&self, n: u32) -> Duration {
        if n == 0 {
            return Duration::ZERO;
        }
        let factor = 1u32 << (n - 1).min(16);
        self.backoff.saturating_mul(factor).min(Duration::from_secs(2))
    }
}

/// What one [`KubeApplier::apply`] did: the loop's report, whose problems carry their kind.
pub type ApplyReport = Report;

/// The Kubernetes applier (see the module documentation).
pub struct KubeApplier {
    client: kube::Client,
    namespace: String,
    material: Arc<Mutex<Box<dyn KeyMaterial + Send>>>,
    retry: RetryPolicy,
    clock: fn() -> Timestamp,
    /// Each cluster's Talos credentials as last read (the probes use them while the API server
    /// being restarted cannot be asked).
    talos_credentials: Mutex<std::collections::HashMap<String, Arc<rollout::Credentials>>>,
    /// The least time between two batches of the credentials sweep.
    sweep_interval: Duration,
    /// When the last batch of the sweep started.
    last_sweep: Mutex<Option<std::time::Instant>>,
}

impl std::fmt::Debug for KubeApplier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeApplier")
            .field("namespace", &self.namespace)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl KubeApplier {
    /// An applier writing through `client` into `namespace` (the graph's `ichor-system`),
    /// generating keys with `material`.
    pub fn new(
        client: kube::Client,
        namespace: impl Into<String>,
        material: Box<dyn KeyMaterial + Send>,
    ) -> Self {
        KubeApplier {
            client,
            namespace: namespace.into(),
            material: Arc::new(Mutex::new(material)),
            retry: RetryPolicy::default(),
            clock: Timestamp::now,
            talos_credentials: Mutex::default(),
            sweep_interval: migration::SWEEP_INTERVAL,
            last_sweep: Mutex::default(),
        }
    }

    /// The same applier with another least time between two batches of the credentials sweep
    /// (tests; [`migration::SWEEP_INTERVAL`] by default).
    pub fn with_sweep_interval(mut self, interval: Duration) -> Self {
        self.sweep_interval = interval;
        self
    }

    /// The same applier with another retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = RetryPolicy {
            attempts: retry.attempts.max(1),
            ..retry
        };
        self
    }

    /// The same applier with another clock for `lastTransitionTime` (tests; the default is the
    /// system clock: the applier stamps the time of its write).
    pub fn with_clock(mut self, clock: fn() -> Timestamp) -> Self {
        self.clock = clock;
        self
    }

    fn api(&self, resource: &Resource, namespace: &str) -> Api<DynamicObject> {
        if resource.namespaced {
            let ns = if namespace.is_empty() {
                self.namespace.as_str()
            } else {
                namespace
            };
            Api::namespaced_with(self.client.clone(), ns, &resource.api)
        } else {
            Api::all_with(self.client.clone(), &resource.api)
        }
    }

    fn resource(key: &ObjectKey) -> Result<Resource, ApplyError> {
        resource_for(&key.kind).ok_or_else(|| ApplyError::UnknownKind {
            key: key.clone(),
            kind: key.kind.to_string(),
        })
    }

    /// Applies one evaluation's actions: applies and deletes in order, then the effects as one
    /// batch (the performer needs them together). Returns the objects as the API server
    /// returned them and per-action problems. Never writes any `spec` of an input kind.
    pub async fn apply(&mut self, world: &World, actions: &[Action]) -> ApplyReport {
        let mut report = ApplyReport::default();
        let mut effects: Vec<(&EffectRequest, &Action)> = Vec::new();
        for action in actions {
            let done = match action {
                Action::Apply { object, .. } => self.apply_object(world, object).await,
                Action::Delete { key, .. } => self.delete(world, key).await,
                Action::Effect { request, .. } => {
                    effects.push((request, action));
                    continue;
                }
            };
            match done {
                Ok(Written::Done(event)) => {
                    tracing::info!(action = %action, "applied");
                    report.events.push(event);
                    report.applied.push(action.to_string());
                }
                Ok(Written::Stale(fresh)) => {
                    tracing::info!(action = %action, "stale: the graph decides again from a fresh read");
                    report.events.extend(fresh);
                    report.stale.push(stale_problem(&action.to_string()));
                }
                Err(e) => {
                    tracing::warn!(action = %action, error = %e, "action failed");
                    report
                        .problems
                        .push(Problem::new(e.kind(), format!("{action}: {e}")));
                }
            }
        }
        let (migrating, effects): (Vec<_>, Vec<_>) = effects
            .into_iter()
            .partition(|(request, _)| migration::is_migration_effect(&request.id));
        let (rollout, effects): (Vec<_>, Vec<_>) = effects
            .into_iter()
            .partition(|(request, _)| request.id.starts_with("rollout-"));
        if !effects.is_empty() {
            self.effects(world, &effects, &mut report).await;
        }
        if !rollout.is_empty() {
            let requests: Vec<&EffectRequest> = rollout.iter().map(|(r, _)| *r).collect();
            self.rollout_effects(world, &requests, &mut report).await;
        }
        if !migrating.is_empty() {
            let requests: Vec<&EffectRequest> = migrating.iter().map(|(r, _)| *r).collect();
            self.migration_effects(&requests, &mut report).await;
        }
        report
    }

    /// What a write conditioned on the observed resourceVersion came to: the object as written;
    /// on a conflict, stale, with the object as read again; on 404, its deletion (nothing to
    /// write, and the World learns it).
    async fn conditional(
        &self,
        resource: &Resource,
        object: &Object,
        what: &str,
        result: Result<DynamicObject, kube::Error>,
    ) -> Result<Written, ApplyError> {
        let key = object.key();
        match result {
            Ok(o) => Ok(Written::Done(Event::Applied(observed(
                &key.kind,
                object,
                to_value(what, o)?,
            )))),
            Err(e) => match classify(what, e) {
                Failure::Conflict => Ok(Written::Stale(vec![self.reread(resource, &key).await?])),
                Failure::NotFound => Ok(Written::Done(Event::Deleted(key))),
                other => Err(other.into_error(what)),
            },
        }
    }

    /// Reads `key` again after a conflict: the object as the store holds it now, or its
    /// deletion.
    async fn reread(&self, resource: &Resource, key: &ObjectKey) -> Result<Event, ApplyError> {
        let what = format!("read of {key} after a conflict");
        let fallback = Object::new(&*key.kind, &*key.namespace, &*key.name, Value::Null);
        match self.api(resource, &key.namespace).get_opt(&key.name).await {
            Ok(Some(o)) => Ok(Event::Applied(observed(
                &key.kind,
                &fallback,
                to_value(&what, o)?,
            ))),
            Ok(None) => Ok(Event::Deleted(key.clone())),
            Err(e) => Err(classify(&what, e).into_error(&what)),
        }
    }
}

/// What one write came to.
pub(crate) enum Written {
    /// Made: the object as the store now holds it, or its deletion.
    Done(Event),
    /// Refused because an object changed since it was observed (409): the objects the write
    /// depended on, as read again.
    Stale(Vec<Event>),
}

/// The problem recorded for a stale write of `what`.
fn stale_problem(what: &str) -> Problem {
    Problem::new(
        ProblemKind::Conflict,
        format!("{what}: changed since it was observed; not written, decided again from a fresh read"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_from_the_second_attempt_and_is_capped() {
        let p = RetryPolicy {
            attempts: 5,
            backoff: Duration::from_millis(50),
        };
        let pauses: Vec<u128> = (0..5).map(|n| p.pause(n).as_millis()).collect();
        assert_eq!(pauses, [0, 50, 100, 200, 400]);
        assert_eq!(p.pause(30), Duration::from_secs(2));
    }
}
