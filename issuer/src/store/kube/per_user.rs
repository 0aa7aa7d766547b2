//! One Secret per user: the entry of user `<name>` in the Secret
//! [`user_credentials_secret`]`(<name>)` of [`CREDENTIALS_NAMESPACE`], of type
//! [`USER_CREDENTIALS_TYPE`], labelled [`USER_LABEL`]`: <name>`, its one data key
//! [`USER_CREDENTIALS_KEY`] holding the entry's JSON (the same value as a key of the legacy
//! Secret). docs/credentials-sharding.md, "The design".
//!
//! This module builds the requests and reads the answers (pure); [`super`] sends them. Every
//! write is conditional: a change is a JSON merge patch carrying the `resourceVersion` read, a
//! first entry a create (of two creators one gets 409 AlreadyExists), a removal a delete with the
//! uid and `resourceVersion` read as preconditions. One key per object makes the
//! `resourceVersion` an exact precondition: it moves only when this user's entry changes.
//! Errors name the object and the HTTP status, never a value.

use std::collections::BTreeMap;

use ichor_renderers::contract::{
    CREDENTIALS_NAMESPACE, PART_OF_LABEL, PART_OF_VALUE, USER_CREDENTIALS_KEY, USER_CREDENTIALS_TYPE,
    USER_LABEL, user_credentials_secret,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Preconditions};

use super::size::SECRET_DATA_LIMIT;
use crate::store::{FULL_REMEDY, StoreError, Version};

/// The [`Version`] of a user with no entry in either layout: a first entry creates the Secret.
pub const NO_ENTRY_VERSION: &str = "absent-user";
/// The prefix of the [`Version`] of an entry in its own Secret: `user@<uid>@<resourceVersion>`.
const VERSION_PREFIX: &str = "user@";

/// The version of an entry read from the user's Secret with this uid and `resourceVersion`.
pub fn version(uid: &str, resource_version: &str) -> Version {
    Version(format!("{VERSION_PREFIX}{uid}@{resource_version}"))
}

/// The uid and `resourceVersion` of a version made by [`version`]; `None` for any other string
/// (including empty parts: an empty `resourceVersion` is no precondition to the API server).
pub fn parse_version(version: &Version) -> Option<(String, String)> {
    let (uid, resource_version) = version.0.strip_prefix(VERSION_PREFIX)?.split_once('@')?;
    (!uid.is_empty() && !resource_version.is_empty() && !resource_version.contains('@'))
        .then(|| (uid.to_owned(), resource_version.to_owned()))
}

/// How the Secret of `user` is named in errors and logs.
pub fn secret_ref(user: &str) -> String {
    format!("Secret {CREDENTIALS_NAMESPACE}/{}", user_credentials_secret(user))
}

/// The Secret holding `user`'s entry `value` (base64), as created.
pub fn new_secret(user: &str, value: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": user_credentials_secret(user),
            "namespace": CREDENTIALS_NAMESPACE,
            "labels": { USER_LABEL: user, PART_OF_LABEL: PART_OF_VALUE },
        },
        "type": USER_CREDENTIALS_TYPE,
        "data": { USER_CREDENTIALS_KEY: value },
    })
}

/// The merge patch setting the entry to `value` (base64), refused with 409 unless the Secret is
/// still at `resource_version`.
pub fn change_patch(resource_version: &str, value: &str) -> serde_json::Value {
    serde_json::json!({
        "metadata": { "resourceVersion": resource_version },
        "data": { USER_CREDENTIALS_KEY: value },
    })
}

/// The delete options refusing (409) unless the Secret is still the one read (`uid`) at the
/// version read.
pub fn delete_params(uid: &str, resource_version: &str) -> DeleteParams {
    DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: Some(resource_version.to_owned()),
        }),
        ..DeleteParams::default()
    }
}

/// A user's Secret as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserSecret {
    /// Its uid.
    pub uid: String,
    /// Its resourceVersion.
    pub resource_version: String,
    /// The entry's JSON (decoded), if the key is there.
    pub entry: Option<Vec<u8>>,
}

/// Reads `user`'s Secret from the API's text: its uid, `resourceVersion` and entry. A Secret of
/// another type is not a credentials Secret (the namespace's admission policy admits no such
/// object; one made around it is not trusted). Errors carry no content.
pub fn parse(user: &str, text: &str) -> Result<UserSecret, StoreError> {
    let secret: Secret = serde_json::from_str(text).map_err(|e| {
        StoreError::Unavailable(format!(
            "the Kubernetes API answered with a {} that cannot be parsed: line {} column {}",
            secret_ref(user),
            e.line(),
            e.column()
        ))
    })?;
    if secret.type_.as_deref() != Some(USER_CREDENTIALS_TYPE) {
        return Err(StoreError::Corrupt {
            user: user.to_owned(),
            reason: format!(
                "{} is not of type {USER_CREDENTIALS_TYPE}; it is not used",
                secret_ref(user)
            ),
        });
    }
    let field = |value: Option<String>, what: &str| {
        value.filter(|v| !v.is_empty()).ok_or_else(|| {
            StoreError::Unavailable(format!(
                "the Kubernetes API answered with a {} without metadata.{what}",
                secret_ref(user)
            ))
        })
    };
    let uid = field(secret.metadata.uid, "uid")?;
    let resource_version = field(secret.metadata.resource_version, "resourceVersion")?;
    let mut data: BTreeMap<_, _> = secret.data.unwrap_or_default();
    Ok(UserSecret {
        uid,
        resource_version,
        entry: data.remove(USER_CREDENTIALS_KEY).map(|bytes| bytes.0),
    })
}

/// What was asked of the user's Secret, for the meaning of its refusals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// GET (a 404 is an absent Secret and never reaches [`error`]).
    Read,
    /// POST of a first entry.
    Create,
    /// Merge patch under the resourceVersion read.
    Change,
    /// DELETE with preconditions.
    Delete,
}

/// Maps a refused call on `user`'s Secret: on a write, 409 (AlreadyExists on a create, the
/// `resourceVersion` or uid moved on a change or a delete) is a conflict, and so is 404 on a
/// change or delete (removed since the read); a 404 on a create is the missing namespace; a 422
/// whose cause is `data` too long is a full Secret; anything else is unavailable. Only the status
/// code and reason of an API answer are kept.
pub fn error(error: &kube::Error, user: &str, call: Call) -> StoreError {
    let kube::Error::Api(status) = error else {
        return StoreError::Unavailable(format!("{}: {}", secret_ref(user), super::transport_text(error)));
    };
    match (status.code, call) {
        (409, Call::Create | Call::Change | Call::Delete) | (404, Call::Change | Call::Delete) => {
            StoreError::Conflict(user.to_owned())
        }
        (404, Call::Create) => StoreError::Missing(format!(
            "the namespace {CREDENTIALS_NAMESPACE} does not exist, so {} cannot be created; \
             `ichor init` creates it",
            secret_ref(user)
        )),
        (422, Call::Create | Call::Change) if super::legacy::is_too_long(status) => {
            StoreError::Full(format!(
                "{} would pass the API server's limit of {SECRET_DATA_LIMIT} bytes of data, so the write was \
             refused and nothing was written; {FULL_REMEDY}",
                secret_ref(user)
            ))
        }
        (403, _) => StoreError::Unavailable(format!(
            "{}: the Kubernetes API answered 403 {}; the issuer's Role in {CREDENTIALS_NAMESPACE} \
             (rendered by the chart) grants get, create, patch and delete on Secrets there",
            secret_ref(user),
            status.reason
        )),
        (code, _) => StoreError::Unavailable(format!(
            "{}: the Kubernetes API answered {code} {}",
            secret_ref(user),
            status.reason
        )),
    }
}

#[cfg(test)]
mod tests;
