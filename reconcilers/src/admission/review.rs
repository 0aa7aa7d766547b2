//! The `AdmissionReview` v1 wire format (`admission.k8s.io/v1`) through kube-core's types
//! (`kube::core::admission`): [`parse`] reads the request as the kube-apiserver sends it into an
//! [`AdmissionRequest`], refusing anything else with a reason ([`ReviewError`], answered with
//! HTTP 400), and [`answer`] writes the [`AdmissionReview`] that carries a [`Verdict`].
//!
//! What this module adds to kube-core's types, and why:
//!
//! - The envelope (`apiVersion`, `kind`, `request`) is read leniently, so a body of another
//!   version, or with no type fields at all, is told to set `admissionReviewVersions: ["v1"]`
//!   instead of getting a serde message; kube-core's `AdmissionReview` flattens a `TypeMeta`
//!   whose two fields are required.
//! - The request itself is kube-core's, as strict as the Go type on what the kube-apiserver
//!   always sends (`uid`, `kind`, `resource`, `operation`, `userInfo`), and its objects are
//!   [`DynamicObject`]s: an object that is not a JSON object, or whose `metadata` is not an
//!   `ObjectMeta`, is a malformed review. What the rules read of the rest (`spec`) is decoded
//!   by each rule (`decode`), so a bad spec is a denial naming the field.
//! - An empty `uid` is refused: the answer must echo it.
//! - The answer has the shape of the Go `AdmissionResponse`: no `status` on an allow (kube-core
//!   always writes one, empty), and on a denial `Failure`, reason `Forbidden`, code 403.

use kube::core::admission::{self, META_API_VERSION_V1, META_KIND};
use kube::core::{DynamicObject, ObjectMeta, Status, TypeMeta};
use serde::Deserialize;

pub use kube::core::admission::{AdmissionResponse, AdmissionReview, Operation};

/// One admission request as the rules read it: kube-core's, with the objects kept dynamic.
pub type AdmissionRequest = admission::AdmissionRequest<DynamicObject>;

/// The `apiVersion` of an `AdmissionReview` v1.
pub const API_VERSION: &str = META_API_VERSION_V1;
/// The `kind` of an `AdmissionReview`.
pub const KIND: &str = META_KIND;
/// The largest request body read: 3 MiB, the kube-apiserver's own request size limit, so a
/// legitimate review always fits.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Why a body is not an `AdmissionReview` v1 (answered with HTTP 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReviewError {
    /// Not JSON, or a field of the wrong type, or a field the kube-apiserver always sends missing.
    #[error("the body is not a valid AdmissionReview: {0}")]
    Json(String),
    /// Another `apiVersion`/`kind`.
    #[error(
        "the body is a {api_version}/{kind}, not an admission.k8s.io/v1 AdmissionReview; \
         set admissionReviewVersions: [\"v1\"] in the webhook configuration"
    )]
    NotV1 {
        /// The `apiVersion` received.
        api_version: String,
        /// The `kind` received.
        kind: String,
    },
    /// No `request`.
    #[error("the AdmissionReview has no request: the field request is required")]
    NoRequest,
    /// An empty `request.uid`.
    #[error("request.uid: required: the response must echo it")]
    NoUid,
}

/// The envelope of a review body. Its name shows in the message for a body that is not a JSON
/// object ("expected struct WireReview").
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireReview {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    request: Option<AdmissionRequest>,
}

/// Parses a body as an `AdmissionReview` v1 request. The request's `types` are set to v1, and an
/// empty `subResource` reads as none.
///
/// # Errors
/// [`ReviewError`] when the body is not JSON, not a v1 `AdmissionReview`, or has no request or uid.
pub fn parse(body: &[u8]) -> Result<AdmissionRequest, ReviewError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let wire: WireReview = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path.is_empty() {
            ReviewError::Json(inner.to_string())
        } else {
            ReviewError::Json(format!("{path}: {inner}"))
        }
    })?;
    de.end().map_err(|e| ReviewError::Json(e.to_string()))?;
    if wire.api_version != API_VERSION || wire.kind != KIND {
        return Err(ReviewError::NotV1 {
            api_version: clip(&wire.api_version),
            kind: clip(&wire.kind),
        });
    }
    let mut request = wire.request.ok_or(ReviewError::NoRequest)?;
    if request.uid.is_empty() {
        return Err(ReviewError::NoUid);
    }
    request.types = v1();
    request.sub_resource = request.sub_resource.filter(|s| !s.is_empty());
    Ok(request)
}

fn v1() -> TypeMeta {
    TypeMeta {
        api_version: API_VERSION.to_owned(),
        kind: KIND.to_owned(),
    }
}

fn clip(s: &str) -> String {
    if s.is_empty() {
        "(none)".to_owned()
    } else {
        s.chars().take(64).collect()
    }
}

/// The user name of a request (empty if the review carried none).
pub fn username(request: &AdmissionRequest) -> &str {
    request.user_info.username.as_deref().unwrap_or_default()
}

/// The groups of a request's user.
pub fn groups(request: &AdmissionRequest) -> &[String] {
    request.user_info.groups.as_deref().unwrap_or_default()
}

/// The namespace of a request (empty for a cluster-scoped object).
pub fn namespace(request: &AdmissionRequest) -> &str {
    request.namespace.as_deref().unwrap_or_default()
}

/// The operation as the review writes it (`CREATE`, `UPDATE`, `DELETE`, `CONNECT`).
pub fn operation_name(operation: &Operation) -> &'static str {
    match operation {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

/// What a rule decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The request may proceed.
    Allow,
    /// The request is refused; the message names the field and is shown to the client.
    Deny(String),
}

impl Verdict {
    /// A denial with this message.
    pub fn deny(message: impl Into<String>) -> Self {
        Self::Deny(message.into())
    }

    /// Whether the request may proceed.
    pub fn is_allowed(&self) -> bool {
        matches!(self, Self::Allow)
    }
}

/// The review answering `request` with `verdict` (kube-core's `AdmissionResponse::from`,
/// `deny` and `into_review`), always v1; a denial carries `Failure`, `Forbidden` and 403.
pub fn respond(request: &AdmissionRequest, verdict: Verdict) -> AdmissionReview<DynamicObject> {
    let mut response = AdmissionResponse::from(request);
    response.types = v1();
    if let Verdict::Deny(message) = verdict {
        response = response.deny(&message);
        response.result = Status::failure(&message, "Forbidden").with_code(403);
    }
    response.into_review()
}

/// The JSON document of [`respond`]'s review, without the empty `status` kube-core writes on an
/// allow (the Go type omits it, and so did this webhook's answers).
///
/// # Errors
/// When the review cannot be serialized (it always can: it holds no map with non-string keys).
pub fn answer(request: &AdmissionRequest, verdict: Verdict) -> Result<serde_json::Value, serde_json::Error> {
    let mut document = serde_json::to_value(respond(request, verdict))?;
    if let Some(response) = document
        .get_mut("response")
        .and_then(serde_json::Value::as_object_mut)
        && response
            .get("status")
            .and_then(serde_json::Value::as_object)
            .is_some_and(serde_json::Map::is_empty)
    {
        response.shift_remove("status");
    }
    Ok(document)
}

/// The parts of an object a rule reads: its metadata, and its `spec` decoded as `S`.
#[derive(Debug)]
pub(crate) struct Decoded<'a, S> {
    /// The object's metadata.
    pub(crate) metadata: &'a ObjectMeta,
    /// The object's `spec` (its default when absent).
    pub(crate) spec: S,
}

#[derive(Deserialize)]
struct SpecOf<S> {
    #[serde(default)]
    spec: S,
}

/// Decodes the `spec` of one of the request's objects (`which`: `object` or `oldObject`) into
/// `S`, or a denial naming where it failed.
pub(crate) fn decode<'a, S: serde::de::DeserializeOwned + Default>(
    which: &str,
    kind: &str,
    object: Option<&'a DynamicObject>,
) -> Result<Decoded<'a, S>, Verdict> {
    let object =
        object.ok_or_else(|| Verdict::deny(format!("request.{which}: required: the {kind} is missing")))?;
    let spec: SpecOf<S> = serde_path_to_error::deserialize(&object.data).map_err(|e| {
        let path = e.path().to_string();
        Verdict::deny(format!(
            "request.{which}: not a valid {kind}: {path}: {}",
            e.into_inner()
        ))
    })?;
    Ok(Decoded {
        metadata: &object.metadata,
        spec: spec.spec,
    })
}
