//! `/healthz` (200 while the process serves), `/readyz` (503 with the list of what is still
//! missing until every readiness check holds: the issuer's signing keys and TLS loaded, the
//! controller's watchers synced — and, when a check knows why it does not hold, the reasons an
//! operator can act on, such as a kind the cluster does not serve) and `/metrics` (OpenMetrics
//! text).

use super::metrics::{Metrics, OPENMETRICS_CONTENT_TYPE, ReloadStatus};
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::fmt;
use std::sync::Arc;

/// Path of the liveness probe.
pub const HEALTHZ: &str = "/healthz";
/// Path of the readiness probe.
pub const READYZ: &str = "/readyz";
/// Path of the Prometheus scrape.
pub const METRICS: &str = "/metrics";

/// A check: `Ok` when it holds, else the reason when one is known.
type Check = dyn Fn() -> Result<(), Option<String>> + Send + Sync;

/// The conditions under which the process is ready: named predicates, all of which must hold.
#[derive(Clone, Default)]
pub struct Readiness {
    checks: Vec<(String, Arc<Check>)>,
}

impl fmt::Debug for Readiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Readiness")
            .field("checks", &self.checks.iter().map(|(n, _)| n).collect::<Vec<_>>())
            .finish()
    }
}

impl Readiness {
    /// No condition yet (ready).
    pub fn new() -> Self {
        Readiness::default()
    }

    /// Adds a named predicate.
    pub fn require(self, name: impl Into<String>, check: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        self.require_explained(name, move || if check() { Ok(()) } else { Err(None) })
    }

    /// Adds a named check that may say why it does not hold: `Err(Some(reason))` puts the
    /// reason in `/readyz`'s `reasons` (a sentence an operator can act on), `Err(None)` only the
    /// name in `waitingFor`.
    pub fn require_explained(
        mut self,
        name: impl Into<String>,
        check: impl Fn() -> Result<(), Option<String>> + Send + Sync + 'static,
    ) -> Self {
        self.checks.push((name.into(), Arc::new(check)));
        self
    }

    /// Adds "this watched file set is loaded", named after it, with its
    /// [`ReloadStatus::not_ready_reason`] while it is not.
    pub fn require_loaded(self, watched: Arc<dyn ReloadStatus>) -> Self {
        let name = watched.name().to_owned();
        self.require_explained(name, move || {
            if watched.is_loaded() {
                Ok(())
            } else {
                Err(watched.not_ready_reason())
            }
        })
    }

    /// The names of the predicates that do not hold now (empty when ready).
    pub fn waiting_for(&self) -> Vec<&str> {
        self.status().0
    }

    /// The names of the checks that do not hold now and the reasons known for them (both
    /// empty when ready), from one evaluation of each check.
    pub fn status(&self) -> (Vec<&str>, Vec<String>) {
        let mut names = Vec::new();
        let mut reasons = Vec::new();
        for (name, check) in &self.checks {
            if let Err(reason) = check() {
                names.push(name.as_str());
                reasons.extend(reason);
            }
        }
        (names, reasons)
    }
}

/// What `/metrics` serves: an OpenMetrics text exposition rendered at each scrape.
pub trait Exposition: Send + Sync {
    /// The exposition text, `# EOF` included.
    ///
    /// # Errors
    /// A metric could not be encoded.
    fn render(&self) -> Result<String, fmt::Error>;
}

impl Exposition for Metrics {
    fn render(&self) -> Result<String, fmt::Error> {
        Metrics::render(self)
    }
}

impl Exposition for prometheus_client::registry::Registry {
    fn render(&self) -> Result<String, fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, self)?;
        Ok(out)
    }
}

/// The router of the three endpoints: [`probes`] and [`scrape`] together (what a listener
/// inside the pod network serves).
pub fn router(readiness: Arc<Readiness>, metrics: Arc<dyn Exposition>) -> Router {
    probes(readiness).merge(scrape(metrics))
}

/// `/healthz` and `/readyz` only: what a listener open to clients serves, where the metrics
/// must not be.
pub fn probes(readiness: Arc<Readiness>) -> Router {
    Router::new()
        .route(HEALTHZ, get(healthz))
        .route(READYZ, get(readyz))
        .with_state(readiness)
}

/// `/metrics` only.
pub fn scrape(metrics: Arc<dyn Exposition>) -> Router {
    Router::new()
        .route(METRICS, get(render_metrics))
        .with_state(metrics)
}

fn no_store(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

async fn healthz() -> Response {
    no_store((StatusCode::OK, axum::Json(serde_json::json!({"status": "ok"}))).into_response())
}

async fn readyz(State(readiness): State<Arc<Readiness>>) -> Response {
    let (waiting, reasons) = readiness.status();
    let response = if waiting.is_empty() {
        (StatusCode::OK, axum::Json(serde_json::json!({"ready": true}))).into_response()
    } else {
        let mut body = serde_json::json!({"ready": false, "waitingFor": waiting});
        if !reasons.is_empty() {
            body["reasons"] = serde_json::json!(reasons);
        }
        (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response()
    };
    no_store(response)
}

async fn render_metrics(State(metrics): State<Arc<dyn Exposition>>) -> Response {
    match metrics.render() {
        Ok(text) => no_store(
            (
                StatusCode::OK,
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(OPENMETRICS_CONTENT_TYPE),
                )],
                text,
            )
                .into_response(),
        ),
        Err(_) => {
            tracing::warn!("rendering the metrics failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
