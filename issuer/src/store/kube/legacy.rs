//! The legacy layout's requests: the one Secret `ichor-user-credentials` in `ichor-system`, one
//! data key per user (docs/architecture.md, "Formats"), read and written while it exists.
//!
//! Every JSON Patch of legacy keys made under a phase starts with a `test` of the phase
//! annotation ([`layout::phase_test`]), so a replica that has not noticed a change of phase cannot
//! write under the old one: the API server refuses the patch whole, atomically with the write. A
//! first key is a merge patch carrying the Secret's `resourceVersion`, which a change of phase
//! also moves. The Secret is read and written through the client's raw text calls and parsed
//! here, so a response that fails to parse is never logged, and its size is measured each time
//! the store holds it whole ([`SecretSize`]).

use std::collections::BTreeMap;

use base64::Engine as _;
use ichor_renderers::{
    auth::credentials::CREDENTIALS_SECRET_NAME, contract::CREDENTIALS_LAYOUT_ANNOTATION, crd::NAMESPACE,
};
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Client,
    api::{Patch, PatchParams},
    core::{Request, params::GetParams},
};

use super::layout::{self, AfterLegacy, Found, LegacyView, Phase};
use super::size::{SECRET_DATA_LIMIT, SecretSize};
use super::{FIELD_MANAGER, transport_text};
use crate::store::group_commit::{self, Batch, EntryWrite};
use crate::store::{FULL_REMEDY, StoreError, Version};

/// The media type of a JSON Patch (RFC 6902).
const JSON_PATCH: &str = "application/json-patch+json";

/// The requests of the legacy Secret's collection.
fn requests() -> Request {
    Request::new(<Secret as kube::Resource>::url_path(&(), Some(NAMESPACE)))
}

fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

fn build_error(e: &kube::core::request::Error) -> StoreError {
    StoreError::Unavailable(format!("cannot build the request for {}: {e}", secret_ref()))
}

/// GETs the legacy Secret (uncached); `None` when it does not exist.
pub(super) async fn get(client: &Client, size: &SecretSize) -> Result<Option<Secret>, StoreError> {
    let request = requests()
        .get(CREDENTIALS_SECRET_NAME, &GetParams::default())
        .map_err(|e| build_error(&e))?;
    match client.request_text(request).await {
        Ok(text) => {
            let secret = parse_secret(&text)?;
            size.observe(&secret);
            Ok(Some(secret))
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(e) => Err(secret_error(&e, None, size)),
    }
}

/// Sends a merge patch of the legacy Secret; `user` names the conflict when it is refused.
pub(super) async fn merge(
    client: &Client,
    size: &SecretSize,
    patch: &serde_json::Value,
    user: &str,
) -> Result<Secret, StoreError> {
    let request = requests()
        .patch(CREDENTIALS_SECRET_NAME, &patch_params(), &Patch::Merge(patch))
        .map_err(|e| build_error(&e))?;
    let text = client
        .request_text(request)
        .await
        .map_err(|e| secret_error(&e, Some(user), size))?;
    let secret = parse_secret(&text)?;
    size.observe(&secret);
    Ok(secret)
}

/// What the legacy Secret holds for `name`: its `resourceVersion`, phase and the user's value.
pub(super) fn view(secret: &Secret, name: &str) -> Result<LegacyView, StoreError> {
    let resource_version = match secret.metadata.resource_version.as_deref() {
        Some(v) if !v.is_empty() => v.to_owned(),
        _ => {
            return Err(StoreError::Unavailable(format!(
                "the Kubernetes API answered with a {} without metadata.resourceVersion",
                secret_ref()
            )));
        }
    };
    Ok(LegacyView {
        resource_version,
        phase: secret
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(CREDENTIALS_LAYOUT_ANNOTATION))
            .cloned(),
        value: secret
            .data
            .as_ref()
            .and_then(|data| data.get(name))
            .map(|bytes| base64::engine::general_purpose::STANDARD.encode(&bytes.0)),
    })
}

/// The version of `name` in the legacy Secret as a write's answer returned it.
pub(super) fn version_in(secret: &Secret, name: &str) -> Result<Version, StoreError> {
    let view = view(secret, name)?;
    Ok(match layout::after_legacy(Some(&view)) {
        AfterLegacy::Found(found) | AfterLegacy::AskAgain(found) => found.version(),
        // Not reached after a write (the phase was added before the read); the legacy versions.
        AfterLegacy::AddPhase(_) | AfterLegacy::UnknownPhase => match view.value {
            Some(value) => Found::Legacy(value).version(),
            None => Found::LegacyAbsent(view.resource_version).version(),
        },
    })
}

/// The merge patch setting (or, with `None`, removing) exactly one key, guarded by the Secret's
/// `resourceVersion`.
pub(super) fn merge_patch(name: &str, resource_version: &str, value: Option<String>) -> serde_json::Value {
    let mut data = serde_json::Map::new();
    data.insert(
        name.to_owned(),
        value.map_or(serde_json::Value::Null, serde_json::Value::String),
    );
    serde_json::json!({
        "metadata": { "resourceVersion": resource_version },
        "data": data,
    })
}

/// Commits a batch of entry writes: a user's repeated write is a conflict at once (it read the
/// value the first replaces); the others are grouped by the phase they test, and each group of
/// two or more is one patch; when its tests fail or the Secret would be too large, each is sent
/// alone so only the stale or growing ones fail.
pub(super) async fn commit(client: Client, size: SecretSize, batch: Batch) {
    let (first, repeats) = group_commit::split_repeats(batch);
    for (write, reply) in repeats {
        let _ = reply.send(Err(StoreError::Conflict(write.name)));
    }
    let mut groups: BTreeMap<Option<Phase>, Batch> = BTreeMap::new();
    for (write, reply) in first {
        groups.entry(write.phase).or_default().push((write, reply));
    }
    for group in groups.into_values() {
        commit_group(&client, &size, group).await;
    }
}

/// Commits writes that all test the same phase.
async fn commit_group(client: &Client, size: &SecretSize, group: Batch) {
    if group.len() > 1 {
        match send_entry_writes(client, size, group.iter().map(|(w, _)| w), "(several users)").await {
            Ok(secret) => {
                for (write, reply) in group {
                    let _ = reply.send(version_in(&secret, &write.name));
                }
                return;
            }
            Err(StoreError::Conflict(_) | StoreError::Full(_)) => {}
            Err(error) => {
                for (_, reply) in group {
                    let _ = reply.send(Err(error.clone()));
                }
                return;
            }
        }
    }
    for (write, reply) in group {
        let result = send_entry_writes(client, size, [&write], &write.name)
            .await
            .and_then(|secret| version_in(&secret, &write.name));
        let _ = reply.send(result);
    }
}

/// PATCHes the Secret with the JSON Patch of `writes` (which share one phase); `user` names the
/// conflict when a test fails.
async fn send_entry_writes<'a>(
    client: &Client,
    size: &SecretSize,
    writes: impl IntoIterator<Item = &'a EntryWrite>,
    user: &str,
) -> Result<Secret, StoreError> {
    let writes: Vec<&EntryWrite> = writes.into_iter().collect();
    let phase = writes.first().and_then(|w| w.phase);
    let patch = group_commit::patch_of(phase.map(layout::phase_test), writes);
    let request = requests()
        .patch(CREDENTIALS_SECRET_NAME, &patch_params(), &Patch::Merge(&patch))
        .map(|mut request| {
            // The body is the operations array as given; only the media type differs.
            request.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static(JSON_PATCH),
            );
            request
        })
        .map_err(|e| build_error(&e))?;
    let text = client
        .request_text(request)
        .await
        .map_err(|e| secret_error(&e, Some(user), size))?;
    let secret = parse_secret(&text)?;
    size.observe(&secret);
    Ok(secret)
}

/// How the legacy Secret is named in errors.
pub(super) fn secret_ref() -> String {
    format!("Secret {NAMESPACE}/{CREDENTIALS_SECRET_NAME}")
}

/// Parses the Secret from the API's text, with an error that carries no content.
fn parse_secret(text: &str) -> Result<Secret, StoreError> {
    serde_json::from_str(text).map_err(|e| {
        StoreError::Unavailable(format!(
            "the Kubernetes API answered with a {} that cannot be parsed: line {} column {}",
            secret_ref(),
            e.line(),
            e.column()
        ))
    })
}

/// Maps a failed Secret call: 404 is a missing Secret; on a write for `user`, 409 (the
/// `resourceVersion` moved) and a 422 without field causes (a JSON Patch `test` failed, of a
/// value or of the phase) are conflicts, and a 422 saying the data is too long is a full Secret;
/// anything else is unavailable. Only the status code and reason are kept from an API answer.
pub(super) fn secret_error(error: &kube::Error, user: Option<&str>, size: &SecretSize) -> StoreError {
    match (error, user) {
        (kube::Error::Api(status), _) if status.code == 404 => StoreError::Missing(format!(
            "{} does not exist; the controller (or `ichor init`) creates it",
            secret_ref()
        )),
        (kube::Error::Api(status), Some(_)) if status.code == 422 && is_too_long(status) => full(size),
        (kube::Error::Api(status), Some(user)) if status.code == 409 => StoreError::Conflict(user.to_owned()),
        (kube::Error::Api(status), Some(user)) if status.code == 422 && !is_validation_failure(status) => {
            StoreError::Conflict(user.to_owned())
        }
        (kube::Error::Api(status), _) => StoreError::Unavailable(format!(
            "{}: the Kubernetes API answered {} {}",
            secret_ref(),
            status.code,
            status.reason
        )),
        (other, _) => StoreError::Unavailable(format!("{}: {}", secret_ref(), transport_text(other))),
    }
}

/// Whether a 422 refuses a Secret's `data` as longer than the API server allows (a field cause
/// `FieldValueTooLong` on `data`).
pub(super) fn is_too_long(status: &kube::core::Status) -> bool {
    status.details.as_ref().is_some_and(|details| {
        details
            .causes
            .iter()
            .any(|cause| cause.reason == "FieldValueTooLong" && cause.field == "data")
    })
}

/// The error of a write refused because the Secret would pass the API server's limit.
fn full(size: &SecretSize) -> StoreError {
    let held = size
        .bytes()
        .map(|b| format!(" (it held {b} at this replica's last read)"))
        .unwrap_or_default();
    StoreError::Full(format!(
        "{} would pass the API server's limit of {SECRET_DATA_LIMIT} bytes of data{held}, so the write \
         was refused and nothing was written; {FULL_REMEDY}",
        secret_ref()
    ))
}

/// Whether a 422 names a field of the object (a validation failure, which no retry fixes), rather
/// than a failed JSON Patch operation (which the API server answers as a generic 422 whose only
/// cause, if any, is the patch error without a field).
fn is_validation_failure(status: &kube::core::Status) -> bool {
    status
        .details
        .as_ref()
        .is_some_and(|details| details.causes.iter().any(|cause| !cause.field.is_empty()))
}
