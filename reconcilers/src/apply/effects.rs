//! Effects: the performer runs on a blocking thread (key generation, certificate issuance)
//! and the Secrets it produced are written whole, each conditioned on the resourceVersion the
//! performer read; the removal of one user's credentials (a JSON merge patch of its legacy key,
//! then a DELETE of its own Secret with the observed uid as precondition, see [`super::credentials`])
//! is made only after the user's `IchorUser` was read from the store and found absent or being
//! deleted. A conditional write the API
//! server refuses (409) is stale: the objects it depended on are read again and handed back, and
//! the graph decides again from them (never the applier).

use std::sync::Arc;

use ichor_graph::{Action, EffectRequest, Event, Object, ObjectKey, World};
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use ichor_controller_core::identity::{effects::RemoveCredentialsKeyRequest, still_a_user};
use ichor_controller_core::perform::{self, Outcome, SecretData};
use ichor_controller_core::problem::{Problem, ProblemKind};
use ichor_renderers::contract::{PART_OF_LABEL, PART_OF_VALUE};

use super::error::{ApplyError, Failure, classify, to_dynamic, to_value};
use super::resources::observed;
use super::{ApplyReport, KubeApplier, Written, stale_problem};

impl KubeApplier {
    /// Performs the effects on a blocking thread, then writes what they produced.
    pub(super) async fn effects(
        &self,
        world: &World,
        effects: &[(&EffectRequest, &Action)],
        report: &mut ApplyReport,
    ) {
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
        let mut incomplete = false;
        let mut secrets_blocked = false;
        for outcome in outcomes {
            let (what, written) = match outcome {
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
                    incomplete = true;
                    continue;
                }
                Outcome::Secret(secret) => {
                    let r = self.write_secret(world, &secret).await;
                    secrets_blocked |= !matches!(r, Ok(Written::Done(_)));
                    (format!("Secret {}", secret.name), r)
                }
                Outcome::RemoveCredentialsKey(r) => {
                    let what = format!("removal of key {:?} of Secret {}", r.key, r.secret);
                    let written = match self.read_key_user(&r).await {
                        Ok(Some(user)) => {
                            tracing::info!(
                                secret = %r.secret,
                                "credentials key kept: its IchorUser exists; decided again"
                            );
                            incomplete = true;
                            report.events.push(Event::Applied(user));
                            report.stale.push(Problem::new(
                                ProblemKind::Conflict,
                                format!(
                                    "{what}: not made, its IchorUser exists in the store (its event \
                                     had not been folded yet); the key is kept and decided again"
                                ),
                            ));
                            continue;
                        }
                        Ok(None) => self.remove_credentials(world, &r, &mut report.events).await,
                        Err(e) => Err(e),
                    };
                    (what, written)
                }
            };
            match written {
                Ok(Written::Done(event)) => report.events.push(event),
                Ok(Written::Stale(fresh)) => {
                    incomplete = true;
                    report.events.extend(fresh);
                    report.stale.push(stale_problem(&what));
                }
                Err(e) => {
                    incomplete = true;
                    report.problems.push(e.problem());
                }
            }
        }
        if incomplete {
            tracing::warn!(
                effects = effects.len(),
                "effects not all written; the next evaluation decides again"
            );
        } else {
            for (_, action) in effects {
                tracing::info!(action = %action, "performed");
                report.applied.push(action.to_string());
            }
        }
    }

    /// Writes one performed Secret whole: created when the performer saw none, else replaced
    /// with the resourceVersion it read. A conflict (or a create meeting one, or a replace
    /// meeting none) is stale, never retried: another writer won, and the graph decides from
    /// the Secret as read again.
    async fn write_secret(&self, world: &World, secret: &SecretData) -> Result<Written, ApplyError> {
        let desired = secret.to_object();
        let key = desired.key();
        let what = format!("write of Secret {}/{}", self.namespace, secret.name);
        let resource = Self::resource(&key)?;
        let api = self.api(&resource, &self.namespace);
        let seen = world.get(&key);
        let read = seen.and_then(|o| o.resource_version.clone());
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
                meta["labels"][PART_OF_LABEL] = json!(PART_OF_VALUE);
                if let Some(m) = meta.as_object_mut() {
                    m.remove("managedFields");
                }
                api.replace(&secret.name, &PostParams::default(), &to_dynamic(&what, body)?)
                    .await
            }
        };
        match result {
            Ok(o) => Ok(Written::Done(Event::Applied(observed(
                "Secret",
                &desired,
                to_value(&what, o)?,
            )))),
            Err(e) => match classify(&what, e) {
                Failure::Conflict | Failure::AlreadyExists | Failure::NotFound => {
                    Ok(Written::Stale(vec![self.reread(&resource, &key).await?]))
                }
                other => Err(other.into_error(&what)),
            },
        }
    }

    /// Reads the `IchorUser` a credentials key belongs to from the store, before the key is
    /// removed: the object, or `None` when there is none or it is being deleted (a finalizer
    /// can hold a deleted user indefinitely; the graph decides the same, [`still_a_user`]).
    ///
    /// The users and the credentials Secret reach the controller on separate watches, and the
    /// issuer writes a new user before its key, so the key can be folded first and look like
    /// an orphan. The removal's precondition (the Secret's resourceVersion) does not cover the
    /// user; this read does: a GET without a resourceVersion is served from etcd by quorum,
    /// and a key present at the Secret's observed version was written after its user.
    async fn read_key_user(
        &self,
        request: &RemoveCredentialsKeyRequest,
    ) -> Result<Option<Object>, ApplyError> {
        let user = ObjectKey::new("IchorUser", request.namespace.clone(), request.key.clone());
        let what = format!("read of {user} before the removal of its credentials key");
        let resource = Self::resource(&user)?;
        let fallback = Object::new(&*user.kind, &*user.namespace, &*user.name, Value::Null);
        match self
            .api(&resource, &request.namespace)
            .get_opt(&request.key)
            .await
        {
            Ok(Some(o)) => {
                let object = observed(&user.kind, &fallback, to_value(&what, o)?);
                Ok(still_a_user(&object).then_some(object))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(classify(&what, e).into_error(&what)),
        }
    }

    /// Removes a gone user's credentials: its legacy key first (when the legacy Secret holds
    /// one), then its own Secret (when one is observed). A legacy copy is read only while the
    /// user's own Secret is absent, so the copy goes first: stopped in between, the own Secret
    /// is still there and authoritative, and no stale copy can come back. The legacy write's
    /// answer goes to `done` when a deletion follows it; a stale legacy write stops there.
    async fn remove_credentials(
        &self,
        world: &World,
        request: &RemoveCredentialsKeyRequest,
        done: &mut Vec<Event>,
    ) -> Result<Written, ApplyError> {
        let legacy = if request.in_legacy {
            Some(self.remove_credentials_key(world, request).await?)
        } else {
            None
        };
        match (legacy, &request.per_user) {
            (Some(Written::Stale(fresh)), _) => Ok(Written::Stale(fresh)),
            (Some(written), None) => Ok(written),
            (Some(Written::Done(event)), Some(own)) => {
                done.push(event);
                self.delete_per_user_secret(request, own).await
            }
            (None, Some(own)) => self.delete_per_user_secret(request, own).await,
            (None, None) => Err(ApplyError::Malformed {
                what: format!("removal of the credentials of {:?}", request.key),
                message: "the request names neither a legacy key nor a per-user Secret".to_owned(),
            }),
        }
    }

    /// Removes one key of the credentials Secret by JSON merge patch, conditioned on its
    /// resourceVersion (after [`Self::read_key_user`] found no user). On a conflict the Secret and the key's `IchorUser` are read again: the
    /// graph decides from both whether the key is still an orphan (a user who is back keeps it).
    async fn remove_credentials_key(
        &self,
        world: &World,
        request: &RemoveCredentialsKeyRequest,
    ) -> Result<Written, ApplyError> {
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
        let mut body = json!({"data": {request.key.clone(): null}});
        if let Some(rv) = world.get(&key).and_then(|o| o.resource_version.clone()) {
            body["metadata"] = json!({"resourceVersion": rv});
        }
        match api
            .patch(&request.secret, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(o) => Ok(Written::Done(Event::Applied(observed(
                "Secret",
                &fallback,
                to_value(&what, o)?,
            )))),
            Err(e) => match classify(&what, e) {
                Failure::NotFound => Ok(Written::Done(Event::Deleted(key))),
                Failure::Conflict => {
                    let user = ObjectKey::new("IchorUser", request.namespace.clone(), request.key.clone());
                    let user_resource = Self::resource(&user)?;
                    Ok(Written::Stale(vec![
                        self.reread(&resource, &key).await?,
                        self.reread(&user_resource, &user).await?,
                    ]))
                }
                other => Err(other.into_error(&what)),
            },
        }
    }
}
