//! The move back into the legacy credentials Secret
//! ([`ichor_controller_core::identity::returning`]): for one batch, a GET of each user's own
//! Secret (value v at resourceVersion r), a GET of the legacy Secret after them, one JSON Patch
//! of it (`test` of the resourceVersion that GET found, so a key written since is never
//! overwritten by an older value; `test` of the phase `returning`; an `add` of each key with its
//! value), then a DELETE of each own Secret with the preconditions uid and r. Killed between the
//! patch and a delete, the own Secret is still there and authoritative (readers take it first),
//! and the next batch copies it again; a refresh since r makes the DELETE fail (409) with the
//! same outcome. An own Secret gone by the DELETE (404) was a removed user's: the key just
//! copied back is removed again (test of that value, remove).
//!
//! From the end state, `recreate-legacy-credentials` POSTs the legacy Secret again
//! ([`recreated_body`]: type `Opaque`, no key, phase `returning`); one already there is left as
//! it is, read, and handed to the graph. The policy `ichor-controller-secrets` admits that one
//! create of the controller in `ichor-system` and no other Secret of that name.
//!
//! The batch is refused, before anything is written, when the legacy Secret would pass
//! [`RETURN_LIMIT`] of the API server's 1 MiB of data: the move back stops there, said in the
//! problem the loop logs and counts. Nothing here logs or formats an entry.

use ichor_controller_core::identity::returning::{RecreateLegacyRequest, ReturnRequest};
use ichor_graph::{Event, ObjectKey};
use ichor_renderers::contract::{
    CREDENTIALS_LAYOUT_ANNOTATION, LAYOUT_RETURNING, PART_OF_LABEL, PART_OF_VALUE, USER_CREDENTIALS_KEY,
    user_credentials_secret,
};
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Map, Value, json};

use super::credentials::secret_delete;
use super::error::{ApplyError, Failure, classify};
use super::{KubeApplier, Written};

/// The API server's bound on a Secret's data (the decoded values), in bytes.
pub const SECRET_DATA_LIMIT: u64 = 1024 * 1024;
/// The share of [`SECRET_DATA_LIMIT`] the move back never passes.
pub const RETURN_LIMIT: f64 = 0.8;

/// The decoded length of a base64 value as a Secret's `data` holds it.
fn decoded_len(value: &Value) -> u64 {
    let s = value.as_str().unwrap_or_default();
    let padding = s.bytes().rev().take_while(|b| *b == b'=').count();
    ((s.len() / 4 * 3).saturating_sub(padding)) as u64
}

/// The data bytes of a Secret's `data` once `added` (key → value) replaces or adds its keys.
pub fn size_after(data: &Map<String, Value>, added: &[(String, Value)]) -> u64 {
    let kept: u64 = data
        .iter()
        .filter(|(k, _)| !added.iter().any(|(a, _)| a == *k))
        .map(|(_, v)| decoded_len(v))
        .sum();
    kept + added.iter().map(|(_, v)| decoded_len(v)).sum::<u64>()
}

/// The JSON Patch of one batch back: `test` of the legacy Secret's `resourceVersion` as read
/// after the own Secrets (nothing written there since), `test` of the phase `returning`, then an
/// `add` of each key (an `add` of `/data` first when the Secret has none).
pub fn return_patch(resource_version: &str, has_data: bool, added: &[(String, Value)]) -> Value {
    let phase = format!(
        "/metadata/annotations/{}",
        CREDENTIALS_LAYOUT_ANNOTATION
            .replace('~', "~0")
            .replace('/', "~1")
    );
    let mut ops = vec![
        json!({"op": "test", "path": "/metadata/resourceVersion", "value": resource_version}),
        json!({"op": "test", "path": phase, "value": LAYOUT_RETURNING}),
    ];
    if !has_data {
        ops.push(json!({"op": "add", "path": "/data", "value": {}}));
    }
    for (user, value) in added {
        let path = format!("/data/{}", user.replace('~', "~0").replace('/', "~1"));
        ops.push(json!({"op": "add", "path": path, "value": value}));
    }
    Value::Array(ops)
}

/// The legacy Secret as created again from the end state: as `ichor init` of earlier releases
/// made it (type `Opaque`, labelled part of Ichor), holding no key, in phase `returning`.
pub fn recreated_body(r: &RecreateLegacyRequest) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": r.secret, "namespace": r.namespace,
            "labels": {PART_OF_LABEL: PART_OF_VALUE},
            "annotations": {CREDENTIALS_LAYOUT_ANNOTATION: LAYOUT_RETURNING}}})
}

/// An own Secret read for the move back: its entry, uid and resourceVersion, and the uid of its
/// `IchorUser` read before it.
struct Own {
    user: String,
    value: Value,
    uid: String,
    resource_version: String,
    user_uid: String,
}

impl KubeApplier {
    /// Creates the legacy Secret again ([`recreated_body`]); one that exists already is read
    /// and handed back as stale (the graph decides from it).
    pub(super) async fn recreate_legacy(
        &self,
        r: &RecreateLegacyRequest,
    ) -> Result<(Written, Vec<Event>), ApplyError> {
        let what = format!("creation again of Secret {}/{}", r.namespace, r.secret);
        let body = super::error::to_dynamic(&what, recreated_body(r))?;
        match self
            .secrets(&r.namespace)
            .create(&PostParams::default(), &body)
            .await
        {
            Ok(o) => {
                tracing::info!(secret = %r.secret, "legacy credentials Secret created again, phase returning");
                Ok((
                    Written::Done(Self::legacy_event(&what, &r.namespace, &r.secret, o)?),
                    Vec::new(),
                ))
            }
            Err(e) => match classify(&what, e) {
                Failure::AlreadyExists => {
                    let (fresh, _) = self.read_legacy(&r.namespace, &r.secret).await?;
                    Ok((Written::Stale(vec![fresh]), Vec::new()))
                }
                other => Err(other.into_error(&what)),
            },
        }
    }

    /// One batch of the move back (see the module documentation).
    pub(super) async fn return_batch(&self, r: &ReturnRequest) -> Result<(Written, Vec<Event>), ApplyError> {
        self.pace_sweep().await;
        let what = format!("move back into Secret {}/{}", r.namespace, r.secret);
        let (read, first_data) = match self
            .read_legacy_in_phase(&r.namespace, &r.secret, LAYOUT_RETURNING)
            .await?
        {
            Ok(found) => found,
            Err(stale) => return Ok((stale, Vec::new())),
        };
        let mut events = Vec::new();
        let mut owns = Vec::new();
        let secrets = self.secrets(&r.credentials_namespace);
        for user in &r.users {
            // The user read first: a user absent or being deleted is garbage collection's, not
            // moved back; its uid tells a DELETE's 404 below from a user deleted and made again.
            let Some(user_uid) = self.live_user_uid(&r.namespace, user).await? else {
                continue;
            };
            let name = user_credentials_secret(user);
            let read_what = format!(
                "read of Secret {}/{name} to move it back",
                r.credentials_namespace
            );
            match secrets.get_opt(&name).await {
                Ok(Some(o)) => {
                    let value = o.data.pointer(&format!("/data/{USER_CREDENTIALS_KEY}")).cloned();
                    let (Some(value), Some(uid), Some(rv)) =
                        (value, o.metadata.uid, o.metadata.resource_version)
                    else {
                        continue;
                    };
                    owns.push(Own {
                        user: user.clone(),
                        value,
                        uid,
                        resource_version: rv,
                        user_uid,
                    });
                }
                Ok(None) => events.push(Event::Deleted(ObjectKey::new(
                    "Secret",
                    &*r.credentials_namespace,
                    &*name,
                ))),
                Err(e) => return Err(classify(&read_what, e).into_error(&read_what)),
            }
        }
        if owns.is_empty() {
            return Ok((Written::Stale(vec![read]), events));
        }
        // The legacy Secret read again after the own Secrets, and its resourceVersion tested by
        // the patch: a key written there since (a user deleted and made again, whose new entry
        // the issuers put into the legacy Secret in this phase) refuses the batch instead of
        // being overwritten by the older value read above.
        let (read, legacy) = self.read_legacy(&r.namespace, &r.secret).await?;
        let Some(legacy) = legacy else {
            return Ok((Written::Stale(vec![read]), events));
        };
        let Some(resource_version) = legacy
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
        else {
            return Ok((Written::Stale(vec![read]), events));
        };
        let data = legacy.get("data").and_then(Value::as_object);
        // A key that appeared or changed in the legacy Secret between its first read and now
        // was written by an issuer meanwhile (a user deleted and made again, say): left alone,
        // and its own Secret with it, for the graph to decide again.
        owns.retain(|o| data.and_then(|d| d.get(&o.user)) == first_data.get(&o.user));
        if owns.is_empty() {
            return Ok((Written::Stale(vec![read]), events));
        }
        let added: Vec<(String, Value)> = owns.iter().map(|o| (o.user.clone(), o.value.clone())).collect();
        let after = size_after(data.unwrap_or(&Map::new()), &added);
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss
        )]
        let limit = (SECRET_DATA_LIMIT as f64 * RETURN_LIMIT) as u64;
        if after > limit {
            return Err(ApplyError::ReturnTooLarge {
                secret: format!("{}/{}", r.namespace, r.secret),
                bytes: after,
                limit,
            });
        }
        let patch: Patch<Value> = Patch::Json(
            serde_json::from_value(return_patch(resource_version, data.is_some(), &added)).map_err(|e| {
                ApplyError::Malformed {
                    what: what.clone(),
                    message: e.to_string(),
                }
            })?,
        );
        let written = match self
            .secrets(&r.namespace)
            .patch(&r.secret, &PatchParams::default(), &patch)
            .await
        {
            Ok(o) => Self::legacy_event(&what, &r.namespace, &r.secret, o)?,
            Err(e) if super::migration::is_patch_test_failure(&e) => {
                let (fresh, _) = self.read_legacy(&r.namespace, &r.secret).await?;
                return Ok((Written::Stale(vec![fresh]), events));
            }
            Err(e) => return Err(classify(&what, e).into_error(&what)),
        };
        for own in &owns {
            self.delete_returned(r, own, &mut events).await?;
        }
        tracing::info!(moved_back = owns.len(), "credentials moved back");
        Ok((Written::Done(written), events))
    }

    /// Deletes an own Secret copied back, with the uid and resourceVersion it was read at; a
    /// 409 (refreshed since) keeps it for the next batch, a 404 is done.
    async fn delete_returned(
        &self,
        r: &ReturnRequest,
        own: &Own,
        events: &mut Vec<Event>,
    ) -> Result<(), ApplyError> {
        let name = user_credentials_secret(&own.user);
        let what = format!("deletion of Secret {}/{name} moved back", r.credentials_namespace);
        let request = secret_delete(
            &r.credentials_namespace,
            &name,
            Some(&own.uid),
            Some(&own.resource_version),
            &what,
        )?;
        match self.client.request_text(request).await {
            Ok(_) => events.push(Event::Deleted(ObjectKey::new(
                "Secret",
                &*r.credentials_namespace,
                &*name,
            ))),
            Err(e) => match classify(&what, e) {
                Failure::NotFound => {
                    // Gone since it was read: by the user's removal (the value just copied back
                    // is a removed user's, and is taken out again, tested against that value),
                    // or by an issuer undoing a move the phase change refused (the user is the
                    // same one, and the value copied back is its latest: kept).
                    if self.live_user_uid(&r.namespace, &own.user).await?.as_deref()
                        != Some(own.user_uid.as_str())
                    {
                        self.unreturn(r, own).await?;
                    }
                    events.push(Event::Deleted(ObjectKey::new(
                        "Secret",
                        &*r.credentials_namespace,
                        &*name,
                    )));
                }
                Failure::Conflict => {
                    tracing::info!(secret = %name, "changed since it was copied back: copied again by the next batch");
                }
                other => return Err(other.into_error(&what)),
            },
        }
        Ok(())
    }
}

impl KubeApplier {
    /// The uid of the `IchorUser` `user` in `namespace`, read by quorum; `None` when there is
    /// none or it is being deleted.
    async fn live_user_uid(&self, namespace: &str, user: &str) -> Result<Option<String>, ApplyError> {
        let key = ObjectKey::new("IchorUser", namespace, user);
        let what = format!("read of {key} before its credentials move back");
        let resource = Self::resource(&key)?;
        match self.api(&resource, namespace).get_opt(user).await {
            Ok(Some(o)) if o.metadata.deletion_timestamp.is_none() => Ok(o.metadata.uid),
            Ok(_) => Ok(None),
            Err(e) => Err(classify(&what, e).into_error(&what)),
        }
    }

    /// Removes `own`'s key from the legacy Secret if it still holds the value copied back (test
    /// and remove); a key changed or gone since is left as it is.
    async fn unreturn(&self, r: &ReturnRequest, own: &Own) -> Result<(), ApplyError> {
        let what = format!(
            "removal of the key {} copied back into Secret {}/{}",
            own.user, r.namespace, r.secret
        );
        let path = format!("/data/{}", own.user.replace('~', "~0").replace('/', "~1"));
        let ops = json!([
            {"op": "test", "path": path, "value": own.value},
            {"op": "remove", "path": path},
        ]);
        let patch: Patch<Value> =
            Patch::Json(serde_json::from_value(ops).map_err(|e| ApplyError::Malformed {
                what: what.clone(),
                message: e.to_string(),
            })?);
        match self
            .secrets(&r.namespace)
            .patch(&r.secret, &PatchParams::default(), &patch)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if super::migration::is_patch_test_failure(&e) => Ok(()),
            Err(e) => match classify(&what, e) {
                Failure::NotFound => Ok(()),
                other => Err(other.into_error(&what)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_tests_returning_and_adds_each_key_creating_data_when_absent() {
        let added = vec![("bob".to_owned(), json!("e30="))];
        assert_eq!(
            return_patch("41", false, &added),
            json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "41"},
                {"op": "test", "path": "/metadata/annotations/ichor.maesh.dev~1credentials-layout", "value": "returning"},
                {"op": "add", "path": "/data", "value": {}},
                {"op": "add", "path": "/data/bob", "value": "e30="},
            ])
        );
        assert_eq!(return_patch("41", true, &added).as_array().map(Vec::len), Some(3));
    }

    #[test]
    fn the_secret_created_again_is_the_legacy_one_empty_in_phase_returning() {
        let body = recreated_body(&RecreateLegacyRequest {
            namespace: "ichor-system".into(),
            secret: "ichor-user-credentials".into(),
        });
        assert_eq!(body["type"], "Opaque");
        assert_eq!(body["metadata"]["name"], "ichor-user-credentials");
        assert_eq!(body["metadata"]["namespace"], "ichor-system");
        assert_eq!(
            body["metadata"]["annotations"]["ichor.maesh.dev/credentials-layout"],
            "returning"
        );
        assert!(body.get("data").is_none() && body.get("stringData").is_none());
    }

    #[test]
    fn the_size_counts_decoded_values_with_replaced_keys_once() {
        let mut data = Map::new();
        data.insert("a".into(), json!("YWJj")); // "abc"
        data.insert("b".into(), json!("YQ==")); // "a"
        assert_eq!(size_after(&data, &[]), 4);
        assert_eq!(size_after(&data, &[("b".into(), json!("YWJjZA=="))]), 7);
        assert_eq!(size_after(&data, &[("c".into(), json!("YWI="))]), 6);
    }
}
