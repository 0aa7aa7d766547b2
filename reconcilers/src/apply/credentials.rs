//! The garbage collection's removal of a gone user's own credentials Secret (in the credentials
//! namespace, docs/credentials-sharding.md): a DELETE with the observed `uid` as precondition,
//! made after the user's legacy key is removed, never blind.
//!
//! The DELETE asks for its answer as `PartialObjectMetadata` and reads it as text it never
//! parses nor logs (a Secret's DELETE may answer with the object, its entry included); a
//! conflict reads the Secret again by metadata only, as the watch does.

use ichor_controller_core::identity::effects::{PerUserSecretRef, RemoveCredentialsKeyRequest};
use ichor_graph::{Event, ObjectKey};
use kube::api::{Api, DeleteParams, DynamicObject, Preconditions};

use super::error::{ApplyError, Failure, classify};
use super::{KubeApplier, Written};
use crate::run::convert::{metadata_only, to_object};

/// The `Accept` of a request whose answer is wanted as metadata only (the API server transforms
/// the object it would return into `PartialObjectMetadata`; JSON is the fallback).
pub(crate) const METADATA_ACCEPT: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

/// The key of the Secret a removal names.
pub(crate) fn per_user_key(own: &PerUserSecretRef) -> ObjectKey {
    ObjectKey::new("Secret", own.namespace.clone(), own.name.clone())
}

/// The DELETE of a gone user's own Secret: preconditioned on the `uid` it was observed with, so
/// a Secret created again under the name since (a new user of the name, its first password) is
/// never deleted on the strength of the old one's observation. Without an observed uid there is
/// no request ([`ApplyError::NoUid`]): nothing is deleted blind.
///
/// # Errors
/// [`ApplyError::NoUid`] when the removal names no uid.
pub(crate) fn per_user_delete(own: &PerUserSecretRef) -> Result<http::Request<Vec<u8>>, ApplyError> {
    let uid = own
        .uid
        .clone()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| ApplyError::NoUid {
            key: per_user_key(own),
        })?;
    let what = format!("deletion of Secret {}", per_user_key(own));
    secret_delete(&own.namespace, &own.name, Some(&uid), None, &what)
}

/// The DELETE of the Secret `name` in `namespace`, refused (409) unless it is still the object
/// of `uid` and/or at `resource_version`, its answer asked for as metadata only (a Secret's
/// DELETE may answer with the object, its data included). Every DELETE of a Secret the
/// controller sends is built here.
///
/// # Errors
/// [`ApplyError::Malformed`] (naming `what`) when the request cannot be built from the name.
pub(crate) fn secret_delete(
    namespace: &str,
    name: &str,
    uid: Option<&str>,
    resource_version: Option<&str>,
    what: &str,
) -> Result<http::Request<Vec<u8>>, ApplyError> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: uid.map(str::to_owned),
            resource_version: resource_version.map(str::to_owned),
        }),
        ..DeleteParams::default()
    };
    let mut request = kube::core::Request::new(format!("/api/v1/namespaces/{namespace}/secrets"))
        .delete(name, &params)
        .map_err(|e| ApplyError::Malformed {
            what: what.to_owned(),
            message: e.to_string(),
        })?;
    let accept = http::HeaderValue::from_static(METADATA_ACCEPT);
    request.headers_mut().insert(http::header::ACCEPT, accept);
    Ok(request)
}

impl KubeApplier {
    /// Deletes `request`'s per-user Secret `own` ([`per_user_delete`]). 404 is done (someone
    /// else removed it); 409 (the uid differs: the Secret was made again) is stale, and the
    /// Secret (by metadata) and the user are read again for the graph to decide from.
    pub(super) async fn delete_per_user_secret(
        &self,
        request: &RemoveCredentialsKeyRequest,
        own: &PerUserSecretRef,
    ) -> Result<Written, ApplyError> {
        let key = per_user_key(own);
        let what = format!("deletion of Secret {key} of a gone user");
        let delete = per_user_delete(own)?;
        // The answer is dropped unread: only its status matters.
        match self.client.request_text(delete).await {
            Ok(_) => Ok(Written::Done(Event::Deleted(key))),
            Err(e) => match classify(&what, e) {
                Failure::NotFound => Ok(Written::Done(Event::Deleted(key))),
                Failure::Conflict => {
                    let user = ObjectKey::new("IchorUser", request.namespace.clone(), request.key.clone());
                    let user_resource = Self::resource(&user)?;
                    Ok(Written::Stale(vec![
                        self.reread_metadata(&key).await?,
                        self.reread(&user_resource, &user).await?,
                    ]))
                }
                other => Err(other.into_error(&what)),
            },
        }
    }

    /// Reads a Secret again by metadata only, as the credentials watch holds it: the API server
    /// answers a `PartialObjectMetadata` (the Accept header asks for it), so no entry, nor a
    /// `last-applied-configuration` copy of one, reaches this process.
    async fn reread_metadata(&self, key: &ObjectKey) -> Result<Event, ApplyError> {
        let what = format!("read of {key} (metadata) after a conflict");
        let resource = Self::resource(key)?;
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &key.namespace, &resource.api);
        match api.get_metadata_opt(&key.name).await {
            Ok(Some(meta)) => to_object(&resource.api, &metadata_only(meta))
                .map(Event::Applied)
                .ok_or_else(|| ApplyError::Malformed {
                    what,
                    message: "the answer has no name".to_owned(),
                }),
            Ok(None) => Ok(Event::Deleted(key.clone())),
            Err(e) => Err(classify(&what, e).into_error(&what)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn own(uid: Option<&str>) -> PerUserSecretRef {
        PerUserSecretRef {
            namespace: "ichor-credentials".to_owned(),
            name: "ichor-user-bob".to_owned(),
            uid: uid.map(str::to_owned),
        }
    }

    #[test]
    fn a_per_user_removal_is_a_delete_with_the_observed_uid_as_precondition() {
        let request = per_user_delete(&own(Some("u-1"))).expect("a request");
        assert_eq!(request.method(), http::Method::DELETE);
        assert_eq!(
            request.uri().path(),
            "/api/v1/namespaces/ichor-credentials/secrets/ichor-user-bob"
        );
        let body: Value = serde_json::from_slice(request.body()).expect("a JSON body");
        assert_eq!(body["preconditions"], json!({"uid": "u-1"}));
        assert_eq!(
            request
                .headers()
                .get(http::header::ACCEPT)
                .and_then(|v| v.to_str().ok()),
            Some(METADATA_ACCEPT),
            "the answer is asked for as metadata only"
        );
    }

    #[test]
    fn without_an_observed_uid_nothing_is_deleted() {
        for uid in [None, Some("")] {
            let error = per_user_delete(&own(uid)).expect_err("no blind delete");
            assert!(matches!(error, ApplyError::NoUid { .. }), "{error}");
            assert!(error.to_string().contains("ichor-user-bob"), "{error}");
        }
    }
}
