//! Writes of desired objects: the server-side apply of an owned object, a status write on the
//! `/status` subresource, the `caBundle` of the webhook configuration, a conditional update of
//! data keys of an owned Secret, and the delete of an owned orphan. A write conditioned on a resourceVersion that the API server refuses (409)
//! is *stale*: the object is read again and handed back, and the graph decides again from it.

use ichor_graph::{Event, Object, ObjectKey, World};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::{Value, json};

use ichor_controller_core::identity::conditions::stamp_transition_times;

use super::error::{ApplyError, Failure, classify, to_dynamic, to_value};
use super::resources::{Resource, apply_body, is_status_write, observed};
use super::{FIELD_MANAGER, KubeApplier, Written, webhook};

impl KubeApplier {
    pub(super) async fn apply_object(&self, world: &World, object: &Object) -> Result<Written, ApplyError> {
        let key = object.key();
        let resource = Self::resource(&key)?;
        if is_status_write(&object.value) {
            return self.write_status(world, object, &resource).await;
        }
        if resource.input {
            return Err(ApplyError::SpecOfInput { key });
        }
        if &*key.kind == webhook::CONFIGURATION_KIND {
            return self.write_ca_bundle(world, object, &resource).await;
        }
        if &*key.kind == "Secret" {
            return self.replace_secret_data(world, object, &resource).await;
        }
        let what = format!("server-side apply of {key}");
        let api = self.api(&resource, &object.namespace);
        let body = apply_body(object, &resource);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        for attempt in 0..self.retry.attempts {
            tokio::time::sleep(self.retry.pause(attempt)).await;
            match api.patch(&object.name, &params, &Patch::Apply(&body)).await {
                Ok(o) => {
                    return Ok(Written::Done(Event::Applied(observed(
                        &key.kind,
                        object,
                        to_value(&what, o)?,
                    ))));
                }
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

    /// A desired Secret that holds only the `data` keys to change (`keys.json` of the signing
    /// Secret when superseded keys are dated or retired ones dropped): the Secret as observed with
    /// those keys replaced, written whole with an update conditioned on the observed
    /// resourceVersion. That is the verb the chart grants on the Secrets the controller owns (an
    /// apply would be a patch, which it does not grant), and the same optimistic concurrency as
    /// the effects' writes: on a conflict the Secret is read again and the graph decides anew.
    /// A Secret not observed yet is not written (the effects create Secrets).
    async fn replace_secret_data(
        &self,
        world: &World,
        object: &Object,
        resource: &Resource,
    ) -> Result<Written, ApplyError> {
        let key = object.key();
        let what = format!("update of {key}");
        let Some((seen, rv)) = world
            .get(&key)
            .and_then(|o| o.resource_version.clone().map(|rv| (o, rv)))
        else {
            return Err(ApplyError::NoResourceVersion { key });
        };
        let mut body = seen.value.clone();
        if !body.is_object() {
            body = json!({});
        }
        body["apiVersion"] = json!("v1");
        body["kind"] = json!("Secret");
        if let Some(map) = body.as_object_mut() {
            map.remove("stringData");
        }
        if !body["data"].is_object() {
            body["data"] = json!({});
        }
        if let Some(changes) = object.value.get("data").and_then(Value::as_object) {
            for (k, v) in changes {
                body["data"][k] = v.clone();
            }
        }
        if !body["metadata"].is_object() {
            body["metadata"] = json!({});
        }
        let meta = &mut body["metadata"];
        meta["name"] = json!(object.name);
        meta["namespace"] = json!(object.namespace);
        meta["resourceVersion"] = json!(rv);
        if let Some(m) = meta.as_object_mut() {
            m.remove("managedFields");
        }
        let result = self
            .api(resource, &object.namespace)
            .replace(&object.name, &PostParams::default(), &to_dynamic(&what, body)?)
            .await;
        self.conditional(resource, object, &what, result).await
    }

    /// A status-only apply on the `/status` subresource, conditioned on the resourceVersion the
    /// graph observed. On a conflict the object is read again and the write is stale: the graph
    /// decides the status again from what was read.
    async fn write_status(
        &self,
        world: &World,
        object: &Object,
        resource: &Resource,
    ) -> Result<Written, ApplyError> {
        let key = object.key();
        let what = format!("status write of {key}");
        let mut desired = json!({ "status": object.value.get("status").cloned().unwrap_or(Value::Null) });
        stamp_transition_times(&mut desired, (self.clock)());
        let mut meta = json!({"name": object.name});
        if resource.namespaced {
            meta["namespace"] = json!(object.namespace);
        }
        if let Some(rv) = world.get(&key).and_then(|o| o.resource_version.clone()) {
            meta["resourceVersion"] = json!(rv);
        }
        let body = json!({"apiVersion": resource.api.api_version, "kind": resource.api.kind,
            "metadata": meta, "status": desired.get("status").cloned().unwrap_or(Value::Null)});
        let api = self.api(resource, &object.namespace);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let result = api
            .patch_status(&object.name, &params, &Patch::Apply(&body))
            .await;
        self.conditional(resource, object, &what, result).await
    }

    /// A delete with the observed resourceVersion as precondition; 404 is success, 409 is stale.
    pub(super) async fn delete(&self, world: &World, key: &ObjectKey) -> Result<Written, ApplyError> {
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
            Ok(_) => Ok(Written::Done(Event::Deleted(key.clone()))),
            Err(e) => match classify(&what, e) {
                Failure::NotFound => Ok(Written::Done(Event::Deleted(key.clone()))),
                Failure::Conflict => Ok(Written::Stale(vec![self.reread(&resource, key).await?])),
                other => Err(other.into_error(&what)),
            },
        }
    }
}
