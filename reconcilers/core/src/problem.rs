//! Why a sink could not carry out an action, by kind, so that logs and metrics tell a conflict
//! (someone else wrote first: the graph decides again) from a refusal an operator must fix.

/// The kind of a sink problem; [`ProblemKind::label`] is its metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProblemKind {
    /// The object changed since it was read (HTTP 409, a stale resourceVersion): re-read and
    /// decided again on the next cycle.
    Conflict,
    /// The store refused the caller (HTTP 401/403): RBAC or credentials.
    Forbidden,
    /// The store refused the object (HTTP 400/422, a schema or CEL rule).
    Invalid,
    /// The store could not be reached or answered 5xx/429.
    Unavailable,
    /// An effect (key generation, a certificate) could not be performed.
    Effect,
    /// Anything else (a local file, an unexpected status).
    Other,
}

impl ProblemKind {
    /// The metric label (`conflict`, `forbidden`, `invalid`, `unavailable`, `effect`, `other`).
    pub fn label(self) -> &'static str {
        match self {
            ProblemKind::Conflict => "conflict",
            ProblemKind::Forbidden => "forbidden",
            ProblemKind::Invalid => "invalid",
            ProblemKind::Unavailable => "unavailable",
            ProblemKind::Effect => "effect",
            ProblemKind::Other => "other",
        }
    }

    /// The kind of an HTTP status answered by an API server.
    pub fn of_status(code: u16) -> Self {
        match code {
            409 => ProblemKind::Conflict,
            401 | 403 => ProblemKind::Forbidden,
            400 | 404 | 422 => ProblemKind::Invalid,
            429 | 500..=599 => ProblemKind::Unavailable,
            _ => ProblemKind::Other,
        }
    }
}

/// One action a sink could not carry out: its kind and a sentence naming the action and the
/// store's reason (never secret material).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Problem {
    /// The kind.
    pub kind: ProblemKind,
    /// The action and the reason.
    pub message: String,
}

impl Problem {
    /// A problem of `kind`.
    pub fn new(kind: ProblemKind, message: impl Into<String>) -> Self {
        Problem {
            kind,
            message: message.into(),
        }
    }
}
