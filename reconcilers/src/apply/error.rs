//! Why an action failed ([`ApplyError`], each variant a sentence naming the object, with the
//! `kind` label it is counted under), and the kube client's errors sorted by what the applier
//! does about them.

use ichor_graph::ObjectKey;
use kube::api::DynamicObject;
use kube::core::Status;
use serde_json::Value;

use ichor_controller_core::perform::PerformError;
use ichor_controller_core::problem::{Problem, ProblemKind};

/// Why one action (or one write of it) failed. Messages name the object and never hold Secret
/// data.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The graph named a kind this applier has no API resource for.
    #[error("{key}: kind {kind:?} has no known API resource; this applier is older than the graph")]
    UnknownKind {
        /// The object.
        key: ObjectKey,
        /// Its kind.
        kind: String,
    },
    /// A desired object of an input kind holds more than `status`.
    #[error(
        "{key}: the controller never writes the spec of an input kind; only a status-only object \
         may be applied to it (a bug of the graph)"
    )]
    SpecOfInput {
        /// The object.
        key: ObjectKey,
    },
    /// The graph asked to delete an object of an input kind.
    #[error("{key}: the controller never deletes an object of an input kind (a bug of the graph)")]
    DeleteOfInput {
        /// The object.
        key: ObjectKey,
    },
    /// The API server refused a request.
    #[error("{what}: the API server answered {code} {reason}: {message}")]
    Api {
        /// The request (`server-side apply of ConfigMap ichor-system/ichor-oidc-trust`).
        what: String,
        /// HTTP status code.
        code: u16,
        /// Kubernetes reason (`Forbidden`, `Invalid`, …).
        reason: String,
        /// The server's message.
        message: String,
    },
    /// The request did not reach the API server or its answer did not decode.
    #[error("{what}: {message}")]
    Transport {
        /// The request.
        what: String,
        /// The client's message.
        message: String,
    },
    /// Every attempt met a conflict.
    #[error(
        "{what}: still conflicting after {attempts} attempts from fresh reads; the next evaluation retries"
    )]
    Conflict {
        /// The request.
        what: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The World holds an object without a resourceVersion, so no conditional write is possible.
    #[error("{key}: no resourceVersion observed, so it cannot be written conditionally; wait for the watch")]
    NoResourceVersion {
        /// The object.
        key: ObjectKey,
    },
    /// The World holds a Secret to delete without its uid, so it cannot be deleted with the uid
    /// precondition a removal of credentials needs.
    #[error("{key}: no uid observed, so it is not deleted (never blind); wait for the watch")]
    NoUid {
        /// The object.
        key: ObjectKey,
    },
    /// An effect could not be performed.
    #[error(transparent)]
    Perform(#[from] PerformError),
    /// The blocking task performing effects failed.
    #[error("the effect performer's thread failed: {0}")]
    Task(String),
    /// A rollout step could not be carried out for now (a node or the API unreachable, a
    /// node busy); the loop retries it after its back-off.
    #[error("rollout: {0}")]
    Rollout(String),
    /// Moving entries back would take the legacy Secret past its share of the API server's limit.
    #[error(
        "moving users back into Secret {secret} would make its data {bytes} bytes, past {limit} (80 % of the API \
         server's 1 MiB): the move back stops; remove users who no longer sign in, or keep the per-user layout \
         (spec.users.credentialsLayout: perUser)"
    )]
    ReturnTooLarge {
        /// The legacy Secret.
        secret: String,
        /// Its data size after the batch.
        bytes: u64,
        /// The bound.
        limit: u64,
    },
    /// A desired or returned object is not what the API expects.
    #[error("{what}: {message}")]
    Malformed {
        /// The object.
        what: String,
        /// What is wrong.
        message: String,
    },
}

impl ApplyError {
    /// The kind of this failure, for the loop and the `kind` label of
    /// `ichor_controller_apply_problems_total`.
    pub fn kind(&self) -> ProblemKind {
        match self {
            ApplyError::Api { code, .. } => ProblemKind::of_status(*code),
            ApplyError::Transport { .. } => ProblemKind::Unavailable,
            ApplyError::Conflict { .. } => ProblemKind::Conflict,
            ApplyError::Perform(PerformError::Stale { .. }) => ProblemKind::Conflict,
            ApplyError::Perform(_) | ApplyError::Task(_) | ApplyError::Rollout(_) => ProblemKind::Effect,
            ApplyError::UnknownKind { .. }
            | ApplyError::SpecOfInput { .. }
            | ApplyError::DeleteOfInput { .. }
            | ApplyError::NoResourceVersion { .. }
            | ApplyError::NoUid { .. }
            | ApplyError::ReturnTooLarge { .. }
            | ApplyError::Malformed { .. } => ProblemKind::Other,
        }
    }

    /// This failure as a problem of the loop's report.
    pub fn problem(&self) -> Problem {
        Problem::new(self.kind(), self.to_string())
    }
}

/// A kube client error, sorted by what the applier does about it.
pub(super) enum Failure {
    /// 409 `Conflict` (a resourceVersion precondition failed).
    Conflict,
    /// 409 `AlreadyExists` (a create lost a race).
    AlreadyExists,
    /// 404.
    NotFound,
    /// Anything else.
    Other(ApplyError),
}

fn api_status(e: &kube::Error) -> Option<&Status> {
    match e {
        kube::Error::Api(s) => Some(s),
        _ => None,
    }
}

pub(super) fn classify(what: &str, e: kube::Error) -> Failure {
    match api_status(&e) {
        Some(s) if s.code == 409 && s.reason == "AlreadyExists" => Failure::AlreadyExists,
        Some(s) if s.code == 409 => Failure::Conflict,
        Some(s) if s.code == 404 => Failure::NotFound,
        Some(s) => Failure::Other(ApplyError::Api {
            what: what.to_owned(),
            code: s.code,
            reason: s.reason.clone(),
            message: s.message.clone(),
        }),
        None => Failure::Other(ApplyError::Transport {
            what: what.to_owned(),
            message: e.to_string(),
        }),
    }
}

impl Failure {
    /// The failure as an error (for the cases the caller does not handle).
    pub(super) fn into_error(self, what: &str) -> ApplyError {
        let api = |code: u16, reason: &str| ApplyError::Api {
            what: what.to_owned(),
            code,
            reason: reason.to_owned(),
            message: String::new(),
        };
        match self {
            Failure::Conflict => api(409, "Conflict"),
            Failure::AlreadyExists => api(409, "AlreadyExists"),
            Failure::NotFound => api(404, "NotFound"),
            Failure::Other(e) => e,
        }
    }
}

pub(super) fn to_value(what: &str, o: DynamicObject) -> Result<Value, ApplyError> {
    serde_json::to_value(o).map_err(|e| ApplyError::Malformed {
        what: what.to_owned(),
        message: e.to_string(),
    })
}

pub(super) fn to_dynamic(what: &str, v: Value) -> Result<DynamicObject, ApplyError> {
    serde_json::from_value(v).map_err(|e| ApplyError::Malformed {
        what: what.to_owned(),
        message: e.to_string(),
    })
}
