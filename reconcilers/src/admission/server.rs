//! HTTPS for the webhooks, by the issuer's listener code (reused, not copied): the serving pair
//! `tls.crt`/`tls.key` of a directory (the mounted Secret `ichor-webhook-tls`) is followed on
//! change (`ichor_server::tls::watch_pair`: file events plus a poll), so a reissued
//! certificate reaches new connections without a restart. Until the pair exists (the controller
//! issues it after start), handshakes fail and the kube-apiserver's calls fail; that is expected
//! and heals by itself once the Secret is mounted.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ichor_server::reload::{WatchOptions, Watched};
use ichor_server::tls::{PairFiles, TlsPair, server_config, watch_pair};
use ichor_server::{ServeOptions, serve as serve_https};
use tokio::net::TcpListener;

use super::review::MAX_BODY_BYTES;
use super::{AdmissionError, AdmissionState, router};

/// How the webhook listener follows its certificate and bounds its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerOptions {
    /// How the serving pair is followed (the issuer's defaults: file events and a 10 s poll).
    pub watch: WatchOptions,
    /// Limits of the HTTPS listener (the body limit is raised to [`MAX_BODY_BYTES`]).
    pub serve: ServeOptions,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            watch: WatchOptions::default(),
            serve: ServeOptions {
                max_body_bytes: MAX_BODY_BYTES,
                ..ServeOptions::default()
            },
        }
    }
}

/// Serves the webhooks over HTTPS on `listen` with the pair in `cert_dir` until `shutdown`
/// completes (then drains open connections).
///
/// # Errors
/// [`AdmissionError::Bind`] when the address cannot be bound, [`AdmissionError::WatchCertificate`]
/// or [`AdmissionError::Tls`] when the TLS setup fails. A missing or invalid pair is not an error:
/// it is waited for.
pub async fn serve(
    listen: SocketAddr,
    cert_dir: PathBuf,
    state: Arc<AdmissionState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), AdmissionError> {
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| AdmissionError::Bind { addr: listen, source })?;
    serve_on(listener, cert_dir, state, shutdown, ServerOptions::default()).await
}

/// [`serve`] on a listener already bound (tests and benchmarks bind port 0), with options.
///
/// # Errors
/// As [`serve`], without the bind.
pub async fn serve_on(
    listener: TcpListener,
    cert_dir: PathBuf,
    state: Arc<AdmissionState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    options: ServerOptions,
) -> Result<(), AdmissionError> {
    let pair = watch_certificate(&cert_dir, options.watch)?;
    serve_with(listener, pair, state, shutdown, options.serve).await
}

/// Follows the serving pair `tls.crt`/`tls.key` in `cert_dir` (a pair that is missing or
/// invalid is waited for, with a warning). The handle says whether a pair is loaded: a replica
/// is ready to take webhook calls only then, since a handshake without a certificate fails.
///
/// # Errors
/// [`AdmissionError::WatchCertificate`] when the directory cannot be followed.
pub fn watch_certificate(cert_dir: &Path, watch: WatchOptions) -> Result<Watched<TlsPair>, AdmissionError> {
    let files = PairFiles::in_secret_dir(cert_dir);
    let pair = watch_pair("the webhook serving certificate", &files, watch).map_err(|e| {
        AdmissionError::WatchCertificate {
            dir: cert_dir.to_path_buf(),
            reason: e.to_string(),
        }
    })?;
    if !pair.is_loaded() {
        tracing::warn!(
            dir = %cert_dir.display(),
            "admission: no webhook serving certificate yet; handshakes fail until tls.crt and tls.key appear"
        );
    }
    Ok(pair)
}

/// [`serve_on`] with a pair already followed ([`watch_certificate`]).
///
/// # Errors
/// [`AdmissionError::Tls`] when the TLS setup fails.
pub async fn serve_with(
    listener: TcpListener,
    pair: Watched<TlsPair>,
    state: Arc<AdmissionState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    serve: ServeOptions,
) -> Result<(), AdmissionError> {
    let tls = server_config(pair).map_err(|e| AdmissionError::Tls(e.to_string()))?;
    let mut serve_options = serve;
    serve_options.max_body_bytes = serve_options.max_body_bytes.max(MAX_BODY_BYTES);
    tracing::info!(listen = ?listener.local_addr().ok(), "admission: serving the webhooks over HTTPS");
    serve_https(listener, tls, router(state), shutdown, serve_options).await;
    Ok(())
}
