//! The watchers: one kube-runtime `watcher` per input, each converting its events with a
//! [`WatchState`] and sending them, one batch per watch event, into one channel.
//!
//! The RBAC of the chart grants the Secrets and the ConfigMap only by name, so each owned Secret
//! and the trust ConfigMap has its own watcher with the field selector `metadata.name=<name>`.
//! The inputs (IchorUser, TalosCluster, TalosMachine, TalosOperation) and the issuer Service
//! (by label selector) are watched in the controller's namespace; IchorInstallation is
//! cluster-scoped.
//!
//! The Secrets of the credentials namespace (one per user, docs/credentials-sharding.md) are
//! watched by metadata only (`PartialObjectMetadata`): the graph needs their names and uids,
//! never an entry, so no password hash or refresh token reaches the controller through them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use ichor_controller_core::identity::project::credentials_secrets_listed_key;
use ichor_graph::{Event, ObjectKey};
use ichor_renderers::auth::credentials::CREDENTIALS_SECRET_NAME;
use ichor_renderers::contract::{CREDENTIALS_NAMESPACE, ISSUER_DEPLOYMENT, ISSUER_POD_SELECTOR};
use ichor_renderers::trust::{CA_SECRET, SIGNING_SECRET, TLS_SECRET, TRUST_CONFIGMAP, UI_CA_CONFIGMAP};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::convert::{WatchState, deployment_rollout_only, metadata_event, pod_layouts_only, reshaped};
use crate::admission::UserCacheFeed;

pub use ichor_controller_core::identity::webhook::WEBHOOK_TLS_SECRET;
/// The API group and version of the Ichor kinds.
pub use ichor_renderers::contract::GROUP as ICHOR_GROUP;
/// The version of the Ichor kinds.
pub use ichor_renderers::contract::VERSION as ICHOR_VERSION;

/// One watched input.
#[derive(Debug, Clone)]
pub struct Source {
    /// A name for logs (`Secret ichor-oidc-tls`, `IchorUser`, …).
    pub label: String,
    /// The resource.
    pub resource: ApiResource,
    /// Watched in the controller's namespace (else cluster-wide).
    pub namespaced: bool,
    /// Watched in this namespace instead of the controller's (when `namespaced`).
    pub namespace: Option<String>,
    /// Watched by metadata only: the objects carry their name, namespace, uid,
    /// resourceVersion, labels and timestamps, never their content
    /// ([`super::convert::metadata_only`]).
    pub metadata_only: bool,
    /// How the objects are cut down before the graph sees them (`Whole`: as they are, or as
    /// [`Source::metadata_only`] says).
    pub shape: Shape,
    /// Selectors.
    pub config: watcher::Config,
    /// A source whose list is refused (403, 404: RBAC or CRD missing) counts as synced and
    /// empty instead of holding readiness back; it is retried with backoff all the same.
    pub optional: bool,
    /// What a refusal of an optional source means and what to do, for the log.
    pub refused_hint: Option<String>,
    /// The object delivered while the source's list is answered and deleted when it is refused
    /// ([`WatchState::with_listed_marker`]), for a source whose emptiness the graph decides on.
    pub listed_marker: Option<ObjectKey>,
}

impl Source {
    /// A source of the controller's namespace (or cluster-wide), read whole, required.
    fn new(label: String, resource: ApiResource, namespaced: bool, config: watcher::Config) -> Self {
        Source {
            label,
            resource,
            namespaced,
            namespace: None,
            metadata_only: false,
            shape: Shape::Whole,
            config,
            optional: false,
            refused_hint: None,
            listed_marker: None,
        }
    }

    /// The same source, optional.
    fn optional(mut self) -> Self {
        self.optional = true;
        self
    }
}

/// The Secrets of [`CREDENTIALS_NAMESPACE`], by metadata only. Optional: the namespace is made
/// by `ichor init`, not the chart, and while it (or the controller's Role in it) is missing the
/// list is refused; the controller runs on, says so, and retries.
pub fn credentials_source() -> Source {
    Source {
        label: format!("Secrets of {CREDENTIALS_NAMESPACE} (metadata)"),
        resource: ApiResource::erase::<Secret>(&()),
        namespaced: true,
        namespace: Some(CREDENTIALS_NAMESPACE.to_owned()),
        metadata_only: true,
        shape: Shape::Whole,
        config: watcher::Config::default(),
        optional: true,
        refused_hint: Some(format!(
            "the namespace {CREDENTIALS_NAMESPACE} is missing, or the controller's Role there: \
             per-user credentials are not seen (nor collected) until `ichor init` creates it and \
             the chart is upgraded"
        )),
        // Whether the namespace holds only users' Secrets is decided on this list: a refused
        // list must not read as an empty namespace.
        listed_marker: Some(credentials_secrets_listed_key()),
    }
}

/// How a source's objects are cut down before the graph sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// As delivered (whole, or by metadata only).
    Whole,
    /// Issuer pods: metadata and the credentials layouts they list
    /// ([`super::convert::pod_layouts_only`]; a metadata watch).
    PodLayouts,
    /// The issuer Deployment: what its rollout says ([`super::convert::deployment_rollout_only`]).
    DeploymentRollout,
}

/// What the switch to one Secret per user waits for (docs/credentials-sharding.md, "The
/// switch"): the issuer Deployment (by name), its pods (by the chart's selector, metadata and
/// one annotation) and the credentials namespace (by name, metadata). Optional: without them
/// (or the chart's grants) the switch waits, and everything else runs.
pub fn migration_sources() -> Vec<Source> {
    vec![
        Source {
            label: format!("Deployment {ISSUER_DEPLOYMENT} (rollout)"),
            resource: ApiResource::erase::<Deployment>(&()),
            namespaced: true,
            namespace: None,
            metadata_only: false,
            shape: Shape::DeploymentRollout,
            config: watcher::Config::default().fields(&format!("metadata.name={ISSUER_DEPLOYMENT}")),
            optional: true,
            refused_hint: Some(format!(
                "the controller may not watch the Deployment {ISSUER_DEPLOYMENT}: the move to one Secret per user waits"
            )),
            listed_marker: None,
        },
        Source {
            label: format!("Pods ({ISSUER_POD_SELECTOR}, metadata)"),
            resource: ApiResource::erase::<Pod>(&()),
            namespaced: true,
            namespace: None,
            metadata_only: true,
            shape: Shape::PodLayouts,
            config: watcher::Config::default().labels(ISSUER_POD_SELECTOR),
            optional: true,
            refused_hint: Some(
                "the controller may not list the issuer's pods: the move to one Secret per user waits"
                    .to_owned(),
            ),
            listed_marker: None,
        },
        Source {
            label: format!("Namespace {CREDENTIALS_NAMESPACE} (metadata)"),
            resource: ApiResource::erase::<Namespace>(&()),
            namespaced: false,
            namespace: None,
            metadata_only: true,
            shape: Shape::Whole,
            config: watcher::Config::default().fields(&format!("metadata.name={CREDENTIALS_NAMESPACE}")),
            optional: true,
            refused_hint: Some(format!(
                "the controller may not watch the namespace {CREDENTIALS_NAMESPACE}: the move to one Secret per user waits"
            )),
            listed_marker: None,
        },
    ]
}

fn ichor(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(ICHOR_GROUP, ICHOR_VERSION, kind))
}

/// The name of the chart's issuer Service.
pub use ichor_renderers::contract::ISSUER_SERVICE as ISSUER_SERVICE_NAME;

/// [`sources_named`] for the chart's issuer Service, [`ISSUER_SERVICE_NAME`].
pub fn sources(issuer_selector: &str, webhook_configuration: &str) -> Vec<Source> {
    sources_named(issuer_selector, ISSUER_SERVICE_NAME, webhook_configuration)
}

/// Every input of the identity graph, for a controller in one namespace whose issuer Service is
/// the one named `issuer_name` and labelled `issuer_selector`, and that keeps the webhook
/// configuration `webhook_configuration`.
///
/// The issuer Service is watched by its name as well as its label: whoever may create a Service
/// in the namespace could label one as the issuer, and the Service chosen steers the leaf's
/// SANs and every cluster's `discoveryURL`. Other Services never reach the World.
pub fn sources_named(issuer_selector: &str, issuer_name: &str, webhook_configuration: &str) -> Vec<Source> {
    let mut out = Vec::new();
    for kind in ["IchorUser", "TalosCluster", "TalosMachine", "TalosOperation"] {
        out.push(Source::new(
            kind.to_owned(),
            ichor(kind),
            true,
            watcher::Config::default(),
        ));
    }
    // Cluster-scoped; the graph falls back to default settings without one, so a cluster whose
    // RBAC does not grant it still runs.
    out.push(
        Source::new(
            "IchorInstallation".to_owned(),
            ichor("IchorInstallation"),
            false,
            watcher::Config::default(),
        )
        .optional(),
    );
    out.push(Source::new(
        format!("Service {issuer_name} ({issuer_selector})"),
        ApiResource::erase::<Service>(&()),
        true,
        watcher::Config::default()
            .labels(issuer_selector)
            .fields(&format!("metadata.name={issuer_name}")),
    ));
    for name in [
        SIGNING_SECRET,
        CA_SECRET,
        TLS_SECRET,
        WEBHOOK_TLS_SECRET,
        CREDENTIALS_SECRET_NAME,
    ] {
        out.push(Source::new(
            format!("Secret {name}"),
            ApiResource::erase::<Secret>(&()),
            true,
            watcher::Config::default().fields(&format!("metadata.name={name}")),
        ));
    }
    out.push(credentials_source());
    out.extend(migration_sources());
    // Cluster-scoped; without it (or without the RBAC to watch it) no serving certificate is
    // issued, since nothing calls the webhooks.
    out.push(
        Source::new(
            format!("ValidatingWebhookConfiguration {webhook_configuration}"),
            ApiResource::erase::<ValidatingWebhookConfiguration>(&()),
            false,
            watcher::Config::default().fields(&format!("metadata.name={webhook_configuration}")),
        )
        .optional(),
    );
    for name in [TRUST_CONFIGMAP, UI_CA_CONFIGMAP] {
        out.push(Source::new(
            format!("ConfigMap {name}"),
            ApiResource::erase::<ConfigMap>(&()),
            true,
            watcher::Config::default().fields(&format!("metadata.name={name}")),
        ));
    }
    out
}

/// One batch from one watcher.
#[derive(Debug)]
pub struct Batch {
    /// The source's label.
    pub source: String,
    /// The graph events.
    pub events: Vec<Event>,
}

/// Which watchers completed their first list, and which inputs the cluster does not serve.
#[derive(Debug)]
pub struct SyncState {
    synced: Vec<AtomicBool>,
    notify: tokio::sync::Notify,
    /// Source label → the sentence saying its kind is not served (a list answered 404).
    unserved: Mutex<BTreeMap<String, String>>,
}

impl SyncState {
    /// `n` watchers, none synced.
    pub fn new(n: usize) -> Self {
        SyncState {
            synced: (0..n).map(|_| AtomicBool::new(false)).collect(),
            notify: tokio::sync::Notify::new(),
            unserved: Mutex::new(BTreeMap::new()),
        }
    }

    /// The sentences naming each required Ichor kind the cluster does not serve now (its last
    /// list or watch answered 404), in source order; empty once every one is served.
    pub fn not_served(&self) -> Vec<String> {
        self.unserved_map().values().cloned().collect()
    }

    fn unserved_map(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.unserved
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that `source`'s kind is not served; true when that is news.
    fn set_unserved(&self, source: &str, message: String) -> bool {
        self.unserved_map().insert(source.to_owned(), message).is_none()
    }

    /// Records that `source`'s kind is served; true when it was not before.
    fn set_served(&self, source: &str) -> bool {
        self.unserved_map().remove(source).is_some()
    }

    /// Marks watcher `i` synced.
    pub fn mark(&self, i: usize) {
        if let Some(flag) = self.synced.get(i)
            && !flag.swap(true, Ordering::AcqRel)
        {
            self.notify.notify_waiters();
            self.notify.notify_one();
        }
    }

    /// Whether every watcher is synced.
    pub fn all(&self) -> bool {
        self.synced.iter().all(|f| f.load(Ordering::Acquire))
    }

    /// Waits until some watcher becomes synced.
    pub async fn changed(&self) {
        self.notify.notified().await;
    }
}

/// The HTTP status of an API refusal inside a watcher error.
fn refusal_code(e: &watcher::Error) -> Option<u16> {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s.code),
        watcher::Error::WatchError(s) => Some(s.code),
        _ => None,
    }
}

/// The watch stream of `source` (in `namespace` when namespaced), its events cut down as the
/// source says ([`Shape`], [`Source::metadata_only`]).
fn open(client: &Client, namespace: &str, source: &Source) -> WatchStream {
    if source.metadata_only {
        let api: Api<PartialObjectMeta<DynamicObject>> = if source.namespaced {
            Api::namespaced_with(client.clone(), namespace, &source.resource)
        } else {
            Api::all_with(client.clone(), &source.resource)
        };
        let pods = source.shape == Shape::PodLayouts;
        watcher::watcher(api, source.config.clone())
            .default_backoff()
            .map(move |item| {
                item.map(|e| {
                    if pods {
                        reshaped(e, pod_layouts_only)
                    } else {
                        metadata_event(e)
                    }
                })
            })
            .boxed()
    } else {
        let api: Api<DynamicObject> = if source.namespaced {
            Api::namespaced_with(client.clone(), namespace, &source.resource)
        } else {
            Api::all_with(client.clone(), &source.resource)
        };
        let rollout = source.shape == Shape::DeploymentRollout;
        watcher::watcher(api, source.config.clone())
            .default_backoff()
            .map(move |item| {
                item.map(|e| {
                    if rollout {
                        reshaped(e, deployment_rollout_only)
                    } else {
                        e
                    }
                })
            })
            .boxed()
    }
}

/// One source's watch events, as [`open`] makes them.
type WatchStream = futures::stream::BoxStream<'static, Result<watcher::Event<DynamicObject>, watcher::Error>>;

/// The waits before a watch stream is opened anew after a refusal took its listed marker away:
/// 0.8 s, doubled while the last reopen was less than two minutes before, up to 30 s (the
/// watcher's own backoff is lost with the stream it belongs to).
#[derive(Debug, Default)]
pub struct Reopens {
    last: Option<(std::time::Instant, std::time::Duration)>,
}

impl Reopens {
    const FIRST: std::time::Duration = std::time::Duration::from_millis(800);
    const MAX: std::time::Duration = std::time::Duration::from_secs(30);
    const RESET: std::time::Duration = std::time::Duration::from_secs(120);

    /// The wait before a reopen at `now`.
    pub fn next(&mut self, now: std::time::Instant) -> std::time::Duration {
        let wait = match self.last {
            Some((at, wait)) if now.saturating_duration_since(at) < Self::RESET => (wait * 2).min(Self::MAX),
            _ => Self::FIRST,
        };
        self.last = Some((now, wait));
        wait
    }
}

/// Starts one task per source; their batches arrive on `tx`, their first lists mark `sync`.
/// The watch of the namespace's `IchorUser`s also feeds `users` (the admission webhooks'
/// cache), before its batch is sent, so the webhooks add no watch of their own. The tasks end
/// when `tx` is closed.
pub fn spawn(
    client: &Client,
    namespace: &str,
    sources: Vec<Source>,
    tx: mpsc::Sender<Batch>,
    sync: Arc<SyncState>,
    users: Option<UserCacheFeed>,
) -> Vec<JoinHandle<()>> {
    let mut users = users;
    sources
        .into_iter()
        .enumerate()
        .map(|(i, source)| {
            let mut feed = if source.namespaced && source.resource.kind == "IchorUser" {
                users.take()
            } else {
                None
            };
            let namespace = source.namespace.as_deref().unwrap_or(namespace);
            let mut stream = open(client, namespace, &source);
            let (client, namespace) = (client.clone(), namespace.to_owned());
            let tx = tx.clone();
            let sync = sync.clone();
            tokio::spawn(async move {
                let mut state = WatchState::new(source.resource.clone());
                if let Some(marker) = &source.listed_marker {
                    state = state.with_listed_marker(marker.clone());
                }
                let mut refused_logged = false;
                let mut reopens = Reopens::default();
                let ichor_kind = source.resource.group == ICHOR_GROUP;
                while let Some(item) = stream.next().await {
                    match item {
                        Ok(event) => {
                            // `Init` comes before every retried list, answered or not.
                            if !matches!(event, watcher::Event::Init) {
                                refused_logged = false;
                            }
                            // `Init` opens a (re)list before it is made; any other event
                            // means the apiserver answered the list or watch.
                            if ichor_kind
                                && !matches!(event, watcher::Event::Init)
                                && sync.set_served(&source.label)
                            {
                                tracing::info!(source = %source.label, "the kind is served now");
                            }
                            if let Some(feed) = feed.as_mut() {
                                feed.apply_dynamic(&event);
                            }
                            let events = state.on_event(event);
                            if !events.is_empty() {
                                let batch = Batch {
                                    source: source.label.clone(),
                                    events,
                                };
                                if tx.send(batch).await.is_err() {
                                    return;
                                }
                            }
                            if state.is_synced() {
                                sync.mark(i);
                            }
                        }
                        Err(e) => {
                            if let Some(feed) = feed.as_ref() {
                                feed.failed(std::time::Instant::now());
                            }
                            let code = refusal_code(&e);
                            if source.optional && matches!(code, Some(403 | 404)) {
                                if !std::mem::replace(&mut refused_logged, true) {
                                    match &source.refused_hint {
                                        Some(hint) => tracing::warn!(source = %source.label, error = %e,
                                            "optional input refused: {hint}; treated as empty (retried quietly)"),
                                        None => tracing::warn!(source = %source.label, error = %e,
                                            "optional input refused; treated as empty (retried quietly)"),
                                    }
                                }
                                let events = state.refused();
                                let reopen = !events.is_empty();
                                if reopen {
                                    let batch = Batch {
                                        source: source.label.clone(),
                                        events,
                                    };
                                    if tx.send(batch).await.is_err() {
                                        return;
                                    }
                                }
                                sync.mark(i);
                                if reopen {
                                    // A refused watch is retried from where it was, and a
                                    // resumed watch never lists: only a new stream (a whole
                                    // list first) can bring the listed marker back. Spaced
                                    // out: a list allowed and a watch refused would loop.
                                    tokio::time::sleep(reopens.next(std::time::Instant::now())).await;
                                    stream = open(&client, &namespace, &source);
                                }
                            } else if ichor_kind && code == Some(404) {
                                // A required Ichor kind whose CRD is not installed: said once,
                                // in the log and in /readyz, and retried until it appears.
                                let message = ichor_renderers::crd::not_served_message(&source.resource.kind);
                                if sync.set_unserved(&source.label, message.clone()) {
                                    tracing::warn!(source = %source.label, "{message} (retried until it is)");
                                }
                            } else {
                                tracing::warn!(source = %source.label, error = %e, "watch failed; retrying");
                            }
                        }
                    }
                    if tx.is_closed() {
                        return;
                    }
                }
            })
        })
        .collect()
}
