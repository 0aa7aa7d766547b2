//! The move off the legacy credentials Secret (docs/credentials-sharding.md, "Migration from
//! the one Secret"), as the graph decided it ([`ichor_controller_core::identity::migration`]):
//!
//! | effect | requests |
//! |---|---|
//! | `credentials-layout legacy to migrating` | one JSON Patch of `ichor-user-credentials`: `test` of the phase annotation, `replace` |
//! | `credentials-sweep …` | a quorum GET of the legacy Secret; a POST of `ichor-user-<name>` per key to move, holding the legacy value unchanged (its answer asked for as metadata; 409 AlreadyExists: already moved); one JSON Patch of the legacy Secret, a `test` against the value read and a `remove` per key of the batch |
//! | `retire-legacy-credentials <rv>` | DELETE of the legacy Secret with the resourceVersion precondition |
//! | `credentials-return …` | the move back ([`super::returning`]) |
//! | `recreate-legacy-credentials` | POST of the legacy Secret, empty, in phase `returning` ([`super::returning`]) |
//!
//! A patch refused whole (a `test` failed: an issuer moved or removed an entry since the read)
//! is stale: the legacy Secret is read again and the graph decides the next batch from it. A
//! Secret the batch created whose legacy value has since gone or changed is deleted again (by
//! uid and resourceVersion): the entry was moved or removed meanwhile, and a copy of its old
//! value must not become authoritative. Batches are at least [`SWEEP_INTERVAL`] apart.
//! Nothing here logs or formats an entry.

use std::time::{Duration, Instant};

use ichor_controller_core::identity::migration::{RetireLegacyRequest, SweepRequest, SwitchLayoutRequest};
use ichor_controller_core::identity::returning::{RecreateLegacyRequest, ReturnRequest};
use ichor_graph::{EffectRequest, Event, Object, ObjectKey};
use ichor_renderers::contract::{
    CREDENTIALS_LAYOUT_ANNOTATION, LAYOUT_MIGRATING, PART_OF_LABEL, PART_OF_VALUE, USER_CREDENTIALS_KEY,
    USER_CREDENTIALS_TYPE, USER_LABEL, user_credentials_secret,
};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use serde_json::{Map, Value, json};

use super::credentials::{METADATA_ACCEPT, secret_delete};
use super::error::{ApplyError, Failure, classify, to_value};
use super::resources::observed;
use super::{ApplyReport, KubeApplier, Written, stale_problem};
use crate::run::convert::{metadata_only, to_object};

/// The least time between two batches of the sweep.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(2);

/// Whether an effect id is one of the migration's.
pub(super) fn is_migration_effect(id: &str) -> bool {
    [
        "credentials-layout ",
        "credentials-sweep ",
        "retire-legacy-credentials ",
        "credentials-return ",
        "recreate-legacy-credentials",
    ]
    .iter()
    .any(|p| id.starts_with(p))
}

/// `/data/<key>` as a JSON Pointer (RFC 6901).
fn data_path(key: &str) -> String {
    format!("/data/{}", key.replace('~', "~0").replace('/', "~1"))
}

/// The JSON Patch of the switch: `test` the phase `from`, `replace` it with `to`.
pub fn switch_patch(request: &SwitchLayoutRequest) -> Value {
    let path = format!(
        "/metadata/annotations/{}",
        CREDENTIALS_LAYOUT_ANNOTATION
            .replace('~', "~0")
            .replace('/', "~1")
    );
    json!([
        {"op": "test", "path": path, "value": request.from},
        {"op": "replace", "path": path, "value": request.to},
    ])
}

/// The JSON Patch removing `keys` from a Secret whose `data` was read as `data`: a `test` of each
/// key's value as read, then its `remove`; keys absent from `data` are left out (nothing to
/// remove). `None` when no key is left.
pub fn removal_patch(data: &Map<String, Value>, keys: &[&str]) -> Option<Value> {
    let mut ops = Vec::new();
    for key in keys {
        if let Some(value) = data.get(*key) {
            let path = data_path(key);
            ops.push(json!({"op": "test", "path": path, "value": value}));
            ops.push(json!({"op": "remove", "path": path}));
        }
    }
    (!ops.is_empty()).then_some(Value::Array(ops))
}

/// The per-user Secret of `user` holding the legacy value `value` (base64, as read) unchanged.
pub fn per_user_body(namespace: &str, user: &str, value: &Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": USER_CREDENTIALS_TYPE,
        "metadata": {"name": user_credentials_secret(user), "namespace": namespace,
            "labels": {USER_LABEL: user, PART_OF_LABEL: PART_OF_VALUE}},
        "data": {USER_CREDENTIALS_KEY: value}})
}

/// How old a user's own Secret must be before the sweep removes the legacy key beside it as a
/// stale copy: an issuer's move creates that Secret and removes the key itself a moment later,
/// and the sweep must not take the key first (the issuer would then find its removal refused).
pub const STALE_COPY_AGE: Duration = Duration::from_secs(10);

/// Whether the legacy key of `user` may go as a stale copy of `secret` at `now`: `secret` is the
/// user's credentials Secret (of the credentials type and labelled with that user) and at least
/// [`STALE_COPY_AGE`] old. Pure.
pub fn is_credentials_secret_of(secret: &DynamicObject, user: &str, now: jiff::Timestamp) -> bool {
    let old_enough = secret.metadata.creation_timestamp.as_ref().is_some_and(|t| {
        now.duration_since(t.0)
            .try_into()
            .is_ok_and(|age: Duration| age >= STALE_COPY_AGE)
    });
    old_enough
        && secret.data.get("type").and_then(Value::as_str) == Some(USER_CREDENTIALS_TYPE)
        && secret
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(USER_LABEL))
            .is_some_and(|u| u == user)
}

/// Whether a 422 is a failed JSON Patch operation (no field cause) rather than a validation
/// failure of the object.
pub(super) fn is_patch_test_failure(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) if s.code == 422 => s
            .details
            .as_ref()
            .is_none_or(|d| d.causes.iter().all(|c| c.field.is_empty())),
        _ => false,
    }
}

/// A Secret the batch created: enough to delete it again, and the value it was made from.
struct Created {
    user: String,
    uid: String,
    resource_version: String,
    value: Value,
}

impl KubeApplier {
    /// Performs the migration's effects (at most one per evaluation).
    pub(super) async fn migration_effects(&self, requests: &[&EffectRequest], report: &mut ApplyReport) {
        for request in requests {
            let id = request.id.as_str();
            let done = if id.starts_with("credentials-layout ") {
                match serde_json::from_value::<SwitchLayoutRequest>(request.request.clone()) {
                    Ok(r) => self.switch_layout(&r).await,
                    Err(e) => Err(malformed(id, &e)),
                }
            } else if id.starts_with("credentials-return ") {
                match serde_json::from_value::<ReturnRequest>(request.request.clone()) {
                    Ok(r) => self.return_batch(&r).await,
                    Err(e) => Err(malformed(id, &e)),
                }
            } else if id.starts_with("recreate-legacy-credentials") {
                match serde_json::from_value::<RecreateLegacyRequest>(request.request.clone()) {
                    Ok(r) => self.recreate_legacy(&r).await,
                    Err(e) => Err(malformed(id, &e)),
                }
            } else if id.starts_with("credentials-sweep ") {
                match serde_json::from_value::<SweepRequest>(request.request.clone()) {
                    Ok(r) => self.sweep(&r).await,
                    Err(e) => Err(malformed(id, &e)),
                }
            } else {
                match serde_json::from_value::<RetireLegacyRequest>(request.request.clone()) {
                    Ok(r) => self.retire_legacy(&r).await,
                    Err(e) => Err(malformed(id, &e)),
                }
            };
            match done {
                Ok((Written::Done(event), more)) => {
                    tracing::info!(effect = %id, "performed");
                    report.events.extend(more);
                    report.events.push(event);
                    report.applied.push(format!("effect {id}"));
                }
                Ok((Written::Stale(fresh), more)) => {
                    tracing::info!(effect = %id, "stale: the graph decides again from a fresh read");
                    report.events.extend(more);
                    report.events.extend(fresh);
                    report.stale.push(stale_problem(&format!("effect {id}")));
                }
                Err(e) => {
                    tracing::warn!(effect = %id, error = %e, "migration step failed");
                    report.problems.push(e.problem());
                }
            }
        }
    }

    pub(super) fn secrets(&self, namespace: &str) -> Api<DynamicObject> {
        let resource = kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&());
        Api::namespaced_with(self.client.clone(), namespace, &resource)
    }

    /// The legacy Secret as the graph holds it, from an answer.
    pub(super) fn legacy_event(
        what: &str,
        namespace: &str,
        name: &str,
        o: DynamicObject,
    ) -> Result<Event, ApplyError> {
        let fallback = Object::new("Secret", namespace, name, Value::Null);
        Ok(Event::Applied(observed("Secret", &fallback, to_value(what, o)?)))
    }

    /// Reads the legacy Secret (quorum): its event for the graph and the object.
    pub(super) async fn read_legacy(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(Event, Option<Value>), ApplyError> {
        let what = format!("read of Secret {namespace}/{name}");
        match self.secrets(namespace).get_opt(name).await {
            Ok(Some(o)) => {
                let value = to_value(&what, o.clone())?;
                Ok((Self::legacy_event(&what, namespace, name, o)?, Some(value)))
            }
            Ok(None) => Ok((Event::Deleted(ObjectKey::new("Secret", namespace, name)), None)),
            Err(e) => Err(classify(&what, e).into_error(&what)),
        }
    }

    /// Reads the legacy Secret and, when it is in `phase`, its `data`; a legacy Secret gone or in
    /// another phase makes the request stale (`Err`, what the graph decides again from).
    pub(super) async fn read_legacy_in_phase(
        &self,
        namespace: &str,
        name: &str,
        phase: &str,
    ) -> Result<Result<(Event, Map<String, Value>), Written>, ApplyError> {
        let (read, legacy) = self.read_legacy(namespace, name).await?;
        let Some(legacy) = legacy else {
            return Ok(Err(Written::Stale(vec![read])));
        };
        let in_phase = legacy
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(CREDENTIALS_LAYOUT_ANNOTATION))
            .and_then(Value::as_str)
            == Some(phase);
        if !in_phase {
            return Ok(Err(Written::Stale(vec![read])));
        }
        let data = legacy
            .get("data")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        Ok(Ok((read, data)))
    }

    async fn switch_layout(&self, r: &SwitchLayoutRequest) -> Result<(Written, Vec<Event>), ApplyError> {
        let what = format!(
            "switch of Secret {}/{} from {} to {}",
            r.namespace, r.secret, r.from, r.to
        );
        let patch: Patch<Value> =
            Patch::Json(
                serde_json::from_value(switch_patch(r)).map_err(|e| ApplyError::Malformed {
                    what: what.clone(),
                    message: e.to_string(),
                })?,
            );
        match self
            .secrets(&r.namespace)
            .patch(&r.secret, &PatchParams::default(), &patch)
            .await
        {
            Ok(o) => Ok((
                Written::Done(Self::legacy_event(&what, &r.namespace, &r.secret, o)?),
                Vec::new(),
            )),
            Err(e) if is_patch_test_failure(&e) => {
                let (fresh, _) = self.read_legacy(&r.namespace, &r.secret).await?;
                Ok((Written::Stale(vec![fresh]), Vec::new()))
            }
            Err(e) => match classify(&what, e) {
                Failure::NotFound => Ok((
                    Written::Done(Event::Deleted(ObjectKey::new(
                        "Secret",
                        &*r.namespace,
                        &*r.secret,
                    ))),
                    Vec::new(),
                )),
                other => Err(other.into_error(&what)),
            },
        }
    }

    /// Waits until [`SWEEP_INTERVAL`] has passed since the last batch.
    pub(super) async fn pace_sweep(&self) {
        let wait = {
            let last = self
                .last_sweep
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            last.map(|t| self.sweep_interval.saturating_sub(t.elapsed()))
        };
        if let Some(wait) = wait.filter(|w| !w.is_zero()) {
            tokio::time::sleep(wait).await;
        }
        *self
            .last_sweep
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Instant::now());
    }

    /// Creates `user`'s own Secret holding `value`; `Ok(None)` when one exists already (then its
    /// metadata is read, for the graph).
    async fn create_per_user(
        &self,
        namespace: &str,
        user: &str,
        value: &Value,
        events: &mut Vec<Event>,
    ) -> Result<Option<Created>, ApplyError> {
        let name = user_credentials_secret(user);
        let what = format!("creation of Secret {namespace}/{name} from the legacy entry");
        let body = serde_json::to_vec(&per_user_body(namespace, user, value)).map_err(|e| {
            ApplyError::Malformed {
                what: what.clone(),
                message: e.to_string(),
            }
        })?;
        let mut request = kube::core::Request::new(format!("/api/v1/namespaces/{namespace}/secrets"))
            .create(&PostParams::default(), body)
            .map_err(|e| ApplyError::Malformed {
                what: what.clone(),
                message: e.to_string(),
            })?;
        request.headers_mut().insert(
            http::header::ACCEPT,
            http::HeaderValue::from_static(METADATA_ACCEPT),
        );
        let resource = Self::resource(&ObjectKey::new("Secret", namespace, &*name))?;
        match self
            .client
            .request::<PartialObjectMeta<DynamicObject>>(request)
            .await
        {
            Ok(meta) => {
                let created = Created {
                    user: user.to_owned(),
                    uid: meta.metadata.uid.clone().unwrap_or_default(),
                    resource_version: meta.metadata.resource_version.clone().unwrap_or_default(),
                    value: value.clone(),
                };
                events.extend(to_object(&resource.api, &metadata_only(meta)).map(Event::Applied));
                Ok(Some(created))
            }
            Err(e) => match classify(&what, e) {
                Failure::AlreadyExists => {
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(self.client.clone(), namespace, &resource.api);
                    match api.get_metadata_opt(&name).await {
                        Ok(Some(meta)) => {
                            events.extend(to_object(&resource.api, &metadata_only(meta)).map(Event::Applied));
                        }
                        Ok(None) => {}
                        Err(e) => return Err(classify(&what, e).into_error(&what)),
                    }
                    Ok(None)
                }
                other => Err(other.into_error(&what)),
            },
        }
    }

    /// Whether `user`'s own Secret is really a credentials Secret of that user (its type, which
    /// the metadata watch cannot show, and its label) and older than an issuer's move takes,
    /// read whole before its legacy key is removed as a stale copy: a Secret of another type
    /// made before the admission policy existed must not cost the user the only real copy of the
    /// entry, nor a move in flight its own removal ([`is_credentials_secret_of`]).
    async fn is_users_credentials_secret(&self, namespace: &str, user: &str) -> Result<bool, ApplyError> {
        let name = user_credentials_secret(user);
        let what = format!("read of Secret {namespace}/{name} before its legacy copy is removed");
        match self.secrets(namespace).get_opt(&name).await {
            Ok(Some(o)) => Ok(is_credentials_secret_of(&o, user, jiff::Timestamp::now())),
            Ok(None) => Ok(false),
            Err(e) => Err(classify(&what, e).into_error(&what)),
        }
    }

    /// One batch of the sweep (see the module documentation).
    async fn sweep(&self, r: &SweepRequest) -> Result<(Written, Vec<Event>), ApplyError> {
        self.pace_sweep().await;
        let what = format!("sweep of Secret {}/{}", r.namespace, r.secret);
        let (read, data) = match self
            .read_legacy_in_phase(&r.namespace, &r.secret, LAYOUT_MIGRATING)
            .await?
        {
            Ok(found) => found,
            Err(stale) => return Ok((stale, Vec::new())),
        };
        let mut events = Vec::new();
        let mut created = Vec::new();
        let mut already = Vec::new();
        for user in &r.moves {
            let Some(value) = data.get(user) else { continue };
            match self
                .create_per_user(&r.credentials_namespace, user, value, &mut events)
                .await
            {
                Ok(Some(c)) => created.push(c),
                // An issuer is moving this user right now (its create landed first): its own
                // removal of the legacy key follows. Removing the key here as well would make
                // that removal fail and the issuer take its move for a stale one; a later pass
                // removes the key if it is still there.
                Ok(None) => already.push(user.as_str()),
                // What was created stays beside its legacy key, a copy the next pass removes.
                Err(e) => return Err(e),
            }
        }
        let mut stale = Vec::new();
        for user in &r.stale {
            if self
                .is_users_credentials_secret(&r.credentials_namespace, user)
                .await?
            {
                stale.push(user.as_str());
            }
        }
        let keys: Vec<&str> = r
            .moves
            .iter()
            .map(String::as_str)
            .filter(|user| !already.contains(user))
            .chain(stale)
            .collect();
        let Some(patch) = removal_patch(&data, &keys) else {
            return Ok((Written::Stale(vec![read]), events));
        };
        let patch: Patch<Value> =
            Patch::Json(serde_json::from_value(patch).map_err(|e| ApplyError::Malformed {
                what: what.clone(),
                message: e.to_string(),
            })?);
        match self
            .secrets(&r.namespace)
            .patch(&r.secret, &PatchParams::default(), &patch)
            .await
        {
            Ok(o) => {
                tracing::info!(
                    moved = created.len(),
                    removed = keys.len(),
                    "credentials sweep batch"
                );
                Ok((
                    Written::Done(Self::legacy_event(&what, &r.namespace, &r.secret, o)?),
                    events,
                ))
            }
            Err(e) if is_patch_test_failure(&e) => {
                let (fresh, now) = self.read_legacy(&r.namespace, &r.secret).await?;
                self.undo_orphans(r, &created, now.as_ref(), &mut events).await?;
                Ok((Written::Stale(vec![fresh]), events))
            }
            Err(e) => match classify(&what, e) {
                Failure::NotFound => Ok((
                    Written::Done(Event::Deleted(ObjectKey::new(
                        "Secret",
                        &*r.namespace,
                        &*r.secret,
                    ))),
                    events,
                )),
                other => Err(other.into_error(&what)),
            },
        }
    }

    /// After a refused removal patch: deletes each Secret this batch created whose legacy value
    /// is no longer the one it was made from (moved by an issuer, or removed, since the read),
    /// by uid and resourceVersion, so a stale value never becomes authoritative. A Secret changed
    /// since (409) was written by an issuer and is kept.
    async fn undo_orphans(
        &self,
        r: &SweepRequest,
        created: &[Created],
        legacy_now: Option<&Value>,
        events: &mut Vec<Event>,
    ) -> Result<(), ApplyError> {
        let data_now = legacy_now.and_then(|s| s.get("data"));
        for c in created {
            if data_now.and_then(|d| d.get(&c.user)) == Some(&c.value) {
                continue;
            }
            let name = user_credentials_secret(&c.user);
            let what = format!(
                "deletion of Secret {}/{name} made from a value moved since",
                r.credentials_namespace
            );
            let request = secret_delete(
                &r.credentials_namespace,
                &name,
                Some(&c.uid),
                Some(&c.resource_version),
                &what,
            )?;
            match self.client.request_text(request).await {
                Ok(_) => events.push(Event::Deleted(ObjectKey::new(
                    "Secret",
                    &*r.credentials_namespace,
                    &*name,
                ))),
                Err(e) => match classify(&what, e) {
                    Failure::NotFound | Failure::Conflict => {}
                    other => return Err(other.into_error(&what)),
                },
            }
        }
        Ok(())
    }

    async fn retire_legacy(&self, r: &RetireLegacyRequest) -> Result<(Written, Vec<Event>), ApplyError> {
        let what = format!("deletion of the empty Secret {}/{}", r.namespace, r.secret);
        let key = ObjectKey::new("Secret", &*r.namespace, &*r.secret);
        let request = secret_delete(&r.namespace, &r.secret, None, Some(&r.resource_version), &what)?;
        match self.client.request_text(request).await {
            Ok(_) => Ok((Written::Done(Event::Deleted(key)), Vec::new())),
            Err(e) => match classify(&what, e) {
                Failure::NotFound => Ok((Written::Done(Event::Deleted(key)), Vec::new())),
                Failure::Conflict => {
                    let (fresh, _) = self.read_legacy(&r.namespace, &r.secret).await?;
                    Ok((Written::Stale(vec![fresh]), Vec::new()))
                }
                other => Err(other.into_error(&what)),
            },
        }
    }
}

fn malformed(id: &str, e: &serde_json::Error) -> ApplyError {
    ApplyError::Malformed {
        what: format!("effect {id}"),
        message: e.to_string(),
    }
}

#[cfg(test)]
mod tests;
