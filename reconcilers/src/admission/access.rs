//! What the rules ask the cluster: whether the request's user holds a right
//! ([`AccessReviewer`], a `SubjectAccessReview`) and the other users of a namespace
//! ([`UserLister`], an uncached list), with their kube-apiserver implementations. Both are bounded
//! in time; an error or a timeout is an [`AdmissionError`], which the rules turn into a refusal.

use std::time::Duration;

use async_trait::async_trait;
use ichor_renderers::crd::{GROUP, IchorUser};
use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};

use super::AdmissionError;

/// How long a `SubjectAccessReview` or a user list may take: the webhook itself has 5 s.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(3);
/// Page size of the uncached user list.
const LIST_PAGE: u32 = 500;

/// Answers "may this user do this?" (Kubernetes RBAC, through the kube-apiserver).
#[async_trait]
pub trait AccessReviewer: Send + Sync {
    /// Whether `user` may do what `attrs` describe.
    ///
    /// # Errors
    /// [`AdmissionError::AccessReview`] or [`AdmissionError::AccessReviewTimeout`] when there is
    /// no answer; the caller refuses the request.
    async fn allowed(&self, user: &UserInfo, attrs: &ResourceAttributes) -> Result<bool, AdmissionError>;
}

/// Lists the `IchorUser` objects of a namespace, uncached (a fresh read from the kube-apiserver,
/// never an informer's copy, so a concurrent demotion is seen).
#[async_trait]
pub trait UserLister: Send + Sync {
    /// Every `IchorUser` in `namespace`.
    ///
    /// # Errors
    /// [`AdmissionError::ListUsers`] or [`AdmissionError::ListUsersTimeout`]; the caller refuses.
    async fn list_users(&self, namespace: &str) -> Result<Vec<IchorUser>, AdmissionError>;
}

/// The attributes of `verb` on `resource/subresource` of `ichor.maesh.dev` in `namespace` (on the
/// object `name` when not empty).
pub fn ichor_attributes(
    verb: &str,
    resource: &str,
    subresource: &str,
    namespace: &str,
    name: &str,
) -> ResourceAttributes {
    let opt = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    ResourceAttributes {
        verb: opt(verb),
        group: Some(GROUP.to_owned()),
        resource: opt(resource),
        subresource: opt(subresource),
        namespace: opt(namespace),
        name: opt(name),
        ..Default::default()
    }
}

/// The `SubjectAccessReview` asking whether `user` (user name, groups, uid and extra, exactly as
/// the admission request carried them) may do what `attrs` describe.
pub fn subject_access_review(user: &UserInfo, attrs: &ResourceAttributes) -> SubjectAccessReview {
    SubjectAccessReview {
        metadata: Default::default(),
        spec: SubjectAccessReviewSpec {
            user: user.username.clone(),
            groups: user.groups.clone(),
            uid: user.uid.clone(),
            extra: user.extra.clone(),
            resource_attributes: Some(attrs.clone()),
            ..Default::default()
        },
        status: None,
    }
}

fn short(error: &kube::Error) -> String {
    error.to_string().chars().take(300).collect()
}

/// [`AccessReviewer`] over a kube client: creates a `SubjectAccessReview` (the controller's
/// ServiceAccount holds `create` on `subjectaccessreviews`). Allowed means `status.allowed` and
/// not `status.denied`.
#[derive(Clone)]
pub struct KubeAccessReviewer {
    reviews: Api<SubjectAccessReview>,
    timeout: Duration,
}

impl std::fmt::Debug for KubeAccessReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeAccessReviewer")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl KubeAccessReviewer {
    /// A reviewer through `client`, each review bounded by [`DEFAULT_CALL_TIMEOUT`].
    pub fn new(client: Client) -> Self {
        Self::with_timeout(client, DEFAULT_CALL_TIMEOUT)
    }

    /// A reviewer whose reviews are bounded by `timeout`.
    pub fn with_timeout(client: Client, timeout: Duration) -> Self {
        Self {
            reviews: Api::all(client),
            timeout,
        }
    }
}

#[async_trait]
impl AccessReviewer for KubeAccessReviewer {
    async fn allowed(&self, user: &UserInfo, attrs: &ResourceAttributes) -> Result<bool, AdmissionError> {
        let review = subject_access_review(user, attrs);
        let answer = tokio::time::timeout(self.timeout, self.reviews.create(&PostParams::default(), &review))
            .await
            .map_err(|_| AdmissionError::AccessReviewTimeout(self.timeout))?
            .map_err(|e| AdmissionError::AccessReview(short(&e)))?;
        Ok(answer.status.is_some_and(|s| s.allowed && s.denied != Some(true)))
    }
}

/// [`UserLister`] over a kube client: a paged list straight from the kube-apiserver (a consistent
/// read; the controller's ServiceAccount holds `list` on `ichorusers`).
#[derive(Clone)]
pub struct KubeUserLister {
    client: Client,
    timeout: Duration,
}

impl std::fmt::Debug for KubeUserLister {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeUserLister")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl KubeUserLister {
    /// A lister through `client`, each full list bounded by [`DEFAULT_CALL_TIMEOUT`].
    pub fn new(client: Client) -> Self {
        Self::with_timeout(client, DEFAULT_CALL_TIMEOUT)
    }

    /// A lister whose lists are bounded by `timeout`.
    pub fn with_timeout(client: Client, timeout: Duration) -> Self {
        Self { client, timeout }
    }

    async fn list_all(&self, namespace: &str) -> Result<Vec<IchorUser>, AdmissionError> {
        let api: Api<IchorUser> = Api::namespaced(self.client.clone(), namespace);
        let mut users = Vec::new();
        let mut params = ListParams::default().limit(LIST_PAGE);
        loop {
            let page = api
                .list(&params)
                .await
                .map_err(|e| AdmissionError::ListUsers(short(&e)))?;
            users.extend(page.items);
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(users),
            }
        }
    }
}

#[async_trait]
impl UserLister for KubeUserLister {
    async fn list_users(&self, namespace: &str) -> Result<Vec<IchorUser>, AdmissionError> {
        tokio::time::timeout(self.timeout, self.list_all(namespace))
            .await
            .map_err(|_| AdmissionError::ListUsersTimeout(self.timeout))?
    }
}

/// Asks whether the request's user holds `attrs`; `Allow` if so, otherwise a denial naming
/// `field` and the right (`needs` says what for). An error or timeout of the review is a denial
/// too, saying that authorization could not be checked (fail closed).
pub(crate) async fn require_right(
    reviewer: &dyn AccessReviewer,
    user: &UserInfo,
    attrs: &ResourceAttributes,
    field: &str,
    needs: &str,
) -> super::Verdict {
    let right = right_name(attrs);
    match reviewer.allowed(user, attrs).await {
        Ok(true) => super::Verdict::Allow,
        Ok(false) => super::Verdict::deny(format!(
            "{field}: {needs} needs verb \"{verb}\" on {right} in namespace \"{ns}\", which {who} does not hold",
            verb = attrs.verb.as_deref().unwrap_or_default(),
            ns = attrs.namespace.as_deref().unwrap_or_default(),
            who = display_user(user),
        )),
        Err(error) => {
            tracing::warn!(%error, right, "admission: SubjectAccessReview failed; refusing");
            super::Verdict::deny(format!(
                "{field}: {needs} needs verb \"{verb}\" on {right}, and {error}; the request is refused until it can be checked",
                verb = attrs.verb.as_deref().unwrap_or_default(),
            ))
        }
    }
}

fn right_name(attrs: &ResourceAttributes) -> String {
    let resource = attrs.resource.as_deref().unwrap_or_default();
    match attrs.subresource.as_deref() {
        Some(sub) if !sub.is_empty() => format!("{resource}/{sub}"),
        _ => resource.to_owned(),
    }
}

fn display_user(user: &UserInfo) -> String {
    match user.username.as_deref() {
        Some(name) if !name.is_empty() => format!("user \"{name}\""),
        _ => "the anonymous requester".to_owned(),
    }
}
