//! The validating admission webhooks of `ichor-controller` (ADR 0129: admission enforces on every
//! write the rules the API enforces, so a CR written with `kubectl` gets no shortcut).
//!
//! Four webhooks, the paths of the chart's `ValidatingWebhookConfiguration` `ichor-identity`:
//!
//! - `/validate/ichorusers` (CREATE, UPDATE, DELETE): IchorUsers in the install namespace only,
//!   the grant rule and the last-enabled-admin rule of `renderers::auth::roles`, the same
//!   functions and messages as the `UserService` API ([`users`]), and the display name and e-mail
//!   by `renderers::auth::text` ([`user_texts`]);
//! - `/validate/talosclusters` (CREATE, UPDATE): `spec.authentication` (contract v1.14 or later,
//!   prefix rules, `update` on `talosclusters/authentication`), the static Cilium values checks
//!   with `update` on `talosclusters/cilium-values`, and `update` on `talosclusters/endpoint` for
//!   a change of `spec.endpoint` ([`clusters`]);
//! - `/validate/talosoperations` (CREATE, UPDATE): `start` on the subresource of a destructive kind,
//!   on create, on an update that changes what the operation does and on a resume; unknown kinds,
//!   `node` without an action and an action on another kind refused ([`operations`]);
//! - `/validate/ichorinstallations` (CREATE, UPDATE, DELETE): whatever can change the
//!   `spec.users` in force (session policy, second-factor policy, kubeconfig server) needs
//!   `update` on `ichorinstallations/users`: a change of `spec.users`, owner references given, and
//!   every create and delete, since the first installation by name is the one in force
//!   ([`installations`]).
//!
//! Every answer is an `AdmissionReview` v1 with the request's `uid`; a denial carries status code
//! 403 and one sentence naming the field. Everything that cannot be decided is refused (fail
//! closed): a kind or operation the path does not admit, a spec that does not decode, a
//! `SubjectAccessReview` or user read that errors or times out, a user cache that is not synced
//! or has lost its watch. A body the kube-apiserver would
//! not send — not an `AdmissionReview` v1, a request without a field the apiserver always
//! sends, an unknown operation, an object that is not a Kubernetes object — is answered with
//! HTTP 400 ([`review`], by kube-core's admission types), which the chart's `failurePolicy: Fail`
//! turns into a refusal as well.
//!
//! [`router`] is the axum router (the four POST paths and `/healthz`); [`serve`] serves it over
//! HTTPS with the serving pair `tls.crt`/`tls.key` of a directory, reloaded on change (the
//! issuer's `server::tls` and `server::serve`, reused). Every replica serves webhooks.
//! `fixtures` (feature `fixtures`, off by default) holds the documents, fakes and loopback server
//! the tests and the benchmark share; the shipped controller builds without it.
//!
//! # Caveats
//! The Cilium values are checked statically (`renderers::cni` with no facts): the guards that
//! need the machine configuration or the live cluster (host DNS forwarding, KubePrism, Gateway
//! API CRDs) pass here and stay with the UI, the CLI and the controller.

pub mod access;
pub mod clusters;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
mod http;
pub mod installations;
pub mod operations;
pub mod review;
mod server;
pub mod user_cache;
pub mod user_texts;
pub mod users;

use std::sync::Arc;
use std::time::Duration;

pub use access::{AccessReviewer, KubeAccessReviewer, KubeUserLister, UserLister};
pub use http::{
    HEALTHZ_PATH, ICHORINSTALLATIONS_PATH, ICHORUSERS_PATH, TALOSCLUSTERS_PATH, TALOSOPERATIONS_PATH, router,
};
pub use review::{MAX_BODY_BYTES, Verdict};
pub use server::{ServerOptions, serve, serve_on, serve_with, watch_certificate};
pub use user_cache::{UserCache, UserCacheFeed};

/// The user name of the controller's own ServiceAccount in `namespace`
/// (`system:serviceaccount:<ns>:ichor-controller`), exempt from the destructive-start rule.
pub fn controller_identity(namespace: &str) -> String {
    format!("system:serviceaccount:{namespace}:ichor-controller")
}

/// Why the webhook server could not run, or why a rule could not be decided. A rule error never
/// reaches the client as an error: the request is refused with the message (fail closed).
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// The `SubjectAccessReview` call failed.
    #[error("authorization could not be checked: the SubjectAccessReview failed: {0}")]
    AccessReview(String),
    /// The `SubjectAccessReview` call did not answer in time.
    #[error("authorization could not be checked: the SubjectAccessReview did not answer within {0:?}")]
    AccessReviewTimeout(Duration),
    /// The watch cache of `IchorUser` objects has not completed its first list.
    #[error(
        "the IchorUser objects are not known yet (the controller's watch of them has not completed its first list), so the last-enabled-admin rule could not be checked"
    )]
    UsersNotSynced,
    /// The watch of `IchorUser` objects has failed for longer than the cache is trusted.
    #[error(
        "the controller's watch of the IchorUser objects has been failing for {}s, so the last-enabled-admin rule could not be checked", .0.as_secs()
    )]
    UsersWatchLost(Duration),
    /// The request is in a namespace whose users the cache does not hold.
    #[error(
        "the IchorUser objects of namespace {0:?} are not watched by this controller (it watches its own namespace), so the last-enabled-admin rule could not be checked"
    )]
    UsersNotWatched(String),
    /// The enabled admin the rule relies on could not be read again.
    #[error(
        "the enabled admin \"{name}\" could not be read to confirm it ({reason}), so the last-enabled-admin rule could not be checked"
    )]
    ReadUser {
        /// The admin's name.
        name: String,
        /// Why (the apiserver's error, or no answer in time).
        reason: String,
    },
    /// The requester's own `IchorUser` could not be read from the kube-apiserver, so the roles
    /// it holds now (a demotion the cache has not seen yet) could not be checked.
    #[error(
        "the requester's Ichor user \"{name}\" could not be read to check the roles it holds now ({reason}), \
         so the change could not be checked"
    )]
    ReadRequester {
        /// The requester's user name (without `ichor:`).
        name: String,
        /// Why (the apiserver's error, or no answer in time).
        reason: String,
    },
    /// A user's credentials entry could not be read (or does not parse), so whether sessions or
    /// a password of an earlier user remain could not be checked.
    #[error(
        "the credentials entry of user \"{name}\" could not be read ({reason}), so whether sessions or a \
         password from before remain could not be checked"
    )]
    ReadCredentials {
        /// The user's name.
        name: String,
        /// Why (the apiserver's error, no answer in time, or an entry that does not parse; never
        /// a value of the Secret).
        reason: String,
    },
    /// The reads confirming another enabled admin took longer than their budget.
    #[error(
        "no other enabled admin could be confirmed within {0:?}, so the last-enabled-admin rule could not be checked"
    )]
    ConfirmTimeout(Duration),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr} for the admission webhooks: {source}; check that the port is free")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The serving certificate could not be watched.
    #[error("cannot watch the webhook serving certificate in {dir}: {reason}")]
    WatchCertificate {
        /// The certificate directory.
        dir: std::path::PathBuf,
        /// Why.
        reason: String,
    },
    /// The TLS configuration could not be built.
    #[error("cannot build the webhook TLS configuration: {0}")]
    Tls(String),
}

/// What the webhooks decided, for metrics: one call per answered review.
pub trait AdmissionObserver: Send + Sync {
    /// `webhook` (`ichorusers`, `talosclusters`, `talosoperations`) answered `allowed` after
    /// `elapsed`.
    fn decided(&self, webhook: &'static str, allowed: bool, elapsed: Duration);
}

/// Everything the handlers need: how to ask RBAC, how to know the users (a watch cache and a
/// fresh read), who the controller is, and an optional metrics hook.
pub struct AdmissionState {
    reviewer: Arc<dyn AccessReviewer>,
    lister: Arc<dyn UserLister>,
    controller_identity: String,
    users_namespace: String,
    observer: Option<Arc<dyn AdmissionObserver>>,
}

impl std::fmt::Debug for AdmissionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionState")
            .field("controller_identity", &self.controller_identity)
            .field("users_namespace", &self.users_namespace)
            .field("observer", &self.observer.is_some())
            .finish_non_exhaustive()
    }
}

impl AdmissionState {
    /// The state of the webhooks: `controller_identity` is the controller's own user name (see
    /// [`controller_identity`]). IchorUsers are admitted in `ichor-system` only until
    /// [`AdmissionState::with_users_namespace`] says otherwise.
    pub fn new(
        reviewer: Arc<dyn AccessReviewer>,
        lister: Arc<dyn UserLister>,
        controller_identity: impl Into<String>,
    ) -> Self {
        Self {
            reviewer,
            lister,
            controller_identity: controller_identity.into(),
            users_namespace: ichor_renderers::crd::NAMESPACE.to_owned(),
            observer: None,
        }
    }

    /// The namespace IchorUsers live in (the controller's own, where it is installed): a create
    /// of one elsewhere is refused.
    #[must_use]
    pub fn with_users_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.users_namespace = namespace.into();
        self
    }

    /// The namespace IchorUsers live in.
    pub fn users_namespace(&self) -> &str {
        &self.users_namespace
    }

    /// A hook told about every decision (metrics).
    #[must_use]
    pub fn with_observer(mut self, observer: Arc<dyn AdmissionObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The controller's own user name.
    pub fn controller_identity(&self) -> &str {
        &self.controller_identity
    }
}
