//! The issuer's Prometheus metrics, registered into the registry the server exposes.

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family},
    registry::Registry,
};

/// Labels of `ichor_issuer_tokens_issued_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct IssuedLabels {
    /// `authorization_code` or `refresh_token`.
    pub grant: String,
    /// `ichor-ui` or `ichor-kube`.
    pub audience: String,
}

/// Labels of the counters that carry a reason.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// Why (a fixed, small set of values).
    pub reason: String,
}

/// The counters. Cloning shares them.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    /// ID tokens issued, by grant and audience.
    pub tokens_issued: Family<IssuedLabels, Counter>,
    /// Refused sign-ins, by reason (`invalid_credentials`, `disabled`, `must_change`, `must_enrol`).
    pub login_failures: Family<ReasonLabels, Counter>,
    /// Requests refused by a limit, by reason (`user_backoff`, `source_rate`).
    pub backoff_hits: Family<ReasonLabels, Counter>,
    /// Refresh tokens presented again outside the grace window (family revoked).
    pub refresh_reuse_detections: Counter,
    /// Authorization codes presented more than once on this replica.
    pub code_replays: Counter,
    /// Refresh families ended at a sign-in because the user already had the most
    /// (`MAX_FAMILIES`): the oldest session makes room.
    pub refresh_families_evicted: Counter,
}

impl Metrics {
    /// Creates the counters and registers them into `registry`.
    pub fn register(registry: &mut Registry) -> Metrics {
        let m = Metrics::default();
        registry.register(
            "ichor_issuer_tokens_issued",
            "ID tokens issued, by grant type and audience",
            m.tokens_issued.clone(),
        );
        registry.register(
            "ichor_issuer_login_failures",
            "Refused sign-ins, by reason",
            m.login_failures.clone(),
        );
        registry.register(
            "ichor_issuer_backoff_hits",
            "Requests refused by a limit, by reason: user_backoff (per-user back-off), source_rate (per-source failures), family_rate (per-family refresh ceiling), family_writes (per-family cap of rotations written), session_starts (per-user sessions started), hash_queue_full (password checks shed)",
            m.backoff_hits.clone(),
        );
        registry.register(
            "ichor_issuer_refresh_reuse_detections",
            "Refresh tokens presented again outside the grace window; their family was revoked",
            m.refresh_reuse_detections.clone(),
        );
        registry.register(
            "ichor_issuer_code_replays",
            "Authorization codes presented more than once on this replica",
            m.code_replays.clone(),
        );
        registry.register(
            "ichor_issuer_refresh_families_evicted",
            "Refresh families (sessions) ended at a sign-in because the user already had the most; the oldest made room",
            m.refresh_families_evicted.clone(),
        );
        m
    }

    pub(crate) fn issued(&self, grant: &str, audience: &str) {
        self.tokens_issued
            .get_or_create(&IssuedLabels {
                grant: grant.to_owned(),
                audience: audience.to_owned(),
            })
            .inc();
    }

    pub(crate) fn login_failure(&self, reason: &str) {
        self.login_failures
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    pub(crate) fn backoff_hit(&self, reason: &str) {
        self.backoff_hits
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }
}
