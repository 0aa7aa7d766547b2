//! What the listeners serve, composed from the validated configuration: the OIDC routers,
//! the `UserService` (authorized in process or by the kube-apiserver), the UI, health.

use super::config::{CaFile, Config, KubeconfigSettings};
use super::flags::MAX_KUBE_CA_BYTES;
use super::runtime::RunError;
use crate::oidc::Settings;
use crate::store::UserStore;
use axum::Router;
use ichor_renderers::trust::keys::KeysDocument;
use ichor_server::metrics::Metrics;
use ichor_server::reload::Watched;
use std::path::PathBuf;
use std::sync::Arc;

/// What the OIDC routers are built from: the configuration and the shared, watched state.
#[derive(Debug, Clone)]
pub struct Served {
    /// The validated flags.
    pub config: Arc<Config>,
    /// `keys.json`, reloaded on change (the lead converts it to `keys::LoadedKeys`).
    pub keys: Watched<KeysDocument>,
    /// The metrics registry (its counters go to the request handlers).
    pub metrics: Arc<Metrics>,
    /// The runtime settings (token TTL, refresh lifetime, kubeconfig server), read per token.
    pub settings: Arc<Settings>,
}

/// The OIDC routers of the two listeners.
#[derive(Debug, Clone, Default)]
pub struct Routers {
    /// Routes of the external listener (8443).
    pub external: Router,
    /// Routes of the internal listener (8444): discovery and JWKS only.
    pub internal: Router,
}

/// The OIDC routers of the binary: an [`Issuer`](crate::oidc::Issuer) over `store`, whose
/// signing keys follow the watched `keys.json` (a document whose keys cannot be loaded keeps the
/// previous keys serving), and whose counters join the process's `/metrics`.
///
/// # Errors
/// [`RunError::Issuer`] when the issuer refuses the configuration.
pub fn oidc_routers(served: &Served, store: Arc<dyn UserStore>) -> Result<Routers, RunError> {
    let issuer = build_issuer(served, store)?;
    Ok(Routers {
        external: crate::oidc::external_router(Arc::clone(&issuer)).merge(ui_router(served, None)),
        internal: crate::oidc::internal_router(issuer),
    })
}

/// The routers of `--store local` (`ichor dev`): [`oidc_routers`] over `store`, plus the
/// `UserService` on the external listener (gRPC, and gRPC-web for browsers over HTTP/1.1 or
/// HTTP/2), over the same store, with bearer tokens verified by the same issuer and calls
/// authorized in process by the built-in roles ([`crate::api::LocalAccessReview`]). `cluster` is
/// the cluster `GetMyKubeconfig` points at (`None`: that call is refused as not configured).
///
/// # Errors
/// [`RunError::Issuer`] when the issuer, the built-in policy or the API refuses its configuration.
pub fn local_routers(
    served: &Served,
    store: Arc<crate::store::local::LocalStore>,
    cluster: Option<crate::api::ClusterInfo>,
) -> Result<Routers, RunError> {
    local_routers_with(served, store, cluster, None)
}

/// [`local_routers`] with the site's own RBAC objects (`site`: Roles, ClusterRoles and their
/// bindings, e.g. a binding of an external user) evaluated beside the built-in roles.
///
/// # Errors
/// As [`local_routers`].
pub fn local_routers_with(
    served: &Served,
    store: Arc<crate::store::local::LocalStore>,
    cluster: Option<crate::api::ClusterInfo>,
    site: Option<ichor_renderers::rbac::Policy>,
) -> Result<Routers, RunError> {
    use crate::api::LocalAccessReview;
    use ichor_renderers::rbac::{Authorizer, Policy};

    let mut policy = Policy::builtin().map_err(|e| RunError::Issuer(format!("the built-in roles: {e}")))?;
    if let Some(site) = site {
        policy = policy.extend(site);
    }
    api_routers(
        served,
        store,
        LocalAccessReview::new(Authorizer::new(policy)),
        cluster,
        None,
        None,
    )
}

/// The routers of `--store kube` (in a cluster): [`oidc_routers`] over `store`, plus the
/// `UserService` on the external listener like [`local_routers`], but authorized by the
/// kube-apiserver (`access`, a `SubjectAccessReview` per question) and writing `IchorUser`
/// objects as the caller (impersonation, [`crate::api::kube_backend`]), so Kubernetes RBAC and
/// the admission webhook decide. `GetMyKubeconfig` names `endpoint` (the followed
/// `TalosCluster.spec.endpoint`) unless `kubeAPIServerURL` is set, and `cluster`'s endpoint while
/// it is unknown.
///
/// # Errors
/// [`RunError::Issuer`] when the issuer or the API refuses its configuration.
pub fn kube_routers(
    served: &Served,
    store: Arc<crate::store::kube::KubeStore>,
    access: crate::api::KubeAccessReview,
    cluster: Option<crate::api::ClusterInfo>,
    endpoint: Arc<crate::talos_cluster::ClusterEndpoint>,
) -> Result<Routers, RunError> {
    // With an external provider, `/auth/config` says whether the cluster trusts it as the API
    // maps it, from the followed TalosClusters.
    let trust = served.config.external.clone().map(|provider| {
        // The cluster chosen for kubeconfigs is the one whose trust matters, when chosen.
        let kubeconfig = &served.config.kubeconfig;
        let trust = Arc::new(crate::external::trust::ExternalTrust::new(
            provider,
            kubeconfig
                .talos_cluster
                .clone()
                .unwrap_or_else(|| kubeconfig.cluster_name.clone()),
        ));
        #[cfg(feature = "watch")]
        tokio::spawn(Arc::clone(&trust).follow(store.client().clone(), Arc::default()));
        trust
    });
    api_routers(served, store, access, cluster, Some(endpoint), trust)
}

/// [`oidc_routers`] over `store` plus the `UserService` over the same store and issuer, asking
/// `access`; the kubeconfig settings of the configuration go to `GetMyKubeconfig`.
fn api_routers<B, A>(
    served: &Served,
    store: Arc<B>,
    access: A,
    cluster: Option<crate::api::ClusterInfo>,
    endpoint: Option<Arc<crate::talos_cluster::ClusterEndpoint>>,
    trust: Option<Arc<crate::external::trust::ExternalTrust>>,
) -> Result<Routers, RunError>
where
    B: crate::api::UserBackend,
    A: crate::api::AccessReview,
{
    use crate::api::{ApiConfig, SystemClock, UserApi, grpc_router};

    let issuer = build_issuer(served, Arc::clone(&store) as Arc<dyn UserStore>)?;
    let mut config = ApiConfig::new(served.config.issuer.clone(), cluster)
        .map_err(|e| RunError::Issuer(format!("the UserService: {e}")))?;
    // One argon2id gate, one back-off and one set of failure buckets for the whole process:
    // sign-ins and the UserService's password checks and hashes.
    config.passwords = issuer.password_limits();
    config.settings = Arc::clone(&served.settings);
    config.talos_endpoint = endpoint;
    config.external = external_verifier(&served.config)?;
    config.keys = Arc::clone(issuer.keys());
    let api = UserApi::new(store, access, Arc::clone(&issuer), Arc::new(SystemClock), config);
    let grpc = grpc_router(api);
    Ok(Routers {
        external: crate::oidc::external_router(Arc::clone(&issuer))
            .merge(grpc)
            .merge(ui_router(served, trust)),
        internal: crate::oidc::internal_router(issuer),
    })
}

/// Why the cluster CA for kubeconfigs could not be read. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum KubeCaError {
    /// The file could not be read.
    #[error("--kube-ca-file {path}: cannot read it: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_KUBE_CA_BYTES`].
    #[error("--kube-ca-file {path} is larger than {} KiB; give the cluster's CA certificate(s) only", MAX_KUBE_CA_BYTES / 1024)]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// The file holds something else than PEM certificates.
    #[error("--kube-ca-file {path}: {reason} (it is written into every kubeconfig: certificates only)")]
    NotCertificates {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// Reads the cluster CA for kubeconfigs (public data): at most [`MAX_KUBE_CA_BYTES`], PEM
/// certificates only (any other block, such as a private key, is refused). The default file
/// ([`CaFile::Default`]) may be absent: `Ok(None)`, and kubeconfigs carry no CA data (logged).
///
/// # Errors
/// [`KubeCaError`] for a given file that is absent, and for any file that cannot be read, is too
/// large or is not certificates only.
pub fn read_kube_ca(ca: &CaFile) -> Result<Option<String>, KubeCaError> {
    use std::io::Read as _;
    let path = match ca {
        CaFile::Given(path) | CaFile::Default(path) => path,
    };
    let mut text = String::new();
    let read =
        std::fs::File::open(path).and_then(|f| f.take(MAX_KUBE_CA_BYTES + 1).read_to_string(&mut text));
    match read {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && matches!(ca, CaFile::Default(_)) => {
            tracing::warn!(
                file = %path.display(),
                "no cluster CA file; kubeconfigs are served without certificate-authority-data \
                 (give --kube-ca-file to include one)"
            );
            return Ok(None);
        }
        Err(source) => {
            return Err(KubeCaError::Read {
                path: path.clone(),
                source,
            });
        }
    }
    if text.len() as u64 > MAX_KUBE_CA_BYTES {
        return Err(KubeCaError::TooLarge { path: path.clone() });
    }
    let refuse = |reason: String| KubeCaError::NotCertificates {
        path: path.clone(),
        reason,
    };
    let mut labelled = 0usize;
    for line in text.lines().map(str::trim) {
        if let Some(label) = line.strip_prefix("-----BEGIN ") {
            if label != "CERTIFICATE-----" {
                return Err(refuse(format!(
                    "it holds a {:?} block",
                    label.trim_end_matches('-')
                )));
            }
            labelled += 1;
        }
    }
    let parsed = rustls_pemfile::certs(&mut text.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| refuse("a certificate block is not valid PEM".to_owned()))?;
    if parsed.is_empty() || parsed.len() != labelled {
        return Err(refuse(
            "it holds no PEM certificate (-----BEGIN CERTIFICATE-----)".to_owned(),
        ));
    }
    Ok(Some(text))
}

/// The cluster `GetMyKubeconfig` points at with `--store kube`: `endpoint` (the issuer's own
/// client's server, used when neither `kubeAPIServerURL` is set nor the `TalosCluster`'s
/// endpoint known), the configured name, and the CA read by [`read_kube_ca`] (`None`: no CA
/// data).
pub fn kube_cluster(
    settings: &KubeconfigSettings,
    endpoint: &str,
    ca_pem: Option<String>,
) -> crate::api::ClusterInfo {
    crate::api::ClusterInfo {
        name: settings.cluster_name.clone(),
        endpoint: endpoint.trim_end_matches('/').to_owned(),
        ca_pem: ca_pem.unwrap_or_default(),
    }
}

/// The verifier of the configured external provider's ID tokens, if one is configured.
///
/// # Errors
/// [`RunError::Issuer`] when its HTTP client cannot be built.
pub fn external_verifier(
    config: &Config,
) -> Result<Option<Arc<crate::external::ExternalVerifier>>, RunError> {
    config
        .external
        .clone()
        .map(crate::external::ExternalVerifier::new)
        .transpose()
        .map_err(|e| RunError::Issuer(e.to_string()))
}

/// The web UI's routes ([`crate::ui`]): the built SPA embedded in the binary (or the directory
/// of `ICHOR_UI_DIR`, [`crate::ui::UiFiles::from_env`]) and `/auth/config` with Ichor's issuer
/// and the external provider when configured; the API always requires a token. Also
/// `/downloads` ([`crate::downloads`]), the CLI install page kubeconfigs point at.
fn ui_router(served: &Served, trust: Option<Arc<crate::external::trust::ExternalTrust>>) -> Router {
    let external = served
        .config
        .external
        .as_ref()
        .map(|e| (e.issuer.as_str(), e.client_id.as_str()));
    crate::ui::router_with_trust(
        crate::ui::UiFiles::from_env(),
        crate::ui::AuthConfig::new(&served.config.issuer, external, true),
        trust,
    )
    .merge(crate::downloads::router(&served.config.issuer))
}

/// The OIDC issuer of [`oidc_routers`] (shared by the routers and the `UserService`).
fn build_issuer(served: &Served, store: Arc<dyn UserStore>) -> Result<Arc<crate::oidc::Issuer>, RunError> {
    use crate::{
        keys::{KeyRing, LoadedKeys},
        oidc::{Issuer, IssuerConfig, TrustedProxies},
    };

    let ring = Arc::new(KeyRing::new());
    let load = {
        let ring = Arc::clone(&ring);
        move |doc: Option<Arc<KeysDocument>>| {
            let Some(doc) = doc else { return };
            match LoadedKeys::from_document(&doc) {
                Ok(keys) => ring.store(keys),
                Err(error) => {
                    tracing::warn!(%error, "keys.json parsed but its keys cannot be used; keeping the previous keys")
                }
            }
        }
    };
    load(served.keys.current());
    let mut changes = served.keys.subscribe();
    let keys = served.keys.clone();
    tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            load(keys.current());
        }
    });

    let config = &served.config;
    let settings = Arc::clone(&served.settings);
    let trusted_proxies = TrustedProxies::new(config.trusted_proxies.clone());
    let mut built = None;
    served.metrics.handlers(|registry| {
        built = Some(Issuer::new(
            IssuerConfig {
                external_url: config.issuer.clone(),
                trusted_proxies,
            },
            ring,
            store,
            settings,
            registry,
        ));
    });
    match built {
        Some(Ok(issuer)) => Ok(Arc::new(
            issuer
                .with_internal_jwks_uri(config.internal_jwks_uri.clone())
                .with_family_writes_per_minute(config.family_writes_per_minute),
        )),
        Some(Err(e)) => Err(RunError::Issuer(e.to_string())),
        None => Err(RunError::Issuer("the metrics registry was not available".into())),
    }
}

/// Adds the health and readiness endpoints (`health`, without `/metrics`, which has its own
/// listener) to the external router; the internal listener serves its OIDC routes only.
pub fn compose(oidc: Routers, health: Router) -> Routers {
    Routers {
        external: oidc.external.merge(health),
        internal: oidc.internal,
    }
}
