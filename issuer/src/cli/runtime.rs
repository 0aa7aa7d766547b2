//! The running issuer: the store opened, the watched files loaded, the two HTTPS listeners and
//! the plain-HTTP metrics listener served until the shutdown signal.

use super::compose::{Routers, Served, compose};
use super::config::{Config, ExternalTls, StoreConfig};
use crate::installation::InstallationSettings;
use crate::oidc::Settings;
use crate::store::UserStore;
use ichor_renderers::trust::keys::KeysDocument;
use ichor_server::health::{self, Readiness};
use ichor_server::metrics::{Metrics, ReloadStatus, Sources};
use ichor_server::reload::{WatchError, WatchOptions, Watched};
use ichor_server::tls;
use ichor_server::{ServeOptions, serve, serve_http};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

/// How [`run`] watches files and serves (the defaults in production; tests shorten them).
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Watching of `keys.json` and the TLS pairs.
    pub watch: WatchOptions,
    /// Limits and timeouts of the listeners.
    pub serve: ServeOptions,
    /// The cluster's runtime settings (`--store kube`), which `/readyz` waits for; `None`: the
    /// flags' values are the settings.
    pub installation: Option<Arc<InstallationSettings>>,
}

/// The three bound sockets.
#[derive(Debug)]
pub struct Listeners {
    /// The external listener.
    pub external: TcpListener,
    /// The internal listener.
    pub internal: TcpListener,
    /// The metrics listener (plain HTTP).
    pub metrics: TcpListener,
}

impl Listeners {
    /// Binds `--listen`, `--internal-listen` and `--metrics-listen`.
    pub async fn bind(config: &Config) -> Result<Self, RunError> {
        let bind = |addr: SocketAddr, flag: &'static str| async move {
            TcpListener::bind(addr)
                .await
                .map_err(|source| RunError::Bind { flag, addr, source })
        };
        Ok(Listeners {
            external: bind(config.listen, "--listen").await?,
            internal: bind(config.internal_listen, "--internal-listen").await?,
            metrics: bind(config.metrics_listen, "--metrics-listen").await?,
        })
    }
}

/// Why [`run`] could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A listener could not be bound.
    #[error("cannot listen on {addr} ({flag}): {source}")]
    Bind {
        /// The flag of the address.
        flag: &'static str,
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file watcher could not start.
    #[error(transparent)]
    Watch(#[from] WatchError),
    /// The TLS configuration was refused.
    #[error("cannot build the TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    /// The OIDC issuer could not be built.
    #[error("cannot build the issuer: {0}")]
    Issuer(String),
    /// The user store could not be reached at start-up.
    #[error("cannot open the user store: {0}")]
    Store(String),
}

/// Opens the configured user store.
///
/// # Errors
/// [`RunError::Store`] when the Kubernetes client cannot be configured.
pub async fn open_store(config: &Config) -> Result<Arc<dyn UserStore>, RunError> {
    match &config.store {
        StoreConfig::Kube => {
            let client = kube::Client::try_default()
                .await
                .map_err(|e| RunError::Store(e.to_string()))?;
            Ok(Arc::new(crate::store::kube::KubeStore::new(client)))
        }
        StoreConfig::Local { users_dir, state_dir } => Ok(Arc::new(crate::store::local::LocalStore::new(
            users_dir.clone(),
            state_dir.clone(),
        ))),
    }
}

/// The cluster-mode backends: the user store and the access review over one client (the pod's
/// ServiceAccount, from the environment), and the server URL that client uses.
///
/// # Errors
/// [`RunError::Store`] when no Kubernetes client configuration is found.
pub async fn open_kube() -> Result<
    (
        Arc<crate::store::kube::KubeStore>,
        crate::api::KubeAccessReview,
        String,
    ),
    RunError,
> {
    let config = kube::Config::infer()
        .await
        .map_err(|e| RunError::Store(e.to_string()))?;
    let endpoint = config.cluster_url.to_string();
    let client = kube::Client::try_from(config).map_err(|e| RunError::Store(e.to_string()))?;
    Ok((
        Arc::new(crate::store::kube::KubeStore::new(client.clone())),
        crate::api::KubeAccessReview::new(client),
        endpoint,
    ))
}

/// Loads the watched files, builds the routers with `routers` and serves the three listeners
/// until `shutdown` completes (then drains in-flight requests, bounded by the serve options):
/// the OIDC routers with `/healthz` and `/readyz` on the external one, `/metrics` (with the
/// probes again) on the metrics one only.
pub async fn run<F>(
    config: Config,
    listeners: Listeners,
    options: RunOptions,
    routers: F,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError>
where
    F: FnOnce(&Served) -> Result<Routers, RunError>,
{
    let config = Arc::new(config);
    let keys = Watched::file("keys", &config.keys_file, KeysDocument::parse, options.watch)?;
    let internal_pair = tls::watch_pair("tls-internal", &config.ichor_tls, options.watch)?;
    let external_pair = match &config.external_tls {
        ExternalTls::Operator(files) => tls::watch_pair("tls-external", files, options.watch)?,
        ExternalTls::IchorLeaf => internal_pair.clone(),
    };

    let mut reloads: Vec<Arc<dyn ReloadStatus>> =
        vec![Arc::new(keys.clone()), Arc::new(internal_pair.clone())];
    if matches!(config.external_tls, ExternalTls::Operator(_)) {
        reloads.push(Arc::new(external_pair.clone()));
    }
    if let Some(installation) = &options.installation {
        reloads.push(Arc::clone(installation) as Arc<dyn ReloadStatus>);
    }
    let metrics = Arc::new(Metrics::new(
        "ichor_issuer",
        Sources {
            reloads: reloads.clone(),
            certificates: vec![
                ("external".to_owned(), external_pair.clone()),
                ("internal".to_owned(), internal_pair.clone()),
            ],
            key_times: Some(crate::keys::key_times_source(keys.clone())),
        },
    ));
    let readiness = reloads
        .into_iter()
        .fold(Readiness::new(), |r, watched| r.require_loaded(watched));

    let served = Served {
        settings: match &options.installation {
            Some(installation) => installation.settings(),
            None => Arc::new(Settings::new(config.settings())),
        },
        config: Arc::clone(&config),
        keys,
        metrics: Arc::clone(&metrics),
    };
    let readiness = Arc::new(readiness);
    let app = compose(routers(&served)?, health::probes(Arc::clone(&readiness)));
    let ops = health::router(readiness, metrics);
    let external_tls = tls::server_config(external_pair)?;
    let internal_tls = tls::server_config(internal_pair)?;

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    tracing::info!(
        issuer = %config.issuer,
        external = ?listeners.external.local_addr().ok(),
        internal = ?listeners.internal.local_addr().ok(),
        metrics = ?listeners.metrics.local_addr().ok(),
        "serving"
    );
    tokio::join!(
        serve(
            listeners.external,
            external_tls,
            app.external,
            stopped(stop_rx.clone()),
            options.serve
        ),
        serve(
            listeners.internal,
            internal_tls,
            app.internal,
            stopped(stop_rx.clone()),
            options.serve
        ),
        serve_http(listeners.metrics, ops, stopped(stop_rx), options.serve),
    );
    tracing::info!("stopped");
    Ok(())
}
