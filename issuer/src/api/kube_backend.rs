//! The cluster [`UserBackend`]: `IchorUser` writes through the Kubernetes API **as the caller**.
//!
//! Every create, replace and delete carries the impersonation headers of the caller's Kubernetes
//! identity, exactly as the apiserver's OIDC mapping gives it to a token of this issuer (the
//! rendered `AuthenticationConfiguration`: username prefix and groups prefix `ichor:`):
//! `Impersonate-User: ichor:<name>` and one `Impersonate-Group: ichor:<role>` per role of the
//! caller's `IchorUser` (read from the object, never from the token). `system:authenticated` is
//! not sent: the apiserver adds it to every impersonated user, and the chart lets the issuer
//! impersonate only the `ichor:<role>` groups. So the apiserver's RBAC and the admission webhook
//! (grant rule, last enabled admin, checked against the request's user) decide, the same answer
//! as for that user's `kubectl`.
//!
//! # Guarantees
//! - A body carries `apiVersion`, `kind`, `metadata` and `spec`; never `status` (an `IchorUser`
//!   holds no secret).
//! - Creates and replaces name the field manager [`FIELD_MANAGER`].
//! - An update reads the object (as the issuer's ServiceAccount, which may read users), replaces
//!   its `spec` and PUTs it carrying the `resourceVersion` read, so a concurrent write is never
//!   overwritten: a 409 retries from a fresh read, at most [`MAX_UPDATE_ATTEMPTS`] attempts in
//!   all, then the call fails with [`ApiError::Conflict`].
//! - Errors: 404 [`ApiError::NotFound`]; 409 on create [`ApiError::AlreadyExists`]; 403
//!   [`ApiError::Denied`] with the apiserver's message (for a webhook denial, the webhook's
//!   sentence), bounded to [`MAX_MESSAGE_CHARS`]; 400 and 422 [`ApiError::InvalidArgument`]
//!   naming the field the apiserver names; anything else [`ApiError::Unavailable`].

use std::time::Duration;

use async_trait::async_trait;
use http::{HeaderMap, HeaderValue};
use ichor_renderers::{
    auth::user_name::ICHOR_PREFIX,
    crd::{IchorUser, IchorUserSpec, NAMESPACE},
};
use kube::{
    Resource,
    core::{
        Request,
        params::{DeleteParams, GetParams, PostParams, Preconditions},
    },
};
use serde_json::Value;

use super::{
    auth::Caller,
    backend::{Created, UserBackend},
    error::ApiError,
};
use crate::store::{
    UserStore,
    kube::{FIELD_MANAGER, KubeStore},
};

/// The header naming the impersonated user.
pub const IMPERSONATE_USER: &str = "impersonate-user";
/// The header naming one impersonated group (repeated per group).
pub const IMPERSONATE_GROUP: &str = "impersonate-group";
/// How many read–replace attempts an update makes before a conflict is returned.
pub const MAX_UPDATE_ATTEMPTS: usize = 4;
/// The longest apiserver message passed to the caller (longer ones are cut, with `…`).
pub const MAX_MESSAGE_CHARS: usize = 1024;
/// The pause before update attempt `n` (from the second) is `n - 1` times this.
const UPDATE_BACKOFF_STEP: Duration = Duration::from_millis(10);

/// The impersonation headers of `caller`: user `ichor:<name>`, a group `ichor:<role>` per role;
/// for an external caller its prefixed user name and the groups the API keeps (only those the
/// chart lets the issuer impersonate).
///
/// # Errors
/// [`ApiError::Internal`] when a name or role cannot be a header value (never for a valid
/// `IchorUser`).
pub fn impersonation(caller: &Caller) -> Result<HeaderMap, ApiError> {
    let value = |s: String| {
        HeaderValue::from_str(&s).map_err(|_| {
            ApiError::Internal(format!(
                "the identity {s:?} cannot be sent as a Kubernetes impersonation header"
            ))
        })
    };
    let mut headers = HeaderMap::new();
    if let Some(external) = &caller.external {
        headers.insert(IMPERSONATE_USER, value(external.username.clone())?);
        for group in &external.api_groups {
            headers.append(IMPERSONATE_GROUP, value(group.clone())?);
        }
        return Ok(headers);
    }
    headers.insert(IMPERSONATE_USER, value(format!("{ICHOR_PREFIX}{}", caller.name))?);
    for role in &caller.roles {
        headers.append(IMPERSONATE_GROUP, value(format!("{ICHOR_PREFIX}{role}"))?);
    }
    Ok(headers)
}

/// Which write failed (the same status means different things per write).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Write {
    Create,
    Update,
    Delete,
}

/// Requests for `IchorUser` objects in `ichor-system`.
fn users() -> Request {
    Request::new(IchorUser::url_path(&(), Some(NAMESPACE)))
}

fn post_params() -> PostParams {
    PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.to_owned()),
    }
}

fn build_error(name: &str, error: &kube::core::request::Error) -> ApiError {
    ApiError::Internal(format!(
        "cannot build the request for IchorUser {NAMESPACE}/{name}: {error}"
    ))
}

/// `text`, cut to [`MAX_MESSAGE_CHARS`] characters.
fn bounded(text: &str) -> String {
    if text.chars().count() > MAX_MESSAGE_CHARS {
        let mut cut: String = text.chars().take(MAX_MESSAGE_CHARS).collect();
        cut.push('…');
        cut
    } else {
        text.to_owned()
    }
}

/// The API error of a failed `IchorUser` call about `name`.
fn write_error(error: &kube::Error, write: Write, name: &str) -> ApiError {
    let kube::Error::Api(status) = error else {
        return ApiError::Unavailable(format!(
            "IchorUser {NAMESPACE}/{name}: the Kubernetes API cannot be reached: {}",
            bounded(&error.to_string())
        ));
    };
    match status.code {
        404 => ApiError::NotFound(name.to_owned()),
        409 if write == Write::Create => ApiError::AlreadyExists(name.to_owned()),
        409 => ApiError::Conflict(format!(
            "user {name:?} was changed concurrently: read it again and retry"
        )),
        403 if !status.message.trim().is_empty() => ApiError::Denied(bounded(status.message.trim())),
        403 => ApiError::Denied(format!(
            "the Kubernetes API refused this change of user {name:?} (403 Forbidden)"
        )),
        400 | 422 => {
            let field = status
                .details
                .as_ref()
                .and_then(|d| d.causes.iter().find(|c| !c.field.is_empty()))
                .map_or_else(|| "user".to_owned(), |c| c.field.clone());
            let reason = if status.message.trim().is_empty() {
                format!(
                    "the Kubernetes API refused it ({} {})",
                    status.code, status.reason
                )
            } else {
                bounded(status.message.trim())
            };
            ApiError::InvalidArgument { field, reason }
        }
        401 => ApiError::Unavailable(
            "the Kubernetes API did not accept the issuer's own credentials (401 Unauthorized): check its \
             ServiceAccount token"
                .to_owned(),
        ),
        code => ApiError::Unavailable(format!(
            "IchorUser {NAMESPACE}/{name}: the Kubernetes API answered {code} {}",
            bounded(&status.reason)
        )),
    }
}

/// The object created for `user`: its name in `ichor-system` and its spec.
pub fn create_body(name: &str, spec: &IchorUserSpec) -> Result<Value, ApiError> {
    let spec =
        serde_json::to_value(spec).map_err(|e| ApiError::Internal(format!("spec of {name:?}: {e}")))?;
    Ok(serde_json::json!({
        "apiVersion": IchorUser::api_version(&()),
        "kind": IchorUser::kind(&()),
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }))
}

/// The replacement of the object `read` (as the API returned it) with `spec`: its metadata as
/// read (with its `resourceVersion`, the precondition; without `managedFields`, which the API
/// server keeps), the new spec, and no status.
///
/// # Errors
/// [`ApiError::Unavailable`] when `read` is not an object with a `metadata.resourceVersion`
/// (replacing without one would overwrite blindly).
pub fn replacement(name: &str, read: &Value, spec: &IchorUserSpec) -> Result<Value, ApiError> {
    let unusable = |what: &str| {
        ApiError::Unavailable(format!(
            "the Kubernetes API answered IchorUser {NAMESPACE}/{name} {what}"
        ))
    };
    let mut metadata = read
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .ok_or_else(|| unusable("without metadata"))?;
    if metadata
        .get("resourceVersion")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err(unusable("without metadata.resourceVersion"));
    }
    metadata.remove("managedFields");
    let spec =
        serde_json::to_value(spec).map_err(|e| ApiError::Internal(format!("spec of {name:?}: {e}")))?;
    Ok(serde_json::json!({
        "apiVersion": IchorUser::api_version(&()),
        "kind": IchorUser::kind(&()),
        "metadata": metadata,
        "spec": spec,
    }))
}

impl KubeStore {
    /// Sends `request` as `caller` (with its impersonation headers).
    async fn send_as(
        &self,
        caller: &Caller,
        mut request: http::Request<Vec<u8>>,
    ) -> Result<String, WriteFailure> {
        let headers = impersonation(caller).map_err(WriteFailure::Local)?;
        request.headers_mut().extend(headers);
        self.client()
            .request_text(request)
            .await
            .map_err(WriteFailure::Kube)
    }

    /// Reads the object `name` as the issuer (uncached, as JSON).
    async fn read_object(&self, name: &str) -> Result<Value, ApiError> {
        let request = users()
            .get(name, &GetParams::default())
            .map_err(|e| build_error(name, &e))?;
        let text = self
            .client()
            .request_text(request)
            .await
            .map_err(|e| write_error(&e, Write::Update, name))?;
        serde_json::from_str(&text).map_err(|e| {
            ApiError::Unavailable(format!(
                "the Kubernetes API answered IchorUser {NAMESPACE}/{name} with text that cannot be parsed: \
                 line {} column {}",
                e.line(),
                e.column()
            ))
        })
    }
}

/// Why a write as the caller failed.
enum WriteFailure {
    /// Before sending.
    Local(ApiError),
    /// The API call.
    Kube(kube::Error),
}

impl WriteFailure {
    fn into_api(self, write: Write, name: &str) -> ApiError {
        match self {
            WriteFailure::Local(e) => e,
            WriteFailure::Kube(e) => write_error(&e, write, name),
        }
    }
}

fn object_name(user: &IchorUser) -> Result<&str, ApiError> {
    user.metadata
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::invalid("name", "is required"))
}

#[async_trait]
impl UserBackend for KubeStore {
    async fn create_user(&self, caller: &Caller, user: &IchorUser) -> Result<Created, ApiError> {
        let name = object_name(user)?;
        let body = serde_json::to_vec(&create_body(name, &user.spec)?)
            .map_err(|e| ApiError::Internal(format!("IchorUser {name:?}: {e}")))?;
        let request = users()
            .create(&post_params(), body)
            .map_err(|e| build_error(name, &e))?;
        let result = self.send_as(caller, request).await;
        self.invalidate(name);
        let text = result.map_err(|e| e.into_api(Write::Create, name))?;
        let uid = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|o| o["metadata"]["uid"].as_str().map(str::to_owned));
        Ok(Created { uid })
    }

    /// A DELETE with the created object's uid as precondition: a user of that name created by
    /// someone else since (another uid) is left alone (the API server answers 409).
    async fn undo_create(&self, caller: &Caller, name: &str, created: &Created) -> Result<(), ApiError> {
        let Some(uid) = created.uid.clone() else {
            return Err(ApiError::Internal(format!(
                "IchorUser {name:?}: the API server named no uid when it was created, so it is not removed \
                 unconditionally"
            )));
        };
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let request = users().delete(name, &params).map_err(|e| build_error(name, &e))?;
        let result = self.send_as(caller, request).await;
        self.invalidate(name);
        match result {
            Ok(_) => Ok(()),
            Err(WriteFailure::Kube(kube::Error::Api(status))) if status.code == 409 => {
                Err(ApiError::Conflict(format!(
                    "user {name:?} is no longer the one this request created; it is left in place"
                )))
            }
            Err(e) => Err(e.into_api(Write::Delete, name)),
        }
    }

    async fn update_user(&self, caller: &Caller, user: &IchorUser) -> Result<(), ApiError> {
        let name = object_name(user)?;
        for attempt in 1..=MAX_UPDATE_ATTEMPTS {
            if attempt > 1 {
                let steps = u32::try_from(attempt - 1).unwrap_or(u32::MAX);
                crate::store::sleep(UPDATE_BACKOFF_STEP.saturating_mul(steps)).await;
            }
            let read = self.read_object(name).await?;
            let body = serde_json::to_vec(&replacement(name, &read, &user.spec)?)
                .map_err(|e| ApiError::Internal(format!("IchorUser {name:?}: {e}")))?;
            let request = users()
                .replace(name, &post_params(), body)
                .map_err(|e| build_error(name, &e))?;
            let result = self.send_as(caller, request).await;
            self.invalidate(name);
            match result {
                Ok(_) => return Ok(()),
                Err(WriteFailure::Kube(kube::Error::Api(status))) if status.code == 409 => {
                    tracing::debug!(user = %name, attempt, "IchorUser changed concurrently; reading it again");
                }
                Err(e) => return Err(e.into_api(Write::Update, name)),
            }
        }
        Err(ApiError::Conflict(format!(
            "user {name:?} kept changing while it was updated ({MAX_UPDATE_ATTEMPTS} attempts): read it again \
             and retry"
        )))
    }

    async fn delete_user(&self, caller: &Caller, name: &str) -> Result<(), ApiError> {
        let request = users()
            .delete(name, &DeleteParams::default())
            .map_err(|e| build_error(name, &e))?;
        let result = self.send_as(caller, request).await;
        self.invalidate(name);
        result.map(drop).map_err(|e| e.into_api(Write::Delete, name))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn caller(roles: &[&str]) -> Caller {
        Caller::ichor("alice", roles)
    }

    #[test]
    fn impersonates_an_external_caller_as_its_prefixed_name_and_kept_groups_only() {
        let external = Caller::from_external(crate::external::ExternalIdentity {
            username: "oidc:carol@example.org".into(),
            groups: vec!["oidc:dev".into(), "oidc:ops".into()],
            api_groups: vec!["oidc:ops".into()],
            display_name: None,
            email: None,
        });
        let headers = impersonation(&external).unwrap();
        assert_eq!(headers.get(IMPERSONATE_USER).unwrap(), "oidc:carol@example.org");
        let groups: Vec<&str> = headers
            .get_all(IMPERSONATE_GROUP)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert_eq!(groups, ["oidc:ops"]);
    }

    #[test]
    fn impersonates_the_ichor_user_and_one_group_per_role_without_system_groups() {
        let headers = impersonation(&caller(&["operator", "viewer"])).unwrap();
        assert_eq!(headers.get(IMPERSONATE_USER).unwrap(), "ichor:alice");
        let groups: Vec<&str> = headers
            .get_all(IMPERSONATE_GROUP)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert_eq!(groups, ["ichor:operator", "ichor:viewer"]);
        assert!(
            impersonation(&caller(&[]))
                .unwrap()
                .get(IMPERSONATE_GROUP)
                .is_none()
        );
    }

    #[test]
    fn a_replacement_keeps_the_read_metadata_drops_status_and_managed_fields() {
        let read = serde_json::json!({
            "apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
            "metadata": {"name": "bob", "namespace": "ichor-system", "resourceVersion": "41",
                         "labels": {"team": "a"}, "managedFields": [{"manager": "kubectl"}]},
            "spec": {"roles": ["viewer"]},
            "status": {"conditions": []},
        });
        let spec = IchorUserSpec {
            roles: vec!["operator".into()],
            ..IchorUserSpec::default()
        };
        let body = replacement("bob", &read, &spec).unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "apiVersion": "ichor.maesh.dev/v1alpha1", "kind": "IchorUser",
                "metadata": {"name": "bob", "namespace": "ichor-system", "resourceVersion": "41",
                             "labels": {"team": "a"}},
                "spec": {"roles": ["operator"], "disabled": false},
            })
        );
        let without = serde_json::json!({"metadata": {"name": "bob"}});
        assert!(matches!(
            replacement("bob", &without, &spec),
            Err(ApiError::Unavailable(_))
        ));
    }

    #[test]
    fn a_long_apiserver_message_is_cut() {
        let long = "x".repeat(MAX_MESSAGE_CHARS + 10);
        let cut = bounded(&long);
        assert_eq!(cut.chars().count(), MAX_MESSAGE_CHARS + 1);
        assert!(cut.ends_with('…'));
    }
}
