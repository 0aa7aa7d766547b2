//! The `AdmissionReview` v1 wire format (`admission.k8s.io/v1`): the request as the kube-apiserver
//! sends it, parsed strictly enough to refuse anything else with a clear error, and the response.
//!
//! Only the fields the rules read are modelled; the objects stay JSON until a rule decodes them
//! into the type it needs.

use std::collections::BTreeMap;

use k8s_openapi::api::authentication::v1::UserInfo;
use serde::{Deserialize, Serialize};

/// The `apiVersion` of an `AdmissionReview` v1.
pub const API_VERSION: &str = "admission.k8s.io/v1";
/// The `kind` of an `AdmissionReview`.
pub const KIND: &str = "AdmissionReview";
/// The largest request body read: 3 MiB, the kube-apiserver's own request size limit, so a
/// legitimate review always fits.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Why a body is not an `AdmissionReview` v1 (answered with HTTP 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReviewError {
    /// Not JSON, or a field of the wrong type.
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

/// The operation of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operation {
    /// `CREATE`.
    Create,
    /// `UPDATE`.
    Update,
    /// `DELETE`.
    Delete,
    /// Anything else (`CONNECT`), kept as written.
    Other(String),
}

impl Operation {
    fn parse(s: String) -> Self {
        match s.as_str() {
            "CREATE" => Self::Create,
            "UPDATE" => Self::Update,
            "DELETE" => Self::Delete,
            _ => Self::Other(s),
        }
    }

    /// The operation as written in the review.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
            Self::Other(s) => s,
        }
    }
}

/// A group, version and kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct GroupVersionKind {
    /// API group (empty for the core group).
    #[serde(default)]
    pub group: String,
    /// Version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireReview {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    request: Option<WireRequest>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireRequest {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    kind: GroupVersionKind,
    #[serde(default)]
    sub_resource: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    operation: String,
    #[serde(default)]
    user_info: UserInfo,
    #[serde(default)]
    object: Option<serde_json::Value>,
    #[serde(default)]
    old_object: Option<serde_json::Value>,
}

/// One admission request, as the rules read it.
#[derive(Debug, Clone, PartialEq)]
pub struct AdmissionRequest {
    /// The round-trip identifier, echoed in the response.
    pub uid: String,
    /// The kind of the object.
    pub kind: GroupVersionKind,
    /// The subresource, if the request is for one.
    pub sub_resource: Option<String>,
    /// The object's name (may be empty on a create with `generateName`).
    pub name: String,
    /// The namespace (empty for a cluster-scoped object).
    pub namespace: String,
    /// The operation.
    pub operation: Operation,
    /// The authenticated user of the request.
    pub user_info: UserInfo,
    /// The new object (CREATE, UPDATE), `null` read as absent.
    pub object: Option<serde_json::Value>,
    /// The stored object (UPDATE, DELETE), `null` read as absent.
    pub old_object: Option<serde_json::Value>,
}

impl AdmissionRequest {
    /// The user name of the request (empty if the review carried none).
    pub fn username(&self) -> &str {
        self.user_info.username.as_deref().unwrap_or_default()
    }

    /// The groups of the request's user.
    pub fn groups(&self) -> &[String] {
        self.user_info.groups.as_deref().unwrap_or_default()
    }
}

/// Parses a body as an `AdmissionReview` v1 request.
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
    let request = wire.request.ok_or(ReviewError::NoRequest)?;
    if request.uid.is_empty() {
        return Err(ReviewError::NoUid);
    }
    let present = |v: Option<serde_json::Value>| v.filter(|v| !v.is_null());
    Ok(AdmissionRequest {
        uid: request.uid,
        kind: request.kind,
        sub_resource: request.sub_resource.filter(|s| !s.is_empty()),
        name: request.name,
        namespace: request.namespace.unwrap_or_default(),
        operation: Operation::parse(request.operation),
        user_info: request.user_info,
        object: present(request.object),
        old_object: present(request.old_object),
    })
}

fn clip(s: &str) -> String {
    if s.is_empty() {
        "(none)".to_owned()
    } else {
        s.chars().take(64).collect()
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

/// The `status` of a denied response (a `metav1.Status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResponseStatus {
    /// Always `Failure`.
    pub status: &'static str,
    /// The sentence shown to the client.
    pub message: String,
    /// Always `Forbidden`.
    pub reason: &'static str,
    /// Always 403.
    pub code: u16,
}

/// The `response` of an `AdmissionReview`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AdmissionResponse {
    /// The request's uid.
    pub uid: String,
    /// Whether the request may proceed.
    pub allowed: bool,
    /// Why not, when it may not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<ResponseStatus>,
    /// Key-value pairs the kube-apiserver adds to the audit event.
    #[serde(rename = "auditAnnotations", skip_serializing_if = "BTreeMap::is_empty")]
    pub audit_annotations: BTreeMap<String, String>,
}

/// A whole `AdmissionReview` v1 response document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResponseReview {
    /// `admission.k8s.io/v1`.
    #[serde(rename = "apiVersion")]
    pub api_version: &'static str,
    /// `AdmissionReview`.
    pub kind: &'static str,
    /// The answer.
    pub response: AdmissionResponse,
}

impl ResponseReview {
    /// The review answering the request `uid` with `verdict`.
    pub fn new(uid: &str, verdict: Verdict) -> Self {
        let (allowed, status) = match verdict {
            Verdict::Allow => (true, None),
            Verdict::Deny(message) => (
                false,
                Some(ResponseStatus {
                    status: "Failure",
                    message,
                    reason: "Forbidden",
                    code: 403,
                }),
            ),
        };
        Self {
            api_version: API_VERSION,
            kind: KIND,
            response: AdmissionResponse {
                uid: uid.to_owned(),
                allowed,
                status,
                audit_annotations: BTreeMap::new(),
            },
        }
    }
}

/// Decodes one of the request's objects into `T`, or a denial naming where it failed.
pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    which: &str,
    kind: &str,
    value: Option<&serde_json::Value>,
) -> Result<T, Verdict> {
    let value =
        value.ok_or_else(|| Verdict::deny(format!("request.{which}: required: the {kind} is missing")))?;
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        Verdict::deny(format!(
            "request.{which}: not a valid {kind}: {path}: {}",
            e.into_inner()
        ))
    })
}
