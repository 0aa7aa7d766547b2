//! Fixtures of the webhooks for tests and benchmarks (this crate's integration tests and
//! `benches/webhook.rs` share them, so both drive the webhooks with the same documents and the
//! same server set-up): `AdmissionReview` v1 documents as the kube-apiserver sends them, fakes of
//! the two questions the rules ask the cluster ([`FakeReviewer`], [`FakeLister`]), a self-signed
//! serving pair ([`ServingPair`]) and the HTTPS server on a loopback port ([`LoopbackServer`]).
//! The controller itself uses none of it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use ichor_renderers::auth::credentials::CredentialsEntry;
use ichor_renderers::contract::{
    ADMIN_GROUP, API_VERSION, GROUP, OPERATOR_GROUP, USER_PREFIX, VERSION, VIEWER_GROUP,
};
use ichor_renderers::crd::{IchorUser, IchorUserSpec};
use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::api::authorization::v1::ResourceAttributes;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::{JoinError, JoinHandle};

use super::review::{self, AdmissionRequest, ReviewError};
use super::{AccessReviewer, AdmissionError, AdmissionState, ServerOptions, UserLister, serve_on};

/// The namespace of every fixture object and review.
pub use ichor_renderers::contract::NAMESPACE;
/// The `uid` of every fixture review.
pub const REVIEW_UID: &str = "705ab4f5-6393-11e8-b7cc-42010a800002";
/// The DNS name the kube-apiserver calls the webhooks by (the chart's Service), the name of
/// [`ServingPair::self_signed`]'s certificate in tests.
pub const WEBHOOK_HOST: &str = "ichor-controller-webhook.ichor-system.svc";

/// The requester of a fixture review: user name and groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Who<'a> {
    /// `userInfo.username`.
    pub user: &'a str,
    /// `userInfo.groups`.
    pub groups: &'a [&'a str],
}

/// An Ichor admin (`ichor:root`).
pub const ROOT: Who<'static> = Who {
    user: "ichor:root",
    groups: &[ADMIN_GROUP, "system:authenticated"],
};
/// An Ichor operator (`ichor:olga`).
pub const OPERATOR: Who<'static> = Who {
    user: "ichor:olga",
    groups: &[OPERATOR_GROUP, "system:authenticated"],
};
/// An Ichor viewer (`ichor:vera`).
pub const VIEWER: Who<'static> = Who {
    user: "ichor:vera",
    groups: &[VIEWER_GROUP, "system:authenticated"],
};

/// An `AdmissionReview` v1 request for `operation` (`CREATE`, …) on an `ichor.maesh.dev` object
/// of `kind` in [`NAMESPACE`] by `who`, with every field the kube-apiserver sends: `object` and
/// `oldObject` as given (`null` when absent), the name the object's (the new one's, else the
/// old one's), the user with uid `u-1234` and a credential id in `extra`.
pub fn review(kind: &str, operation: &str, who: &Who<'_>, object: Value, old: Value) -> Value {
    let name = [&object, &old]
        .into_iter()
        .find_map(|o| o["metadata"]["name"].as_str())
        .unwrap_or_default()
        .to_owned();
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": REVIEW_UID,
            "kind": {"group": GROUP, "version": VERSION, "kind": kind},
            "resource": {"group": GROUP, "version": VERSION, "resource": format!("{}s", kind.to_lowercase())},
            "requestKind": {"group": GROUP, "version": VERSION, "kind": kind},
            "name": name,
            "namespace": NAMESPACE,
            "operation": operation,
            "userInfo": {
                "username": who.user,
                "uid": "u-1234",
                "groups": who.groups,
                "extra": {"authentication.kubernetes.io/credential-id": ["JTI=abc"]}
            },
            "object": object,
            "oldObject": old,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    })
}

/// The request of [`review()`], parsed as the webhook parses a body.
///
/// # Errors
/// [`ReviewError`] when the document is not a valid review (an object that is not a JSON object).
pub fn request(
    kind: &str,
    operation: &str,
    who: &Who<'_>,
    object: Value,
    old: Value,
) -> Result<AdmissionRequest, ReviewError> {
    review::parse(review(kind, operation, who, object, old).to_string().as_bytes())
}

/// An `IchorUser` object as a review carries it (display name = `name`).
pub fn user(name: &str, roles: &[&str], disabled: bool) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": "IchorUser",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": "9f1c"},
        "spec": {"displayName": name, "roles": roles, "disabled": disabled}
    })
}

/// An `IchorUser` as the cache holds it or a read returns it.
pub fn user_object(name: &str, roles: &[&str], disabled: bool) -> IchorUser {
    let mut user = IchorUser::new(
        name,
        IchorUserSpec {
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
            disabled,
            ..IchorUserSpec::default()
        },
    );
    user.metadata.namespace = Some(NAMESPACE.to_owned());
    user
}

/// A `TalosCluster` object `prod` with `spec`.
pub fn cluster(spec: Value) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": "TalosCluster",
        "metadata": {"name": "prod", "namespace": NAMESPACE},
        "spec": spec
    })
}

/// A `TalosOperation` object `op-1` of `kind` (with `action`, for `node`) on cluster `prod`.
pub fn operation(kind: &str, action: Option<&str>) -> Value {
    let mut spec = json!({"cluster": "prod", "kind": kind});
    if let Some(action) = action {
        spec["action"] = json!(action);
    }
    json!({
        "apiVersion": API_VERSION,
        "kind": "TalosOperation",
        "metadata": {"name": "op-1", "namespace": NAMESPACE},
        "spec": spec
    })
}

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An [`AccessReviewer`] that grants exactly the listed `(verb, "resource/subresource")` rights,
/// or fails every review, and records every question.
#[derive(Debug, Default)]
pub struct FakeReviewer {
    granted: Vec<(String, String)>,
    fail: bool,
    calls: Mutex<Vec<(UserInfo, ResourceAttributes)>>,
}

impl FakeReviewer {
    /// Grants `rights`, nothing else.
    pub fn granting(rights: &[(&str, &str)]) -> Self {
        Self {
            granted: rights
                .iter()
                .map(|(v, r)| ((*v).to_owned(), (*r).to_owned()))
                .collect(),
            ..Self::default()
        }
    }

    /// Fails every review ([`AdmissionError::AccessReview`], "connection refused").
    pub fn failing() -> Self {
        Self {
            fail: true,
            ..Self::default()
        }
    }

    /// Every question asked so far: the user and the attributes.
    pub fn calls(&self) -> Vec<(UserInfo, ResourceAttributes)> {
        locked(&self.calls).clone()
    }
}

#[async_trait]
impl AccessReviewer for FakeReviewer {
    async fn allowed(&self, user: &UserInfo, attrs: &ResourceAttributes) -> Result<bool, AdmissionError> {
        locked(&self.calls).push((user.clone(), attrs.clone()));
        if self.fail {
            return Err(AdmissionError::AccessReview("connection refused".to_owned()));
        }
        let right = format!(
            "{}/{}",
            attrs.resource.as_deref().unwrap_or_default(),
            attrs.subresource.as_deref().unwrap_or_default()
        );
        let verb = attrs.verb.as_deref().unwrap_or_default();
        Ok(self.granted.iter().any(|(v, r)| v == verb && *r == right))
    }
}

/// A [`UserLister`] whose cache holds a fixed set of users and whose fresh reads answer from
/// another set (the same unless [`FakeLister::stale`]), or that fails; it records the
/// namespace of every cache read and the name of every fresh read.
///
/// Its [`UserLister::requester`] answers from the cached set, and otherwise knows the fixture
/// requesters as enabled users holding their groups' roles ([`ROOT`] admin, [`OPERATOR`]
/// operator, [`VIEWER`] viewer), so a test about another rule need not list them; it fails only
/// when the cache never synced, and is not recorded among the cache reads. Its
/// [`UserLister::fresh_requester`] answers the same way from the fresh set, fails only when
/// made so ([`FakeLister::with_unreadable_requester`]), and is recorded apart from the other
/// fresh reads ([`FakeLister::requester_reads`]).
#[derive(Debug, Default)]
pub struct FakeLister {
    cached: Vec<Arc<IchorUser>>,
    fresh: Vec<IchorUser>,
    unsynced: bool,
    unreadable: bool,
    calls: Mutex<Vec<String>>,
    reads: Mutex<Vec<String>>,
    requester_unreadable: bool,
    requester_reads: Mutex<Vec<String>>,
    credentials: Vec<(String, CredentialsEntry)>,
    credentials_unreadable: bool,
}

fn objects(users: &[(&str, &[&str], bool)]) -> Vec<IchorUser> {
    users.iter().map(|(n, r, d)| user_object(n, r, *d)).collect()
}

impl FakeLister {
    /// Holds these users, in the cache and fresh alike (name, roles, disabled; see
    /// [`user_object`]).
    pub fn with(users: &[(&str, &[&str], bool)]) -> Self {
        Self::stale(users, users)
    }

    /// Holds these objects as they are (a `deletionTimestamp`, finalizers), in the cache and
    /// fresh alike.
    pub fn of(users: Vec<IchorUser>) -> Self {
        Self {
            cached: users.iter().cloned().map(Arc::new).collect(),
            fresh: users,
            ..Self::default()
        }
    }

    /// A cache a moment behind: it holds `cached`, while a fresh read finds `fresh`.
    pub fn stale(cached: &[(&str, &[&str], bool)], fresh: &[(&str, &[&str], bool)]) -> Self {
        Self {
            cached: objects(cached).into_iter().map(Arc::new).collect(),
            fresh: objects(fresh),
            ..Self::default()
        }
    }

    /// A cache that never synced ([`AdmissionError::UsersNotSynced`]).
    pub fn failing() -> Self {
        Self {
            unsynced: true,
            ..Self::default()
        }
    }

    /// Holds these users in its cache, but every fresh read fails
    /// ([`AdmissionError::ReadUser`], "the server is unavailable").
    pub fn unreadable(users: &[(&str, &[&str], bool)]) -> Self {
        Self {
            unreadable: true,
            ..Self::with(users)
        }
    }

    /// The same lister with `entry` stored as the credentials of `user`.
    #[must_use]
    pub fn with_credentials(mut self, user: &str, entry: CredentialsEntry) -> Self {
        self.credentials.push((user.to_owned(), entry));
        self
    }

    /// The same lister with every credentials read failing
    /// ([`AdmissionError::ReadCredentials`]).
    #[must_use]
    pub fn with_unreadable_credentials(mut self) -> Self {
        self.credentials_unreadable = true;
        self
    }

    /// The same lister with every fresh read of a requester failing
    /// ([`AdmissionError::ReadRequester`], "the server is unavailable").
    #[must_use]
    pub fn with_unreadable_requester(mut self) -> Self {
        self.requester_unreadable = true;
        self
    }

    /// The name of each fresh read of a requester ([`UserLister::fresh_requester`]), in order.
    pub fn requester_reads(&self) -> Vec<String> {
        locked(&self.requester_reads).clone()
    }

    /// How many times the cache was read.
    pub fn calls(&self) -> usize {
        locked(&self.calls).len()
    }

    /// The namespace of each cache read, in order.
    pub fn namespaces(&self) -> Vec<String> {
        locked(&self.calls).clone()
    }

    /// The name of each fresh read, in order.
    pub fn reads(&self) -> Vec<String> {
        locked(&self.reads).clone()
    }
}

#[async_trait]
impl UserLister for FakeLister {
    fn cached_users(&self, namespace: &str) -> Result<Vec<Arc<IchorUser>>, AdmissionError> {
        locked(&self.calls).push(namespace.to_owned());
        if self.unsynced {
            return Err(AdmissionError::UsersNotSynced);
        }
        Ok(self.cached.clone())
    }

    async fn read_user(&self, _namespace: &str, name: &str) -> Result<Option<IchorUser>, AdmissionError> {
        locked(&self.reads).push(name.to_owned());
        if self.unreadable {
            return Err(AdmissionError::ReadUser {
                name: name.to_owned(),
                reason: "the server is unavailable".to_owned(),
            });
        }
        Ok(self
            .fresh
            .iter()
            .find(|u| u.metadata.name.as_deref() == Some(name))
            .cloned())
    }

    async fn requester(&self, _namespace: &str, name: &str) -> Result<Option<IchorUser>, AdmissionError> {
        if self.unsynced {
            return Err(AdmissionError::UsersNotSynced);
        }
        if let Some(user) = self
            .cached
            .iter()
            .find(|u| u.metadata.name.as_deref() == Some(name))
        {
            return Ok(Some(IchorUser::clone(user)));
        }
        Ok(fixture_requester(name))
    }

    async fn fresh_requester(
        &self,
        _namespace: &str,
        name: &str,
    ) -> Result<Option<IchorUser>, AdmissionError> {
        locked(&self.requester_reads).push(name.to_owned());
        if self.requester_unreadable {
            return Err(AdmissionError::ReadRequester {
                name: name.to_owned(),
                reason: "the server is unavailable".to_owned(),
            });
        }
        if let Some(user) = self
            .fresh
            .iter()
            .find(|u| u.metadata.name.as_deref() == Some(name))
        {
            return Ok(Some(user.clone()));
        }
        Ok(fixture_requester(name))
    }

    async fn read_credentials(
        &self,
        _namespace: &str,
        name: &str,
    ) -> Result<Option<CredentialsEntry>, AdmissionError> {
        if self.credentials_unreadable {
            return Err(AdmissionError::ReadCredentials {
                name: name.to_owned(),
                reason: "the server is unavailable".to_owned(),
            });
        }
        Ok(self
            .credentials
            .iter()
            .find(|(user, _)| user == name)
            .map(|(_, entry)| entry.clone()))
    }
}

/// [`ROOT`], [`OPERATOR`] or [`VIEWER`] as an enabled user holding its groups' roles, when
/// `name` is one of theirs.
fn fixture_requester(name: &str) -> Option<IchorUser> {
    [ROOT, OPERATOR, VIEWER].into_iter().find_map(|who| {
        (who.user.strip_prefix(USER_PREFIX) == Some(name)).then(|| {
            let roles: Vec<&str> = who
                .groups
                .iter()
                .filter_map(|g| g.strip_prefix(USER_PREFIX))
                .collect();
            user_object(name, &roles, false)
        })
    })
}

/// A serving pair in PEM, as the Secret `ichor-webhook-tls` holds it.
#[derive(Debug, Clone)]
pub struct ServingPair {
    /// The certificate (`tls.crt`), also the client's trust anchor: it is self-signed.
    pub cert_pem: String,
    /// The private key (`tls.key`).
    pub key_pem: String,
}

impl ServingPair {
    /// A fresh self-signed certificate for `host`.
    ///
    /// # Errors
    /// When rcgen cannot make the key or the certificate.
    pub fn self_signed(host: &str) -> Result<Self, rcgen::Error> {
        let key = rcgen::KeyPair::generate()?;
        let cert = rcgen::CertificateParams::new(vec![host.to_owned()])?.self_signed(&key)?;
        Ok(Self {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Writes `tls.key`, then `tls.crt`, into `dir` (the key first, so a watcher that sees the
    /// certificate finds its key).
    ///
    /// # Errors
    /// When a file cannot be written.
    pub fn write_to(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::write(dir.join("tls.key"), &self.key_pem)?;
        std::fs::write(dir.join("tls.crt"), &self.cert_pem)
    }
}

/// The webhooks served over HTTPS on `127.0.0.1:<free port>` by [`serve_on`], on the current
/// tokio runtime, until [`LoopbackServer::stop`].
#[derive(Debug)]
pub struct LoopbackServer {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), AdmissionError>>,
}

impl LoopbackServer {
    /// Binds a free loopback port and serves `state` there with the pair in `cert_dir` (which may
    /// appear later, as the mounted Secret does).
    ///
    /// # Errors
    /// [`AdmissionError::Bind`] when no loopback port can be bound.
    pub async fn start(
        cert_dir: PathBuf,
        state: Arc<AdmissionState>,
        options: ServerOptions,
    ) -> Result<Self, AdmissionError> {
        let listen = SocketAddr::from(([127, 0, 0, 1], 0));
        let bind_error = |source: std::io::Error| AdmissionError::Bind { addr: listen, source };
        let listener = TcpListener::bind(listen).await.map_err(bind_error)?;
        let addr = listener.local_addr().map_err(bind_error)?;
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown = async move {
            let _ = stopped.await;
        };
        let task = tokio::spawn(serve_on(listener, cert_dir, state, shutdown, options));
        Ok(Self { addr, stop, task })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://<host>:<port><path>`: the URL of `path` by the name `host`, which the client
    /// resolves to [`Self::addr`].
    pub fn url(&self, host: &str, path: &str) -> String {
        format!("https://{host}:{}{path}", self.addr.port())
    }

    /// Stops the server, lets it drain its connections, and returns what [`serve_on`] returned.
    ///
    /// # Errors
    /// The [`JoinError`] of a server task that panicked or was cancelled.
    pub async fn stop(self) -> Result<Result<(), AdmissionError>, JoinError> {
        // A server that already ended has dropped the receiver; its result tells why.
        let _ = self.stop.send(());
        self.task.await
    }
}
