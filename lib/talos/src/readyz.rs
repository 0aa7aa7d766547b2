//! Waiting for a node's kube-apiserver after the apply: its `/readyz`.
//!
//! # When a node counts as back
//! The apply returns before the apiserver restarts: Talos re-renders the static pod and the
//! kubelet replaces it some seconds later, so a `200` right after the apply is usually the OLD
//! apiserver. [`ReadyWatch`] therefore ends the wait when either
//! - `/readyz` was seen NOT ready since the apply and is ready again (down, then up — the normal
//!   case: the hardware run saw it down 15 to 45 s), or
//! - it has been ready for every probe and the restart grace (`--restart-grace`, 60 s by default)
//!   has passed since the apply: the restart was too quick for the probe interval to see, or
//!   did not happen because the node already ran this document.
//!
//! Only HTTP 200 is ready; any other status, a TLS failure or no connection is not ready (a
//! `401` means anonymous `/readyz` is off on that apiserver, see spec talos-machine-api.md §5,
//! and the wait then ends in the node timeout).

use std::{path::Path, time::Duration};

/// One probe's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observation {
    /// `200`.
    Ready,
    /// Anything else, with what was seen (`HTTP 503`, `connection refused`, …).
    NotReady(String),
}

/// Whether the wait is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Keep probing.
    Waiting,
    /// It was down since the apply and is ready again.
    CameBack,
    /// It stayed ready past the restart grace.
    StayedReady,
}

/// The wait for one node (see the module documentation); pure: the caller gives the time
/// since the apply with each observation.
#[derive(Clone, Debug)]
pub struct ReadyWatch {
    grace: Duration,
    seen_down: bool,
}

impl ReadyWatch {
    /// A wait that accepts an apiserver never seen down after `grace`.
    pub fn new(grace: Duration) -> Self {
        Self {
            grace,
            seen_down: false,
        }
    }

    /// Takes one probe made `since_apply` after the apply.
    pub fn observe(&mut self, since_apply: Duration, observation: &Observation) -> Verdict {
        match observation {
            Observation::NotReady(_) => {
                self.seen_down = true;
                Verdict::Waiting
            }
            Observation::Ready if self.seen_down => Verdict::CameBack,
            Observation::Ready if since_apply >= self.grace => Verdict::StayedReady,
            Observation::Ready => Verdict::Waiting,
        }
    }
}

/// Why the `/readyz` client cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The CA file is unusable.
    #[error("--kube-ca-file {path}: {reason}")]
    CaFile {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The CA given as PEM is unusable.
    #[error("{label}: {reason}")]
    CaPem {
        /// Where the PEM came from, as the caller names it.
        label: String,
        /// What is wrong.
        reason: String,
    },
    /// The HTTP client could not start.
    #[error("the /readyz client cannot start: {0}")]
    Client(String),
}

/// An https client for `/readyz`.
#[derive(Debug, Clone)]
pub struct ReadyzProbe {
    http: reqwest::Client,
}

impl ReadyzProbe {
    /// A client that trusts only the PEM certificates of `kube_ca` (the cluster's Kubernetes
    /// CA), or that skips verification when `kube_ca` is `None` (the caller allows that only
    /// with an explicit flag). Each probe gives up after `request_timeout`.
    ///
    /// # Errors
    /// [`ProbeError`].
    pub fn new(kube_ca: Option<&Path>, request_timeout: Duration) -> Result<Self, ProbeError> {
        let roots = match kube_ca {
            Some(path) => {
                let ca_error = |reason: String| ProbeError::CaFile {
                    path: path.display().to_string(),
                    reason,
                };
                let bytes = std::fs::read(path).map_err(|e| ca_error(e.to_string()))?;
                Some(roots(&bytes).map_err(ca_error)?)
            }
            None => None,
        };
        Self::build(roots, request_timeout)
    }

    /// A client that trusts only the PEM certificates in `kube_ca` (the cluster's Kubernetes
    /// CA, e.g. from a Secret); `label` names where they came from in errors. Each probe gives
    /// up after `request_timeout`.
    ///
    /// # Errors
    /// [`ProbeError::CaPem`] when `kube_ca` holds no usable certificate, or
    /// [`ProbeError::Client`].
    pub fn from_pem(kube_ca: &[u8], label: &str, request_timeout: Duration) -> Result<Self, ProbeError> {
        let roots = roots(kube_ca).map_err(|reason| ProbeError::CaPem {
            label: label.to_owned(),
            reason,
        })?;
        Self::build(Some(roots), request_timeout)
    }

    /// The client: verifying against `roots`, or not verifying when `None`.
    fn build(
        roots: Option<Vec<reqwest::Certificate>>,
        request_timeout: Duration,
    ) -> Result<Self, ProbeError> {
        let mut builder = reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(request_timeout)
            .timeout(request_timeout)
            .user_agent(concat!("ichor/", env!("CARGO_PKG_VERSION")));
        match roots {
            Some(certs) => {
                for cert in certs {
                    builder = builder.add_root_certificate(cert);
                }
            }
            None => builder = builder.danger_accept_invalid_certs(true),
        }
        let http = builder.build().map_err(|e| ProbeError::Client(e.to_string()))?;
        Ok(Self { http })
    }

    /// One `GET url`.
    pub async fn check(&self, url: &str) -> Observation {
        match self.http.get(url).send().await {
            Ok(r) if r.status() == reqwest::StatusCode::OK => Observation::Ready,
            Ok(r) => Observation::NotReady(format!("HTTP {}", r.status().as_u16())),
            Err(e) => Observation::NotReady(describe(&e)),
        }
    }
}

/// The certificates of a PEM bundle, at least one.
fn roots(pem: &[u8]) -> Result<Vec<reqwest::Certificate>, String> {
    let certs =
        reqwest::Certificate::from_pem_bundle(pem).map_err(|e| format!("not PEM certificates ({e})"))?;
    if certs.is_empty() {
        return Err("holds no PEM certificate".to_owned());
    }
    Ok(certs)
}

/// A short reason for a failed request (the innermost cause is the telling one).
fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "no connection"
    } else {
        "request failed"
    };
    let mut inner: &dyn std::error::Error = e;
    while let Some(s) = inner.source() {
        inner = s;
    }
    format!("{kind}: {inner}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_secs(60);

    fn down() -> Observation {
        Observation::NotReady("no connection".to_owned())
    }

    #[test]
    fn a_ready_apiserver_right_after_the_apply_is_not_taken_as_restarted() {
        let mut w = ReadyWatch::new(GRACE);
        assert_eq!(
            w.observe(Duration::from_secs(1), &Observation::Ready),
            Verdict::Waiting
        );
        assert_eq!(
            w.observe(Duration::from_secs(59), &Observation::Ready),
            Verdict::Waiting
        );
    }

    #[test]
    fn down_then_ready_ends_the_wait_before_the_grace() {
        let mut w = ReadyWatch::new(GRACE);
        assert_eq!(
            w.observe(Duration::from_secs(1), &Observation::Ready),
            Verdict::Waiting
        );
        assert_eq!(w.observe(Duration::from_secs(2), &down()), Verdict::Waiting);
        assert_eq!(w.observe(Duration::from_secs(20), &down()), Verdict::Waiting);
        assert_eq!(
            w.observe(Duration::from_secs(21), &Observation::Ready),
            Verdict::CameBack
        );
    }

    #[test]
    fn ready_throughout_ends_the_wait_at_the_grace() {
        let mut w = ReadyWatch::new(GRACE);
        assert_eq!(w.observe(GRACE, &Observation::Ready), Verdict::StayedReady);
    }

    #[test]
    fn a_ca_without_certificates_is_refused_naming_where_it_came_from() {
        let err = ReadyzProbe::from_pem(b"not a certificate", "Secret s/t key ca.crt", GRACE)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("Secret s/t key ca.crt: holds no PEM certificate")
        );
        let err = ReadyzProbe::new(Some(Path::new("/nonexistent/ca.pem")), GRACE)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.starts_with("--kube-ca-file /nonexistent/ca.pem: "), "{err}");
    }

    #[test]
    fn down_past_the_grace_keeps_waiting() {
        let mut w = ReadyWatch::new(GRACE);
        assert_eq!(w.observe(GRACE * 2, &down()), Verdict::Waiting);
    }
}
