//! The Kubernetes applier of `ichor-controller`: the cluster sink of the one reconcile loop
//! (`ichor_reconcile::cycle`). It takes one evaluation's actions and performs
//! them against the API server, and returns what the server answered so the caller folds it
//! back into the World (`Event::Applied` / `Event::Deleted`) without waiting for the watch.
//!
//! | action | request |
//! |---|---|
//! | apply of an owned object (the trust ConfigMap) | server-side apply, field manager [`FIELD_MANAGER`], `force` |
//! | apply holding only `status` (IchorUser, TalosMachine) | server-side apply on the `/status` subresource, conditioned on the observed resourceVersion; on 409 re-read, rebase ([`status::rebase_status`]), retry |
//! | delete of an owned object | DELETE with a resourceVersion precondition; 404 is success |
//! | effects | [`ichor_reconcile::perform::perform`] on a blocking thread; each Secret created (absent) or replaced with the resourceVersion the performer read; a 409 is *not* retried (another writer won; the next evaluation decides from fresh state) |
//! | `remove-credentials-key` | JSON merge patch `{"metadata":{"resourceVersion":…},"data":{"<user>":null}}` of `ichor-user-credentials`; on 409 re-read (key gone → done; user back → leave it) and retry |
//!
//! Safety rules: the spec of an input kind (IchorUser, TalosCluster, TalosMachine,
//! TalosOperation, IchorInstallation, Service) is never written and input objects are never
//! deleted; no message formats Secret data. The submodule [`webhook`] keeps the admission
//! webhook's serving certificate and the `caBundle` of its configuration in step.

pub mod resources;
pub mod status;
pub mod webhook;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ichor_graph::{Action, EffectRequest, Event, Object, ObjectKey, World};
use jiff::Timestamp;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions};
use kube::core::Status;
use serde_json::{Value, json};

use ichor_reconcile::cycle::Report;
use ichor_reconcile::identity::conditions::stamp_transition_times;
use ichor_reconcile::identity::effects::RemoveCredentialsKeyRequest;
use ichor_reconcile::perform::{self, KeyMaterial, Outcome, PerformError, SecretData};
use ichor_reconcile::problem::{Problem, ProblemKind};
use resources::{Resource, apply_body, is_status_write, observed, resource_for};

/// The field manager of every write of the controller.
pub const FIELD_MANAGER: &str = "ichor-controller";

/// Why one action (or one write of it) failed. Messages name the object and never hold Secret
/// data.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The graph named a kind this applier has no API resource for.
    #[error("{key}: kind {kind:?} has no known API resource; this applier is older than the graph")]
    UnknownKind {
        /// The object.
        key: ObjectKey,
        /// Its kind.
        kind: String,
    },
    /// A desired object of an input kind holds more than `status`.
    #[error(
        "{key}: the controller never writes the spec of an input kind; only a status-only object \
         may be applied to it (a bug of the graph)"
    )]
    SpecOfInput {
        /// The object.
        key: ObjectKey,
    },
    /// The graph asked to delete an object of an input kind.
    #[error("{key}: the controller never deletes an object of an input kind (a bug of the graph)")]
    DeleteOfInput {
        /// The object.
        key: ObjectKey,
    },
    /// The API server refused a request.
    #[error("{what}: the API server answered {code} {reason}: {message}")]
    Api {
        /// The request (`server-side apply of ConfigMap ichor-system/ichor-oidc-trust`).
        what: String,
        /// HTTP status code.
        code: u16,
        /// Kubernetes reason (`Forbidden`, `Invalid`, …).
        reason: String,
        /// The server's message.
        message: String,
    },
    /// The request did not reach the API server or its answer did not decode.
    #[error("{what}: {message}")]
    Transport {
        /// The request.
        what: String,
        /// The client's message.
        message: String,
    },
    /// Every attempt met a conflict.
    #[error(
        "{what}: still conflicting after {attempts} attempts from fresh reads; the next evaluation retries"
    )]
    Conflict {
        /// The request.
        what: String,
        /// Attempts made.
        attempts: u32,
    },
    /// An effect's Secret changed after the performer read it: the write was not made.
    #[error(
        "Secret {name}: changed since the effect read it at resourceVersion {read:?}; not overwritten, \
         the next evaluation decides from the fresh state"
    )]
    Stale {
        /// The Secret.
        name: String,
        /// The version the performer read (`None`: it was absent).
        read: Option<String>,
    },
    /// The World holds an object without a resourceVersion, so no conditional write is possible.
    #[error("{key}: no resourceVersion observed, so it cannot be written conditionally; wait for the watch")]
    NoResourceVersion {
        /// The object.
        key: ObjectKey,
    },
    /// An effect could not be performed.
    #[error(transparent)]
    Perform(#[from] PerformError),
    /// The blocking task performing effects failed.
    #[error("the effect performer's thread failed: {0}")]
    Task(String),
    /// A desired or returned object is not what the API expects.
    #[error("{what}: {message}")]
    Malformed {
        /// The object.
        what: String,
        /// What is wrong.
        message: String,
    },
}

impl ApplyError {
    /// The kind of this failure, for the loop and the `kind` label of
    /// `ichor_controller_apply_problems_total`.
    pub fn kind(&self) -> ProblemKind {
        match self {
            ApplyError::Api { code, .. } => ProblemKind::of_status(*code),
            ApplyError::Transport { .. } => ProblemKind::Unavailable,
            ApplyError::Conflict { .. } | ApplyError::Stale { .. } => ProblemKind::Conflict,
            ApplyError::Perform(PerformError::Stale { .. }) => ProblemKind::Conflict,
            ApplyError::Perform(_) | ApplyError::Task(_) => ProblemKind::Effect,
            ApplyError::UnknownKind { .. }
            | ApplyError::SpecOfInput { .. }
            | ApplyError::DeleteOfInput { .. }
            | ApplyError::NoResourceVersion { .. }
            | ApplyError::Malformed { .. } => ProblemKind::Other,
        }
    }

    /// This failure as a problem of the loop's report.
    pub fn problem(&self) -> Problem {
        Problem::new(self.kind(), self.to_string())
    }
}

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
}

impl std::fmt::Debug for KubeApplier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeApplier")
            .field("namespace", &self.namespace)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// A kube client error, sorted by what the applier does about it.
enum Failure {
    /// 409 `Conflict` (a resourceVersion precondition failed).
    Conflict,
    /// 409 `AlreadyExists` (a create lost a race).
    AlreadyExists,
    /// 404.
    NotFound,
    /// Anything else.
    Other(ApplyError),
}

fn api_status(e: &kube::Error) -> Option<&Status> {
    match e {
        kube::Error::Api(s) => Some(s),
        _ => None,
    }
}

fn classify(what: &str, e: kube::Error) -> Failure {
    match api_status(&e) {
        Some(s) if s.code == 409 && s.reason == "AlreadyExists" => Failure::AlreadyExists,
        Some(s) if s.code == 409 => Failure::Conflict,
        Some(s) if s.code == 404 => Failure::NotFound,
        Some(s) => Failure::Other(ApplyError::Api {
            what: what.to_owned(),
            code: s.code,
            reason: s.reason.clone(),
            message: s.message.clone(),
        }),
        None => Failure::Other(ApplyError::Transport {
            what: what.to_owned(),
            message: e.to_string(),
        }),
    }
}

impl Failure {
    /// The failure as an error (for the cases the caller does not handle).
    fn into_error(self, what: &str) -> ApplyError {
        let api = |code: u16, reason: &str| ApplyError::Api {
            what: what.to_owned(),
            code,
            reason: reason.to_owned(),
            message: String::new(),
        };
        match self {
            Failure::Conflict => api(409, "Conflict"),
            Failure::AlreadyExists => api(409, "AlreadyExists"),
            Failure::NotFound => api(404, "NotFound"),
            Failure::Other(e) => e,
        }
    }
}

fn to_value(what: &str, o: DynamicObject) -> Result<Value, ApplyError> {
    serde_json::to_value(o).map_err(|e| ApplyError::Malformed {
        what: what.to_owned(),
        message: e.to_string(),
    })
}

fn to_dynamic(what: &str, v: Value) -> Result<DynamicObject, ApplyError> {
    serde_json::from_value(v).map_err(|e| ApplyError::Malformed {
        what: what.to_owned(),
        message: e.to_string(),
    })
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
        }
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
                Ok(event) => {
                    tracing::info!(action = %action, "applied");
                    report.events.push(event);
                    report.applied.push(action.to_string());
                }
                Err(e) => {
                    tracing::warn!(action = %action, error = %e, "action failed");
                    report
                        .problems
                        .push(Problem::new(e.kind(), format!("{action}: {e}")));
                }
            }
        }
        if !effects.is_empty() {
            self.effects(world, &effects, &mut report).await;
        }
        report
    }

    async fn apply_object(&self, world: &World, object: &Object) -> Result<Event, ApplyError> {
        let key = object.key();
        let resource = Self::resource(&key)?;
        if is_status_write(&object.value) {
            return self.write_status(world, object, &resource).await;
        }
        if resource.input {
            return Err(ApplyError::SpecOfInput { key });
        }
        let what = format!("server-side apply of {key}");
        let api = self.api(&resource, &object.namespace);
        let body = apply_body(object, &resource);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        for attempt in 0..self.retry.attempts {
            tokio::time::sleep(self.retry.pause(attempt)).await;
            match api.patch(&object.name, &params, &Patch::Apply(&body)).await {
                Ok(o) => return Ok(Event::Applied(observed(&key.kind, object, to_value(&what, o)?))),
                Err(e) => match classify(&what, e) {
                    // A create racing another: the next apply meets the object and merges.
                    Failure::Conflict | Failure::AlreadyExists => continue,
                    other => return Err(other.into_error(&what)),
                },
            }
        }
        Err(ApplyError::Conflict {
            what,
            attempts: self.retry.attempts,
        })
    }

    /// A status-only apply on the `/status` subresource, conditioned on the resourceVersion the
    /// graph observed; on conflict, re-read and rebase.
    async fn write_status(
        &self,
        world: &World,
        object: &Object,
        resource: &Resource,
    ) -> Result<Event, ApplyError> {
        let key = object.key();
        let what = format!("status write of {key}");
        let seen = world.get(&key);
        let old_status = seen.and_then(|o| o.value.get("status")).cloned();
        let mut desired = json!({ "status": object.value.get("status").cloned().unwrap_or(Value::Null) });
        stamp_transition_times(&mut desired, (self.clock)());
        let desired_status = desired.get("status").cloned().unwrap_or(Value::Null);
        let mut status = desired_status.clone();
        let mut rv = seen.and_then(|o| o.resource_version.clone());
        let api = self.api(resource, &object.namespace);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        for attempt in 0..self.retry.attempts {
            tokio::time::sleep(self.retry.pause(attempt)).await;
            let mut meta = json!({"name": object.name});
            if resource.namespaced {
                meta["namespace"] = json!(object.namespace);
            }
            if let Some(rv) = &rv {
                meta["resourceVersion"] = json!(rv);
            }
            let body = json!({"apiVersion": resource.api.api_version, "kind": resource.api.kind,
                "metadata": meta, "status": status});
            match api
                .patch_status(&object.name, &params, &Patch::Apply(&body))
                .await
            {
                Ok(o) => return Ok(Event::Applied(observed(&key.kind, object, to_value(&what, o)?))),
                Err(e) => match classify(&what, e) {
                    Failure::Conflict if attempt + 1 == self.retry.attempts => break,
                    Failure::Conflict => {
                        let fresh = match api.get_opt(&object.name).await {
                            Ok(Some(o)) => observed(&key.kind, object, to_value(&what, o)?),
                            Ok(None) => return Ok(Event::Deleted(key)),
                            Err(e) => return Err(classify(&what, e).into_error(&what)),
                        };
                        status = status::rebase_status(
                            old_status.as_ref(),
                            &desired_status,
                            fresh.value.get("status"),
                        );
                        rv = fresh.resource_version;
                    }
                    // The object is gone: nothing to write, and the World learns it.
                    Failure::NotFound => return Ok(Event::Deleted(key)),
                    other => return Err(other.into_error(&what)),
                },
            }
        }
        Err(ApplyError::Conflict {
            what,
            attempts: self.retry.attempts,
        })
    }

    async fn delete(&self, world: &World, key: &ObjectKey) -> Result<Event, ApplyError> {
        let resource = Self::resource(key)?;
        if resource.input {
            return Err(ApplyError::DeleteOfInput { key: key.clone() });
        }
        let what = format!("delete of {key}");
        let rv = world.get(key).and_then(|o| o.resource_version.clone());
        let params = DeleteParams {
            preconditions: rv.map(|rv| Preconditions {
                resource_version: Some(rv),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        match self
            .api(&resource, &key.namespace)
            .delete(&key.name, &params)
            .await
        {
            Ok(_) => Ok(Event::Deleted(key.clone())),
            Err(e) => match classify(&what, e) {
                Failure::NotFound => Ok(Event::Deleted(key.clone())),
                Failure::Conflict => Err(ApplyError::Api {
                    what,
                    code: 409,
                    reason: "Conflict".into(),
                    message: "the object changed since it was observed; the next evaluation decides".into(),
                }),
                other => Err(other.into_error(&what)),
            },
        }
    }

    /// Performs the effects on a blocking thread, then writes what they produced.
    async fn effects(&self, world: &World, effects: &[(&EffectRequest, &Action)], report: &mut ApplyReport) {
        let requests: Vec<EffectRequest> = effects.iter().map(|(r, _)| (*r).clone()).collect();
        let snapshot = world.clone();
        let material = Arc::clone(&self.material);
        let performed = tokio::task::spawn_blocking(move || {
            let refs: Vec<&EffectRequest> = requests.iter().collect();
            let mut guard = material.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            perform::perform(&snapshot, &refs, guard.as_mut())
        })
        .await;
        let outcomes = match performed {
            Ok(Ok(outcomes)) => outcomes,
            Ok(Err(e)) => {
                report.problems.push(ApplyError::Perform(e).problem());
                return;
            }
            Err(e) => {
                report.problems.push(ApplyError::Task(e.to_string()).problem());
                return;
            }
        };
        let mut failed = false;
        let mut secrets_blocked = false;
        for outcome in outcomes {
            let written = match outcome {
                // A Secret after a refused one is not written: a leaf signed by a CA that lost
                // its write would be signed by a CA nobody trusts.
                Outcome::Secret(secret) if secrets_blocked => {
                    report.problems.push(Problem::new(
                        ProblemKind::Effect,
                        format!(
                            "Secret {}: not written, an earlier write of the same effects failed",
                            secret.name
                        ),
                    ));
                    failed = true;
                    continue;
                }
                Outcome::Secret(secret) => {
                    let r = self.write_secret(world, &secret).await;
                    secrets_blocked |= r.is_err();
                    r
                }
                Outcome::RemoveCredentialsKey(r) => self.remove_credentials_key(world, &r).await,
            };
            match written {
                Ok(event) => report.events.push(event),
                Err(e) => {
                    failed = true;
                    report.problems.push(e.problem());
                }
            }
        }
        if failed {
            tracing::warn!(
                effects = effects.len(),
                "effects not all written; the next evaluation asks again"
            );
        } else {
            for (_, action) in effects {
                tracing::info!(action = %action, "performed");
                report.applied.push(action.to_string());
            }
        }
    }

    /// Writes one performed Secret whole: created when the performer saw none, else replaced
    /// with the resourceVersion it read. A conflict is reported, never retried.
    async fn write_secret(&self, world: &World, secret: &SecretData) -> Result<Event, ApplyError> {
        let desired = secret.to_object();
        let key = desired.key();
        let what = format!("write of Secret {}/{}", self.namespace, secret.name);
        let resource = Self::resource(&key)?;
        let api = self.api(&resource, &self.namespace);
        let seen = world.get(&key);
        let read = seen.and_then(|o| o.resource_version.clone());
        let stale = || ApplyError::Stale {
            name: secret.name.clone(),
            read: read.clone(),
        };
        let result = match seen {
            None => {
                let mut body = desired.value.clone();
                body["metadata"]["namespace"] = json!(self.namespace);
                api.create(&PostParams::default(), &to_dynamic(&what, body)?)
                    .await
            }
            Some(seen) => {
                let Some(rv) = &read else {
                    return Err(ApplyError::NoResourceVersion { key });
                };
                let mut body = seen.value.clone();
                if let Some(map) = body.as_object_mut() {
                    map.remove("stringData");
                    map.insert("apiVersion".into(), json!("v1"));
                    map.insert("kind".into(), json!("Secret"));
                    map.insert("type".into(), json!(secret.type_));
                    map.insert(
                        "data".into(),
                        desired.value.get("data").cloned().unwrap_or(json!({})),
                    );
                }
                let meta = &mut body["metadata"];
                if !meta.is_object() {
                    *meta = json!({});
                }
                meta["name"] = json!(secret.name);
                meta["namespace"] = json!(self.namespace);
                meta["resourceVersion"] = json!(rv);
                meta["labels"]["app.kubernetes.io/part-of"] = json!("ichor");
                if let Some(m) = meta.as_object_mut() {
                    m.remove("managedFields");
                }
                api.replace(&secret.name, &PostParams::default(), &to_dynamic(&what, body)?)
                    .await
            }
        };
        match result {
            Ok(o) => Ok(Event::Applied(observed("Secret", &desired, to_value(&what, o)?))),
            Err(e) => match classify(&what, e) {
                Failure::Conflict | Failure::AlreadyExists | Failure::NotFound => Err(stale()),
                other => Err(other.into_error(&what)),
            },
        }
    }

    /// Removes one key of the credentials Secret by JSON merge patch, conditioned on its
    /// resourceVersion; on conflict, re-reads: the key gone is success, its user back is a
    /// reason to leave it, anything else a retry.
    async fn remove_credentials_key(
        &self,
        world: &World,
        request: &RemoveCredentialsKeyRequest,
    ) -> Result<Event, ApplyError> {
        let key = ObjectKey::new("Secret", request.namespace.clone(), request.secret.clone());
        let what = format!("removal of key {:?} of Secret {}", request.key, key);
        let resource = Self::resource(&key)?;
        let api = self.api(&resource, &request.namespace);
        let fallback = Object::new(
            "Secret",
            request.namespace.clone(),
            request.secret.clone(),
            Value::Null,
        );
        let mut rv = world.get(&key).and_then(|o| o.resource_version.clone());
        for attempt in 0..self.retry.attempts {
            tokio::time::sleep(self.retry.pause(attempt)).await;
            let mut body = json!({"data": {request.key.clone(): null}});
            if let Some(rv) = &rv {
                body["metadata"] = json!({"resourceVersion": rv});
            }
            match api
                .patch(&request.secret, &PatchParams::default(), &Patch::Merge(&body))
                .await
            {
                Ok(o) => return Ok(Event::Applied(observed("Secret", &fallback, to_value(&what, o)?))),
                Err(e) => match classify(&what, e) {
                    Failure::NotFound => return Ok(Event::Deleted(key)),
                    Failure::Conflict if attempt + 1 == self.retry.attempts => break,
                    Failure::Conflict => {
                        let fresh = match api.get_opt(&request.secret).await {
                            Ok(Some(o)) => observed("Secret", &fallback, to_value(&what, o)?),
                            Ok(None) => return Ok(Event::Deleted(key)),
                            Err(e) => return Err(classify(&what, e).into_error(&what)),
                        };
                        if fresh
                            .value
                            .get("data")
                            .and_then(|d| d.get(&request.key))
                            .is_none()
                        {
                            return Ok(Event::Applied(fresh));
                        }
                        if self.user_exists(&request.namespace, &request.key).await? {
                            return Err(ApplyError::Api {
                                what,
                                code: 409,
                                reason: "Conflict".into(),
                                message: format!(
                                    "IchorUser {} exists again; its credentials are kept",
                                    request.key
                                ),
                            });
                        }
                        rv = fresh.resource_version;
                    }
                    other => return Err(other.into_error(&what)),
                },
            }
        }
        Err(ApplyError::Conflict {
            what,
            attempts: self.retry.attempts,
        })
    }

    async fn user_exists(&self, namespace: &str, name: &str) -> Result<bool, ApplyError> {
        let key = ObjectKey::new("IchorUser", namespace, name);
        let what = format!("read of {key}");
        let resource = Self::resource(&key)?;
        match self.api(&resource, namespace).get_opt(name).await {
            Ok(found) => Ok(found.is_some()),
            Err(e) => Err(classify(&what, e).into_error(&what)),
        }
    }
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
