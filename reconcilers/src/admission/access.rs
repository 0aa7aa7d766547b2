//! What the rules ask the cluster: whether the request's user holds a right
//! ([`AccessReviewer`], a `SubjectAccessReview`) and the users of a namespace ([`UserLister`]:
//! a watch cache, and one user read fresh), with their kube-apiserver implementations. Every
//! call is bounded in time; an error or a timeout is an [`AdmissionError`], which the rules turn
//! into a refusal.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt as _;
use ichor_renderers::auth::credentials::{CREDENTIALS_SECRET_NAME, CredentialsEntry};
use ichor_renderers::contract::{CREDENTIALS_NAMESPACE, USER_CREDENTIALS_KEY, user_credentials_secret};
use ichor_renderers::crd::{GROUP, IchorUser};
use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher;
use kube::{Api, Client};

use super::AdmissionError;
use super::user_cache::UserCache;

/// How long a `SubjectAccessReview` or a user read may take: the webhook itself has 5 s.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(3);

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

/// The `IchorUser` objects of a namespace: as a watch cache holds them (cheap, possibly a moment
/// behind), and one at a time as the kube-apiserver holds it now.
#[async_trait]
pub trait UserLister: Send + Sync {
    /// Every `IchorUser` of `namespace` as the cache holds them.
    ///
    /// # Errors
    /// When the cache cannot be trusted (not synced, its watch lost for long, another
    /// namespace); the caller refuses.
    fn cached_users(&self, namespace: &str) -> Result<Vec<Arc<IchorUser>>, AdmissionError>;

    /// The `IchorUser` `name` of `namespace` read from the kube-apiserver (never a cache's
    /// copy, so a concurrent demotion is seen); `None` when it does not exist.
    ///
    /// # Errors
    /// [`AdmissionError::ReadUser`] when the read fails or does not answer in time; the caller
    /// refuses.
    async fn read_user(&self, namespace: &str, name: &str) -> Result<Option<IchorUser>, AdmissionError>;

    /// The requester's own `IchorUser` `name` of `namespace`: the cache's copy, or, when the
    /// cache does not hold it (a user created a moment ago), read from the kube-apiserver; `None`
    /// when it does not exist.
    ///
    /// # Errors
    /// When the cache cannot be trusted or the read fails; the caller refuses.
    async fn requester(&self, namespace: &str, name: &str) -> Result<Option<IchorUser>, AdmissionError> {
        let cached = self.cached_users(namespace)?;
        if let Some(user) = cached.iter().find(|u| u.metadata.name.as_deref() == Some(name)) {
            return Ok(Some(IchorUser::clone(user)));
        }
        self.read_user(namespace, name).await
    }

    /// The requester's own `IchorUser` `name` of `namespace` read from the kube-apiserver, never
    /// the cache's copy: for a write whose verdict rests on the requester's roles, a demotion or
    /// disable of the requester that the cache has not seen yet must already count. `None` when
    /// it does not exist.
    ///
    /// # Errors
    /// [`AdmissionError::ReadRequester`] when the read fails or does not answer in time; the
    /// caller refuses.
    async fn fresh_requester(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<IchorUser>, AdmissionError> {
        self.read_user(namespace, name)
            .await
            .map_err(|error| match error {
                AdmissionError::ReadUser { name, reason } => AdmissionError::ReadRequester { name, reason },
                other => other,
            })
    }

    /// The credentials entry of user `name` read from the kube-apiserver: the entry of its own
    /// Secret in the credentials namespace when there is one, else its key of the Secret
    /// `ichor-user-credentials` of `namespace`; `None` when neither holds one.
    ///
    /// # Errors
    /// [`AdmissionError::ReadCredentials`] when the read fails, does not answer in time, or the
    /// entry does not parse; the caller refuses.
    async fn read_credentials(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<CredentialsEntry>, AdmissionError>;
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

/// [`UserLister`] over the kube-apiserver: the users of a [`UserCache`] (kept by a watch), and
/// one user read with a `GET` (a quorum read: the controller's ServiceAccount holds `get` on
/// `ichorusers`), bounded in time.
#[derive(Clone)]
pub struct KubeUserLister {
    client: Client,
    cache: UserCache,
    timeout: Duration,
    _watch: Option<Arc<AbortOnDrop>>,
}

/// A task aborted when the last lister holding it is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl std::fmt::Debug for KubeUserLister {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeUserLister")
            .field("cache", &self.cache)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl KubeUserLister {
    /// A lister answering from `cache` (fed by a watch the caller runs, as `ichor-controller run`
    /// does with its own watch of `IchorUser`s) and reading through `client`, each read bounded
    /// by [`DEFAULT_CALL_TIMEOUT`].
    pub fn new(client: Client, cache: UserCache) -> Self {
        Self {
            client,
            cache,
            timeout: DEFAULT_CALL_TIMEOUT,
            _watch: None,
        }
    }

    /// A lister with a watch of its own on the `IchorUser`s of `namespace` (a webhook server
    /// without the controller's watchers), stopped when the last clone is dropped. Must be
    /// called within a tokio runtime.
    pub fn watching(client: Client, namespace: &str) -> Self {
        let (cache, mut feed) = UserCache::new(namespace);
        let api: Api<IchorUser> = Api::namespaced(client.clone(), namespace);
        let task = tokio::spawn(async move {
            let mut events = watcher::watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(event) = events.next().await {
                match event {
                    Ok(event) => feed.apply(&event.modify(|u| u.metadata.managed_fields = None)),
                    Err(error) => {
                        tracing::warn!(%error, "admission: the IchorUser watch failed; retrying");
                        feed.failed(Instant::now());
                    }
                }
            }
        });
        Self {
            _watch: Some(Arc::new(AbortOnDrop(task))),
            ..Self::new(client, cache)
        }
    }

    /// The same lister with its reads bounded by `timeout`.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

#[async_trait]
impl UserLister for KubeUserLister {
    fn cached_users(&self, namespace: &str) -> Result<Vec<Arc<IchorUser>>, AdmissionError> {
        self.cache.users(namespace, Instant::now())
    }

    async fn read_user(&self, namespace: &str, name: &str) -> Result<Option<IchorUser>, AdmissionError> {
        let api: Api<IchorUser> = Api::namespaced(self.client.clone(), namespace);
        let read_error = |reason: String| AdmissionError::ReadUser {
            name: name.to_owned(),
            reason,
        };
        tokio::time::timeout(self.timeout, api.get_opt(name))
            .await
            .map_err(|_| read_error(format!("no answer within {:?}", self.timeout)))?
            .map_err(|e| read_error(short(&e)))
    }

    async fn read_credentials(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<CredentialsEntry>, AdmissionError> {
        let read_error = |reason: String| AdmissionError::ReadCredentials {
            name: name.to_owned(),
            reason,
        };
        // The user's own Secret first: while an entry moves, a legacy copy may lag behind it.
        // A parse failure is not shown: a parser's message may quote what it read.
        let unreadable = |place: String| {
            read_error(format!(
                "the credentials entry in {place} cannot be read (its content is not shown)"
            ))
        };
        let own = user_credentials_secret(name);
        let own_entry = |secret: Secret| {
            let Some(value) = secret.data.as_ref().and_then(|d| d.get(USER_CREDENTIALS_KEY)) else {
                return Err(read_error(format!(
                    "Secret {CREDENTIALS_NAMESPACE}/{own} holds no {USER_CREDENTIALS_KEY:?}"
                )));
            };
            CredentialsEntry::parse(name, &value.0)
                .map(Some)
                .map_err(|_| unreadable(format!("Secret {CREDENTIALS_NAMESPACE}/{own}")))
        };
        if let Some(secret) = self.read_secret(CREDENTIALS_NAMESPACE, &own, name).await? {
            return own_entry(secret);
        }
        let legacy = self.read_secret(namespace, CREDENTIALS_SECRET_NAME, name).await?;
        if let Some(value) = legacy
            .as_ref()
            .and_then(|s| s.data.as_ref())
            .and_then(|d| d.get(name))
        {
            return CredentialsEntry::parse(name, &value.0)
                .map(Some)
                .map_err(|_| unreadable(format!("Secret {namespace}/{CREDENTIALS_SECRET_NAME}")));
        }
        // Not in the legacy Secret either: a move between the two reads creates the user's own
        // Secret before it removes the legacy key, so the own Secret is read once more.
        match self.read_secret(CREDENTIALS_NAMESPACE, &own, name).await? {
            Some(secret) => own_entry(secret),
            None => Ok(None),
        }
    }
}

impl KubeUserLister {
    /// The Secret `namespace/name` read from the kube-apiserver, bounded in time; `None` on 404
    /// (no such Secret, or no such namespace); errors name `user`, whose entry is sought. Any
    /// other refusal (a 403 included: the
    /// controller's Role in that namespace is missing) is an error, which refuses.
    async fn read_secret(
        &self,
        namespace: &str,
        name: &str,
        user: &str,
    ) -> Result<Option<Secret>, AdmissionError> {
        let read_error = |reason: String| AdmissionError::ReadCredentials {
            name: user.to_owned(),
            reason,
        };
        // Read as text and parsed here: the client's typed calls log a whole body they cannot
        // parse, and this one holds password hashes.
        let request = kube::core::Request::new(format!("/api/v1/namespaces/{namespace}/secrets"))
            .get(name, &kube::core::params::GetParams::default())
            .map_err(|e| read_error(e.to_string()))?;
        let text = match tokio::time::timeout(self.timeout, self.client.request_text(request)).await {
            Err(_) => return Err(read_error(format!("no answer within {:?}", self.timeout))),
            Ok(Err(kube::Error::Api(status))) if status.code == 404 => return Ok(None),
            Ok(Err(e)) => return Err(read_error(format!("Secret {namespace}/{name}: {}", short(&e)))),
            Ok(Ok(text)) => text,
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|_| read_error(format!("Secret {namespace}/{name} does not parse")))
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
            "{field}: {needs} needs verb \"{verb}\" on {right}{scope}, which {who} does not hold",
            verb = attrs.verb.as_deref().unwrap_or_default(),
            scope = match attrs.namespace.as_deref() {
                Some(ns) if !ns.is_empty() => format!(" in namespace \"{ns}\""),
                _ => String::new(),
            },
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
