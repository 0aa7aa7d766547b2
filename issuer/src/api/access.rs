//! Authorization: [`AccessReview`] asks "may this subject do this?" with Kubernetes RBAC
//! semantics, on either backend, so the API answers the same in `ichor dev` and in a cluster.
//!
//! - [`LocalAccessReview`]: the embedded mode, `ichor_renderers::rbac` evaluated in process over
//!   the built-in roles (plus any site roles given).
//! - [`KubeAccessReview`]: a cluster, a `SubjectAccessReview` (`authorization.k8s.io/v1`) created
//!   by the issuer's ServiceAccount for user `ichor:<name>` with groups `ichor:<role>` from the
//!   `IchorUser`. The kube-apiserver evaluates exactly the identity an impersonated
//!   `SelfSubjectAccessReview` would carry, so the answer is the same; the ServiceAccount needs
//!   `create` on `subjectaccessreviews` for the questions. (The writes themselves go out
//!   impersonating the caller, [`super::kube_backend`], so the apiserver and the admission
//!   webhook decide them again.)
//!
//! The attributes of each call are built here ([`ichorusers`], [`kubeconfig`]).

use async_trait::async_trait;
use ichor_renderers::{
    crd::{GROUP, NAMESPACE},
    rbac::{Attributes, Authorizer, Subject},
};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::{Api, Client, api::PostParams};

/// The resource `UserService` guards.
pub const ICHORUSERS: &str = "ichorusers";
/// The subresource whose `update` `SetPassword`, `RevokeSessions` and `CreateUser` with a
/// password also need.
pub const PASSWORD_SUBRESOURCE: &str = "password";
/// The resource whose `get` `GetMyKubeconfig` needs: held by `ichor-viewer` and above.
pub const KUBECONFIG_RESOURCE: &str = "talosclusters";

/// An access review could not be answered. The call fails with `Unavailable`; nothing is
/// allowed on an error.
#[derive(Debug, thiserror::Error)]
#[error("the access review could not be answered: {0}")]
pub struct AccessReviewError(pub String);

/// Answers RBAC questions about a subject.
#[async_trait]
pub trait AccessReview: Send + Sync + 'static {
    /// Whether `subject` may do what `attributes` describe.
    ///
    /// # Errors
    /// [`AccessReviewError`] when the backend cannot answer.
    async fn allowed(&self, subject: &Subject, attributes: &Attributes) -> Result<bool, AccessReviewError>;
}

/// `verb` on `ichorusers` in `ichor-system` (on the object `name` when not empty).
pub fn ichorusers(verb: &str, name: &str) -> Attributes {
    Attributes::new(verb, GROUP, ICHORUSERS)
        .namespace(NAMESPACE)
        .name(name)
}

/// `update` on `ichorusers/password` of the user `name`.
pub fn password(name: &str) -> Attributes {
    ichorusers("update", name).subresource(PASSWORD_SUBRESOURCE)
}

/// What `GetMyKubeconfig` needs: `get` on `talosclusters` in `ichor-system` ("ichor-viewer or
/// better", asked as RBAC so a site role granting the same reads the same).
pub fn kubeconfig() -> Attributes {
    Attributes::new("get", GROUP, KUBECONFIG_RESOURCE).namespace(NAMESPACE)
}

/// The embedded-mode review: the in-process RBAC evaluator.
#[derive(Clone, Debug)]
pub struct LocalAccessReview {
    authorizer: Authorizer,
}

impl LocalAccessReview {
    /// A review over these objects (usually `Policy::builtin()`, possibly extended).
    pub fn new(authorizer: Authorizer) -> Self {
        Self { authorizer }
    }
}

#[async_trait]
impl AccessReview for LocalAccessReview {
    async fn allowed(&self, subject: &Subject, attributes: &Attributes) -> Result<bool, AccessReviewError> {
        Ok(self.authorizer.allows(subject, attributes))
    }
}

/// The cluster-mode review: a `SubjectAccessReview` through the kube-apiserver.
#[derive(Clone)]
pub struct KubeAccessReview {
    reviews: Api<SubjectAccessReview>,
}

impl std::fmt::Debug for KubeAccessReview {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeAccessReview").finish_non_exhaustive()
    }
}

impl KubeAccessReview {
    /// A review through `client` (the issuer's ServiceAccount, allowed to create
    /// `subjectaccessreviews`).
    pub fn new(client: Client) -> Self {
        Self {
            reviews: Api::all(client),
        }
    }

    /// The review object sent for a question (public so tests can pin its shape).
    pub fn review(subject: &Subject, attributes: &Attributes) -> SubjectAccessReview {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        SubjectAccessReview {
            metadata: Default::default(),
            spec: SubjectAccessReviewSpec {
                user: Some(subject.user.clone()),
                groups: Some(subject.groups.clone()),
                resource_attributes: Some(ResourceAttributes {
                    verb: opt(&attributes.verb),
                    group: Some(attributes.api_group.clone()),
                    resource: opt(&attributes.resource),
                    subresource: opt(&attributes.subresource),
                    namespace: opt(&attributes.namespace),
                    name: opt(&attributes.name),
                    ..Default::default()
                }),
                ..Default::default()
            },
            status: None,
        }
    }
}

#[async_trait]
impl AccessReview for KubeAccessReview {
    async fn allowed(&self, subject: &Subject, attributes: &Attributes) -> Result<bool, AccessReviewError> {
        let review = Self::review(subject, attributes);
        let answer = self
            .reviews
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| AccessReviewError(e.to_string().chars().take(300).collect()))?;
        Ok(answer.status.is_some_and(|s| s.allowed && s.denied != Some(true)))
    }
}
