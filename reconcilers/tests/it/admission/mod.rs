//! The admission webhooks. The rules are tested by calling their decision functions
//! (`users::review`, `clusters::review`, `operations::review`) with requests parsed as the webhook
//! parses them, against the fakes of `admission::fixtures`: allowed and denied, with the
//! exemptions and the ratcheting ([`users`], [`clusters`], [`operations`]). The user cache's
//! freshness and feed are tested alone ([`user_cache`]); the kube implementations of the
//! SubjectAccessReview and the user read run against a scripted kube client ([`access`]). The HTTP side — the `AdmissionReview` envelope, bad bodies, the
//! size limit, the kind of each path, `/healthz`, real HTTPS — is tested on the router
//! ([`envelope`]).

mod access;
mod clusters;
mod envelope;
mod operations;
mod user_cache;
mod users;

use std::sync::Arc;

use ichor_controller::admission::clusters::KIND as CLUSTER;
use ichor_controller::admission::fixtures::{self, FakeLister, FakeReviewer, NAMESPACE, Who};
use ichor_controller::admission::operations::KIND as OPERATION;
use ichor_controller::admission::review::Verdict;
use ichor_controller::admission::users::KIND as USER;
use ichor_controller::admission::{self as webhooks, AdmissionState, controller_identity};
use serde_json::Value;

/// The fakes a rule asks, and the state holding them.
pub struct Fakes {
    pub reviewer: Arc<FakeReviewer>,
    pub lister: Arc<FakeLister>,
    pub state: AdmissionState,
}

impl Fakes {
    pub fn new(reviewer: FakeReviewer, lister: FakeLister) -> Self {
        let reviewer = Arc::new(reviewer);
        let lister = Arc::new(lister);
        let state = AdmissionState::new(reviewer.clone(), lister.clone(), controller_identity(NAMESPACE));
        Self {
            reviewer,
            lister,
            state,
        }
    }

    /// A reviewer granting nothing and a lister with no user.
    pub fn none() -> Self {
        Self::new(FakeReviewer::default(), FakeLister::default())
    }

    /// A reviewer granting `rights` (`(verb, "resource/subresource")`) and a lister with no user.
    pub fn granting(rights: &[(&str, &str)]) -> Self {
        Self::new(FakeReviewer::granting(rights), FakeLister::default())
    }

    /// A reviewer granting nothing and a lister with these users.
    pub fn listing(users: &[(&str, &[&str], bool)]) -> Self {
        Self::new(FakeReviewer::default(), FakeLister::with(users))
    }

    /// Runs the rule of `kind` ([`USER`], [`CLUSTER`], [`OPERATION`]) on the fixture request for
    /// `operation` by `who`.
    pub async fn decide(
        &self,
        kind: &str,
        operation: &str,
        who: &Who<'_>,
        new: Value,
        old: Value,
    ) -> Result<(), String> {
        let request = fixtures::request(kind, operation, who, new, old).unwrap();
        let verdict = match kind {
            USER => webhooks::users::review(&self.state, &request).await,
            CLUSTER => webhooks::clusters::review(&self.state, &request).await,
            OPERATION => webhooks::operations::review(&self.state, &request).await,
            other => panic!("no rule for {other}"),
        };
        outcome(verdict)
    }
}

/// A verdict as a result: `Ok(())` when allowed, `Err(message)` when denied.
pub fn outcome(verdict: Verdict) -> Result<(), String> {
    match verdict {
        Verdict::Allow => Ok(()),
        Verdict::Deny(message) => Err(message),
    }
}

/// What a denial's message must hold (exact messages are compared with `assert_eq!`).
#[derive(Debug, Clone, Copy)]
pub enum Denied<'a> {
    /// Starting with this.
    StartsWith(&'a str),
    /// Containing this.
    Contains(&'a str),
}

/// Checks that `got` is a denial whose message holds each of `expected`.
#[track_caller]
pub fn assert_denied(got: Result<(), String>, expected: &[Denied<'_>]) {
    let message = got.expect_err("expected a denial");
    for check in expected {
        let ok = match check {
            Denied::StartsWith(m) => message.starts_with(m),
            Denied::Contains(m) => message.contains(m),
        };
        assert!(ok, "{message:?} is not {check:?}");
    }
}
