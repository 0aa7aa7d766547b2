//! A serving process's Prometheus metrics, rendered in the OpenMetrics text format.
//!
//! Two kinds: counters the request handlers register and increment ([`Metrics::handlers`]), and
//! values computed at scrape from the watched files ([`Sources`]: age of the signing keys, expiry
//! of the served certificates, reload failures). Every name starts with the prefix given to
//! [`Metrics::new`] (`ichor_issuer_` for the issuer).

use super::reload::Watched;
use super::tls::TlsPair;
use jiff::Timestamp;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::registry::Registry;
use std::fmt;
use std::sync::Arc;

/// Content type of [`Metrics::render`]'s output.
pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Something reloaded from files, as the metrics and readiness see it (implemented by every
/// [`Watched`] value, whatever it holds).
pub trait ReloadStatus: Send + Sync {
    /// The name (a metric label value).
    fn name(&self) -> &str;
    /// Whether a value is loaded.
    fn is_loaded(&self) -> bool;
    /// Failed loads since start.
    fn reload_failures(&self) -> u64;
    /// Why nothing is loaded yet, when that is known and the operator can act on it (shown in
    /// `/readyz`); `None` by default.
    fn not_ready_reason(&self) -> Option<String> {
        None
    }
}

impl<T: Send + Sync> ReloadStatus for Watched<T> {
    fn name(&self) -> &str {
        Watched::name(self)
    }
    fn is_loaded(&self) -> bool {
        Watched::is_loaded(self)
    }
    fn reload_failures(&self) -> u64 {
        Watched::reload_failures(self)
    }
}

/// The creation instants of the keys signing at an instant, for the key-age gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SigningKeyTimes {
    /// `createdAt` of the RSA key signing ID tokens.
    pub rsa: Option<Timestamp>,
    /// `createdAt` of the HMAC key signing internal artifacts.
    pub hmac: Option<Timestamp>,
}

/// Reads the current signing-key times at scrape (`now` given).
pub type KeyTimesFn = dyn Fn(Timestamp) -> SigningKeyTimes + Send + Sync;

/// What the scrape-time metrics read.
#[derive(Clone, Default)]
pub struct Sources {
    /// Watched files whose reload failures are exported (label `file`).
    pub reloads: Vec<Arc<dyn ReloadStatus>>,
    /// The served certificate of each listener (label `listener`).
    pub certificates: Vec<(String, Watched<TlsPair>)>,
    /// The signing keys' creation times.
    pub key_times: Option<Arc<KeyTimesFn>>,
}

impl fmt::Debug for Sources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sources")
            .field(
                "reloads",
                &self
                    .reloads
                    .iter()
                    .map(|r| r.name().to_owned())
                    .collect::<Vec<_>>(),
            )
            .field("certificates", &self.certificates)
            .field("key_times", &self.key_times.is_some())
            .finish()
    }
}

/// The metrics registry of one serving process: the scrape-time values computed here, plus the
/// request handlers' counters, registered by the OIDC module into [`Metrics::handlers`].
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    handlers: std::sync::Mutex<Registry>,
}

impl Metrics {
    /// Registers the scrape-time collector over `sources`, its metrics named `<prefix>_…`.
    pub fn new(prefix: &str, sources: Sources) -> Self {
        let mut registry = Registry::with_prefix(prefix);
        registry.register_collector(Box::new(ScrapeCollector { sources }));
        Metrics {
            registry,
            handlers: std::sync::Mutex::new(Registry::default()),
        }
    }

    /// Lets `register` add the request handlers' metrics (full names, `ichor_issuer_…`).
    pub fn handlers(&self, register: impl FnOnce(&mut Registry)) {
        let mut handlers = self
            .handlers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        register(&mut handlers);
    }

    /// The OpenMetrics text exposition (scrape-time values computed now).
    pub fn render(&self) -> Result<String, fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode_registry(&mut out, &self.registry)?;
        let handlers = self
            .handlers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        prometheus_client::encoding::text::encode_registry(&mut out, &handlers)?;
        prometheus_client::encoding::text::encode_eof(&mut out)?;
        Ok(out)
    }
}

struct ScrapeCollector {
    sources: Sources,
}

impl fmt::Debug for ScrapeCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.sources.fmt(f)
    }
}

impl prometheus_client::collector::Collector for ScrapeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        let now = Timestamp::now();

        if let Some(key_times) = &self.sources.key_times {
            let times = key_times(now);
            let mut m = encoder.encode_descriptor(
                "signing_key_age_seconds",
                "Seconds since createdAt of the key signing now (kind rsa: ID tokens; hmac: internal artifacts)",
                None,
                MetricType::Gauge,
            )?;
            for (kind, created) in [("rsa", times.rsa), ("hmac", times.hmac)] {
                if let Some(created) = created {
                    let age = now.duration_since(created).as_secs_f64();
                    m.encode_family(&[("kind", kind)])?.encode_gauge(&age)?;
                }
            }
        }

        let mut m = encoder.encode_descriptor(
            "certificate_expiry_timestamp_seconds",
            "notAfter of the certificate each listener serves, in Unix seconds",
            None,
            MetricType::Gauge,
        )?;
        for (listener, pair) in &self.sources.certificates {
            if let Some(pair) = pair.current() {
                m.encode_family(&[("listener", listener.as_str())])?
                    .encode_gauge(&pair.not_after().as_second())?;
            }
        }

        let mut m = encoder.encode_descriptor(
            "reload_failures",
            "Failed loads of a watched file set (the previous value kept serving)",
            None,
            MetricType::Counter,
        )?;
        for r in &self.sources.reloads {
            m.encode_family(&[("file", r.name())])?
                .encode_counter::<NoLabelSet, _, u64>(
                    &r.reload_failures(),
                    None::<&Exemplar<NoLabelSet, u64>>,
                )?;
        }

        let mut m = encoder.encode_descriptor(
            "file_loaded",
            "1 when a watched file set is loaded, 0 while it never loaded",
            None,
            MetricType::Gauge,
        )?;
        for r in &self.sources.reloads {
            m.encode_family(&[("file", r.name())])?
                .encode_gauge(&i64::from(r.is_loaded()))?;
        }
        Ok(())
    }
}
