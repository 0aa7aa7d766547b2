//! Latency of the `IchorUser` admission webhook at a paced 200 requests/s over real HTTPS on
//! loopback (issue 6, "Done when"): the grant rule and the last-enabled-admin rule on writes
//! that need no user list (a viewer creating a viewer, an admin renaming a viewer), so the number
//! is the handler, TLS and HTTP, not the kube-apiserver.
//!
//! Open loop: one request is started every 1/rate s whatever the previous ones do, and latency
//! is measured from the scheduled start (no coordinated omission).
//!
//! Environment: `WEBHOOK_BENCH_SECONDS` (default 10), `WEBHOOK_BENCH_RPS` (default 200).
//! Run with `hack/bench/webhook.sh` or `cargo bench -p ichor-reconcilers --bench webhook`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ichor_reconcilers::admission::{
    AccessReviewer, AdmissionError, AdmissionState, ServerOptions, UserLister, controller_identity, serve_on,
};
use ichor_renderers::crd::IchorUser;
use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::api::authorization::v1::ResourceAttributes;
use serde_json::{Value, json};

const HOST: &str = "ichor-controller-webhook.ichor-system.svc";

/// The IchorUser rule never asks RBAC; a call would be a bug in what is measured.
struct NoReviews;

#[async_trait]
impl AccessReviewer for NoReviews {
    async fn allowed(&self, _: &UserInfo, _: &ResourceAttributes) -> Result<bool, AdmissionError> {
        Err(AdmissionError::AccessReview(
            "the benchmark expects no access review".to_owned(),
        ))
    }
}

/// Counts list calls: the measured writes must need none.
#[derive(Default)]
struct CountingLister(AtomicUsize);

#[async_trait]
impl UserLister for CountingLister {
    async fn list_users(&self, _: &str) -> Result<Vec<IchorUser>, AdmissionError> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(Vec::new())
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn user(name: &str, roles: &[&str], display: &str) -> Value {
    json!({
        "apiVersion": "ichor.maesh.dev/v1alpha1",
        "kind": "IchorUser",
        "metadata": {"name": name, "namespace": "ichor-system"},
        "spec": {"displayName": display, "roles": roles}
    })
}

fn review(uid: usize, operation: &str, who: (&str, &[&str]), object: Value, old: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": format!("bench-{uid}"),
            "kind": {"group": "ichor.maesh.dev", "version": "v1alpha1", "kind": "IchorUser"},
            "resource": {"group": "ichor.maesh.dev", "version": "v1alpha1", "resource": "ichorusers"},
            "name": object["metadata"]["name"],
            "namespace": "ichor-system",
            "operation": operation,
            "userInfo": {"username": who.0, "groups": who.1},
            "object": object,
            "oldObject": old,
            "dryRun": false
        }
    })
}

/// The two measured writes, alternating: a viewer creating a viewer; an admin renaming a viewer.
fn document(i: usize) -> Vec<u8> {
    let doc = if i.is_multiple_of(2) {
        review(
            i,
            "CREATE",
            ("ichor:vera", &["ichor:viewer", "system:authenticated"]),
            user(&format!("user-{i}"), &["viewer"], "New"),
            Value::Null,
        )
    } else {
        review(
            i,
            "UPDATE",
            ("ichor:root", &["ichor:admin", "system:authenticated"]),
            user("bo", &["viewer"], &format!("Bo {i}")),
            user("bo", &["viewer"], "Bo"),
        )
    };
    serde_json::to_vec(&doc).unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let seconds = env_number("WEBHOOK_BENCH_SECONDS", 10);
    let rate = env_number("WEBHOOK_BENCH_RPS", 200).max(1);

    let dir = tempfile::tempdir().unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec![HOST.to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(dir.path().join("tls.key"), key.serialize_pem()).unwrap();
    std::fs::write(dir.path().join("tls.crt"), cert.pem()).unwrap();

    let lister = Arc::new(CountingLister::default());
    let state = AdmissionState::new(
        Arc::new(NoReviews),
        lister.clone(),
        controller_identity("ichor-system"),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve_on(
        listener,
        dir.path().to_path_buf(),
        Arc::new(state),
        async move {
            let _ = stop_rx.await;
        },
        ServerOptions::default(),
    ));

    // The kube-apiserver keeps connections to a webhook alive; so does this client.
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert.pem().as_bytes()).unwrap())
        .resolve(HOST, addr)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let url = Arc::new(format!("https://{HOST}:{}/validate/ichorusers", addr.port()));

    // Warm-up: the connection pool and the TLS sessions.
    for i in 0..50 {
        let response = client.post(url.as_str()).body(document(i)).send().await.unwrap();
        assert!(
            response.status().is_success(),
            "warm-up failed: {}",
            response.status()
        );
    }

    let total = usize::try_from(seconds * rate).unwrap_or(usize::MAX);
    let period = Duration::from_nanos(1_000_000_000 / rate);
    let errors = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    let begin = Instant::now();
    for i in 0..total {
        let scheduled = begin + period * u32::try_from(i).unwrap_or(u32::MAX);
        tokio::time::sleep_until(scheduled.into()).await;
        let client = client.clone();
        let url = Arc::clone(&url);
        let errors = Arc::clone(&errors);
        tasks.spawn(async move {
            let ok = match client.post(url.as_str()).body(document(i)).send().await {
                Ok(response) if response.status().is_success() => response
                    .json::<Value>()
                    .await
                    .is_ok_and(|v| v["response"]["allowed"] == json!(true)),
                _ => false,
            };
            if !ok {
                errors.fetch_add(1, Ordering::Relaxed);
            }
            scheduled.elapsed()
        });
    }
    let mut latencies = Vec::with_capacity(total);
    while let Some(done) = tasks.join_next().await {
        latencies.push(done.unwrap());
    }
    let wall = begin.elapsed();
    latencies.sort();
    stop_tx.send(()).ok();
    let _ = server.await;

    println!(
        "webhook /validate/ichorusers over HTTPS, paced {rate} req/s for {seconds} s: {} requests in {:.2} s \
         ({:.1} req/s achieved)",
        latencies.len(),
        wall.as_secs_f64(),
        latencies.len() as f64 / wall.as_secs_f64()
    );
    println!(
        "latency p50 {:.3} ms  p99 {:.3} ms  max {:.3} ms  errors {}  user-list calls {}",
        ms(percentile(&latencies, 50.0)),
        ms(percentile(&latencies, 99.0)),
        ms(latencies.last().copied().unwrap_or_default()),
        errors.load(Ordering::Relaxed),
        lister.0.load(Ordering::Relaxed)
    );
}
