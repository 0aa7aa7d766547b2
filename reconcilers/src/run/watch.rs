//! The watchers: one kube-runtime `watcher` per input, each converting its events with a
//! [`WatchState`] and sending them, one batch per watch event, into one channel.
//!
//! The RBAC of the chart grants the Secrets and the ConfigMap only by name, so each owned Secret
//! and the trust ConfigMap has its own watcher with the field selector `metadata.name=<name>`.
//! The inputs (IchorUser, TalosCluster, TalosMachine, TalosOperation) and the issuer Service
//! (by label selector) are watched in the controller's namespace; IchorInstallation is
//! cluster-scoped.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use ichor_graph::Event;
use ichor_renderers::auth::credentials::CREDENTIALS_SECRET_NAME;
use ichor_renderers::trust::{CA_SECRET, SIGNING_SECRET, TLS_SECRET, TRUST_CONFIGMAP, UI_CA_CONFIGMAP};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::convert::WatchState;
use crate::admission::UserCacheFeed;

pub use ichor_reconcile::identity::webhook::WEBHOOK_TLS_SECRET;
/// The API group and version of the Ichor kinds.
pub const ICHOR_GROUP: &str = "ichor.maesh.dev";
/// The version of the Ichor kinds.
pub const ICHOR_VERSION: &str = "v1alpha1";

/// One watched input.
#[derive(Debug, Clone)]
pub struct Source {
    /// A name for logs (`Secret ichor-oidc-tls`, `IchorUser`, …).
    pub label: String,
    /// The resource.
    pub resource: ApiResource,
    /// Watched in the controller's namespace (else cluster-wide).
    pub namespaced: bool,
    /// Selectors.
    pub config: watcher::Config,
    /// A source whose list is refused (403, 404: RBAC or CRD missing) counts as synced and
    /// empty instead of holding readiness back; it is retried with backoff all the same.
    pub optional: bool,
}

fn ichor(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(ICHOR_GROUP, ICHOR_VERSION, kind))
}

/// The name of the chart's issuer Service.
pub const ISSUER_SERVICE_NAME: &str = "ichor-issuer";

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
        out.push(Source {
            label: kind.to_owned(),
            resource: ichor(kind),
            namespaced: true,
            config: watcher::Config::default(),
            optional: false,
        });
    }
    // Cluster-scoped; the graph falls back to default settings without one, so a cluster whose
    // RBAC does not grant it still runs.
    out.push(Source {
        label: "IchorInstallation".to_owned(),
        resource: ichor("IchorInstallation"),
        namespaced: false,
        config: watcher::Config::default(),
        optional: true,
    });
    out.push(Source {
        label: format!("Service {issuer_name} ({issuer_selector})"),
        resource: ApiResource::erase::<Service>(&()),
        namespaced: true,
        config: watcher::Config::default()
            .labels(issuer_selector)
            .fields(&format!("metadata.name={issuer_name}")),
        optional: false,
    });
    for name in [
        SIGNING_SECRET,
        CA_SECRET,
        TLS_SECRET,
        WEBHOOK_TLS_SECRET,
        CREDENTIALS_SECRET_NAME,
    ] {
        out.push(Source {
            label: format!("Secret {name}"),
            resource: ApiResource::erase::<Secret>(&()),
            namespaced: true,
            config: watcher::Config::default().fields(&format!("metadata.name={name}")),
            optional: false,
        });
    }
    // Cluster-scoped; without it (or without the RBAC to watch it) no serving certificate is
    // issued, since nothing calls the webhooks.
    out.push(Source {
        label: format!("ValidatingWebhookConfiguration {webhook_configuration}"),
        resource: ApiResource::erase::<ValidatingWebhookConfiguration>(&()),
        namespaced: false,
        config: watcher::Config::default().fields(&format!("metadata.name={webhook_configuration}")),
        optional: true,
    });
    for name in [TRUST_CONFIGMAP, UI_CA_CONFIGMAP] {
        out.push(Source {
            label: format!("ConfigMap {name}"),
            resource: ApiResource::erase::<ConfigMap>(&()),
            namespaced: true,
            config: watcher::Config::default().fields(&format!("metadata.name={name}")),
            optional: false,
        });
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
            let api: Api<DynamicObject> = if source.namespaced {
                Api::namespaced_with(client.clone(), namespace, &source.resource)
            } else {
                Api::all_with(client.clone(), &source.resource)
            };
            let tx = tx.clone();
            let sync = sync.clone();
            tokio::spawn(async move {
                let mut state = WatchState::new(source.resource.clone());
                let mut refused_logged = false;
                let mut stream = watcher::watcher(api, source.config.clone())
                    .default_backoff()
                    .boxed();
                let ichor_kind = source.resource.group == ICHOR_GROUP;
                while let Some(item) = stream.next().await {
                    match item {
                        Ok(event) => {
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
                                    tracing::warn!(source = %source.label, error = %e,
                                        "optional input refused; treated as empty (retried quietly)");
                                }
                                sync.mark(i);
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
