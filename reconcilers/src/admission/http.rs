//! The axum router of the webhooks: one POST path per kind, plus `/healthz`.
//!
//! Each handler reads at most [`MAX_BODY_BYTES`] (413 beyond), parses an `AdmissionReview` v1
//! (400 with the reason otherwise), checks that the request is for the kind of the path (any
//! other kind or a subresource is refused: fail closed), runs the rule and answers with the
//! request's uid.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use http_body_util::{BodyExt as _, LengthLimitError, Limited};
use ichor_renderers::crd::GROUP;

use super::review::{self, AdmissionRequest, MAX_BODY_BYTES, Verdict};
use super::{AdmissionState, clusters, installations, operations, users};

/// The path of the `IchorUser` webhook.
pub const ICHORUSERS_PATH: &str = "/validate/ichorusers";
/// The path of the `TalosCluster` webhook.
pub const TALOSCLUSTERS_PATH: &str = "/validate/talosclusters";
/// The path of the `TalosOperation` webhook.
pub const TALOSOPERATIONS_PATH: &str = "/validate/talosoperations";
/// The path of the `IchorInstallation` webhook.
pub const ICHORINSTALLATIONS_PATH: &str = "/validate/ichorinstallations";
/// The liveness path.
pub const HEALTHZ_PATH: &str = "/healthz";

/// Which webhook a path serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Webhook {
    Users,
    Clusters,
    Operations,
    Installations,
}

impl Webhook {
    fn kind(self) -> &'static str {
        match self {
            Self::Users => users::KIND,
            Self::Clusters => clusters::KIND,
            Self::Operations => operations::KIND,
            Self::Installations => installations::KIND,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Users => "ichorusers",
            Self::Clusters => "talosclusters",
            Self::Operations => "talosoperations",
            Self::Installations => "ichorinstallations",
        }
    }
}

/// The router of the four webhooks and `/healthz` (the lead wires it into
/// `ichor-controller run`; [`super::serve`] serves it over HTTPS).
pub fn router(state: Arc<AdmissionState>) -> Router {
    Router::new()
        .route(ICHORUSERS_PATH, post(ichorusers))
        .route(TALOSCLUSTERS_PATH, post(talosclusters))
        .route(TALOSOPERATIONS_PATH, post(talosoperations))
        .route(ICHORINSTALLATIONS_PATH, post(ichorinstallations))
        .route(HEALTHZ_PATH, get(|| async { "ok\n" }))
        // The handlers read the body with their own limit and a clear 413.
        .layer(DefaultBodyLimit::disable())
        .with_state(state)
}

async fn ichorusers(State(state): State<Arc<AdmissionState>>, body: Body) -> Response {
    handle(&state, Webhook::Users, body).await
}

async fn talosclusters(State(state): State<Arc<AdmissionState>>, body: Body) -> Response {
    handle(&state, Webhook::Clusters, body).await
}

async fn talosoperations(State(state): State<Arc<AdmissionState>>, body: Body) -> Response {
    handle(&state, Webhook::Operations, body).await
}

async fn ichorinstallations(State(state): State<Arc<AdmissionState>>, body: Body) -> Response {
    handle(&state, Webhook::Installations, body).await
}

fn plain(status: StatusCode, message: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{message}\n"),
    )
        .into_response()
}

async fn handle(state: &AdmissionState, webhook: Webhook, body: Body) -> Response {
    let started = Instant::now();
    let bytes = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) if error.downcast_ref::<LengthLimitError>().is_some() => {
            return plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the AdmissionReview is larger than {MAX_BODY_BYTES} bytes, the most accepted"),
            );
        }
        Err(error) => {
            return plain(
                StatusCode::BAD_REQUEST,
                format!("the request body could not be read: {error}"),
            );
        }
    };
    let request = match review::parse(&bytes) {
        Ok(request) => request,
        Err(error) => {
            tracing::warn!(webhook = webhook.name(), %error, "admission: malformed review");
            return plain(StatusCode::BAD_REQUEST, error.to_string());
        }
    };
    let verdict = decide(state, webhook, &request).await;
    if let Verdict::Deny(message) = &verdict {
        tracing::info!(
            webhook = webhook.name(),
            uid = %request.uid,
            user = review::username(&request),
            operation = review::operation_name(&request.operation),
            namespace = review::namespace(&request),
            name = %request.name,
            reason = %message,
            "admission: denied"
        );
    }
    if let Some(observer) = &state.observer {
        observer.decided(webhook.name(), verdict.is_allowed(), started.elapsed());
    }
    match review::answer(&request, verdict) {
        Ok(document) => Json(document).into_response(),
        Err(error) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the AdmissionReview answer could not be written: {error}"),
        ),
    }
}

async fn decide(state: &AdmissionState, webhook: Webhook, request: &AdmissionRequest) -> Verdict {
    let kind = &request.kind;
    if kind.group != GROUP || kind.kind != webhook.kind() {
        return Verdict::deny(format!(
            "request.kind: {}/{} is not admitted by this webhook, which admits only {GROUP}/{}",
            kind.group,
            kind.kind,
            webhook.kind()
        ));
    }
    if let Some(sub) = &request.sub_resource {
        return Verdict::deny(format!(
            "request.subResource: {sub:?} is not admitted by this webhook, which admits only {} objects",
            webhook.kind()
        ));
    }
    match webhook {
        Webhook::Users => users::review(state, request).await,
        Webhook::Clusters => clusters::review(state, request).await,
        Webhook::Operations => operations::review(state, request).await,
        Webhook::Installations => installations::review(state, request).await,
    }
}
