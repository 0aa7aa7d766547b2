//! How full the credentials Secret is: the API server refuses a Secret whose data values add up
//! to more than [`SECRET_DATA_LIMIT`] bytes, and every user's entry lives in that one Secret.
//! The store measures the Secret each time it holds it whole (after every read and every write),
//! exports the size as gauges, and warns once when it passes [`WARN_FRACTION`] of the limit, so
//! an operator sees the limit coming before sign-ins fail (docs/credentials-sharding.md).

use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicU64, Ordering},
};

use k8s_openapi::api::core::v1::Secret;
use prometheus_client::{metrics::gauge::Gauge, registry::Registry};

/// The most bytes of data (the sum of the decoded values) the API server accepts in one Secret.
pub const SECRET_DATA_LIMIT: u64 = 1024 * 1024;
/// The fraction of [`SECRET_DATA_LIMIT`] past which the store logs a warning.
pub const WARN_FRACTION: f64 = 0.8;

/// The bytes the API server counts against [`SECRET_DATA_LIMIT`]: the decoded values of `data`.
pub fn data_bytes(secret: &Secret) -> u64 {
    secret
        .data
        .as_ref()
        .map_or(0, |data| data.values().map(|v| v.0.len() as u64).sum())
}

/// The fraction of [`SECRET_DATA_LIMIT`] that `bytes` take.
pub fn fraction(bytes: u64) -> f64 {
    bytes as f64 / SECRET_DATA_LIMIT as f64
}

/// What a new measurement means for the warning, given whether the last one was past it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crossing {
    /// The size went past [`WARN_FRACTION`]: warn once.
    Above,
    /// The size came back under it (room was made): say so once.
    Below,
    /// No change of side.
    Same,
}

/// Whether `bytes` crosses [`WARN_FRACTION`] of the limit, coming from `was_above`.
pub fn crossing(was_above: bool, bytes: u64) -> Crossing {
    match (was_above, fraction(bytes) > WARN_FRACTION) {
        (false, true) => Crossing::Above,
        (true, false) => Crossing::Below,
        _ => Crossing::Same,
    }
}

/// The size gauges of the credentials Secret. Cloning shares them.
#[derive(Debug, Clone, Default)]
pub struct SecretSize {
    /// `ichor_issuer_credentials_secret_bytes`: data bytes at the last read or write.
    bytes: Gauge,
    /// `ichor_issuer_credentials_secret_limit_ratio`: those bytes over [`SECRET_DATA_LIMIT`].
    ratio: Gauge<f64, AtomicU64>,
    /// Whether the last measurement was past [`WARN_FRACTION`].
    above: Arc<AtomicBool>,
    /// Whether anything was measured yet.
    measured: Arc<AtomicBool>,
}

impl SecretSize {
    /// Registers the gauges into `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "ichor_issuer_credentials_secret_bytes",
            "Data bytes of the credentials Secret ichor-user-credentials at this replica's last read or write (the API server refuses more than 1048576)",
            self.bytes.clone(),
        );
        registry.register(
            "ichor_issuer_credentials_secret_limit_ratio",
            "Data bytes of the credentials Secret over the API server's limit of 1048576 (at 1, sign-ins that add a session fail)",
            self.ratio.clone(),
        );
    }

    /// Records the size of `secret` as just read or written, and logs when it crosses
    /// [`WARN_FRACTION`] of the limit.
    pub fn observe(&self, secret: &Secret) {
        self.record(data_bytes(secret));
    }

    /// Records a size of `bytes`.
    pub fn record(&self, bytes: u64) {
        self.bytes.set(i64::try_from(bytes).unwrap_or(i64::MAX));
        self.ratio.set(fraction(bytes));
        self.measured.store(true, Ordering::Relaxed);
        let was_above = self.above.load(Ordering::Relaxed);
        match crossing(was_above, bytes) {
            Crossing::Above => {
                // Only the replica that flips the flag logs.
                if !self.above.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        bytes,
                        limit = SECRET_DATA_LIMIT,
                        percent = (fraction(bytes) * 100.0).round(),
                        "the credentials Secret is past {}% of the API server's limit; when it is full, \
                         sign-ins that add a session fail: {}",
                        (WARN_FRACTION * 100.0).round(),
                        super::super::FULL_REMEDY
                    );
                }
            }
            Crossing::Below => {
                if self.above.swap(false, Ordering::Relaxed) {
                    tracing::info!(
                        bytes,
                        limit = SECRET_DATA_LIMIT,
                        "the credentials Secret is back under {}% of the API server's limit",
                        (WARN_FRACTION * 100.0).round()
                    );
                }
            }
            Crossing::Same => {}
        }
    }

    /// The data bytes last measured, if any.
    pub fn bytes(&self) -> Option<u64> {
        self.measured
            .load(Ordering::Relaxed)
            .then(|| u64::try_from(self.bytes.get()).unwrap_or(0))
    }

    /// The fraction of the limit last measured (0 before any).
    pub fn ratio(&self) -> f64 {
        self.ratio.get()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    fn secret(values: &[usize]) -> Secret {
        let data: BTreeMap<String, ByteString> = values
            .iter()
            .enumerate()
            .map(|(i, n)| (format!("user-{i}"), ByteString(vec![b'x'; *n])))
            .collect();
        Secret {
            data: Some(data),
            ..Secret::default()
        }
    }

    #[test]
    fn the_size_is_the_decoded_values_as_the_api_server_counts_them() {
        assert_eq!(data_bytes(&Secret::default()), 0);
        assert_eq!(data_bytes(&secret(&[580, 190, 0])), 770);
        assert!((fraction(SECRET_DATA_LIMIT / 2) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn the_warning_fires_once_on_the_way_up_and_clears_on_the_way_down() {
        let limit80 = (SECRET_DATA_LIMIT as f64 * WARN_FRACTION) as u64;
        assert_eq!(crossing(false, 1000), Crossing::Same);
        assert_eq!(
            crossing(false, limit80),
            Crossing::Same,
            "at 80 % exactly: not past it"
        );
        assert_eq!(crossing(false, limit80 + 1), Crossing::Above);
        assert_eq!(crossing(true, limit80 + 500), Crossing::Same, "already warned");
        assert_eq!(crossing(true, SECRET_DATA_LIMIT), Crossing::Same);
        assert_eq!(crossing(true, limit80 - 1), Crossing::Below);
    }

    #[test]
    fn the_gauges_follow_each_measurement_and_are_exported_under_the_issuers_prefix() {
        let size = SecretSize::default();
        let mut registry = Registry::default();
        size.register(&mut registry);
        assert_eq!(size.bytes(), None, "nothing measured yet");

        size.observe(&secret(&[600_000, 300_000]));
        assert_eq!(size.bytes(), Some(900_000));
        assert!((size.ratio() - 900_000.0 / 1_048_576.0).abs() < 1e-12);
        assert!(size.above.load(Ordering::Relaxed), "past 80 %");
        size.observe(&secret(&[600_000]));
        assert_eq!(size.bytes(), Some(600_000));
        assert!(!size.above.load(Ordering::Relaxed), "back under 80 %");

        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("ichor_issuer_credentials_secret_bytes 600000"),
            "{text}"
        );
        assert!(
            text.contains("ichor_issuer_credentials_secret_limit_ratio 0.5722"),
            "{text}"
        );
    }
}
