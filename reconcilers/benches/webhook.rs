//! Latency of the `IchorUser` admission webhook at a paced 200 requests/s over real HTTPS on
//! loopback: the grant rule and the last-enabled-admin rule on writes that need no user list (a
//! viewer creating a viewer, an admin renaming a viewer), so the number is the handler, TLS and
//! HTTP, not the kube-apiserver. Documents, fakes and server are `admission::fixtures`', as the
//! tests use them.
//!
//! Open loop: one request is started every 1/rate s whatever the previous ones do, and latency
//! is measured from the scheduled start (no coordinated omission).
//!
//! Environment: `WEBHOOK_BENCH_SECONDS` (default 10), `WEBHOOK_BENCH_RPS` (default 200).
//! Run with `hack/bench/webhook.sh` or `cargo bench -p ichor-controller --bench webhook`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::sync::Arc;
use std::time::Duration;

use ichor_controller::admission::fixtures::{
    FakeLister, FakeReviewer, LoopbackServer, ROOT, ServingPair, VIEWER, WEBHOOK_HOST, review, user,
};
use ichor_controller::admission::{AdmissionState, ICHORUSERS_PATH, ServerOptions, controller_identity};
use ichor_testkit::load::{env_number, ms, open_loop, percentile};
use serde_json::{Value, json};

/// The two measured writes, alternating: a viewer creating a viewer; an admin renaming a viewer.
fn document(i: usize) -> Vec<u8> {
    let mut doc = if i.is_multiple_of(2) {
        let name = format!("user-{i}");
        review(
            "IchorUser",
            "CREATE",
            &VIEWER,
            user(&name, &["viewer"], false),
            Value::Null,
        )
    } else {
        let mut renamed = user("bo", &["viewer"], false);
        renamed["spec"]["displayName"] = json!(format!("Bo {i}"));
        review(
            "IchorUser",
            "UPDATE",
            &ROOT,
            renamed,
            user("bo", &["viewer"], false),
        )
    };
    doc["request"]["uid"] = json!(format!("bench-{i}"));
    serde_json::to_vec(&doc).unwrap()
}

#[tokio::main]
async fn main() {
    let seconds = env_number("WEBHOOK_BENCH_SECONDS", 10);
    let rate = env_number("WEBHOOK_BENCH_RPS", 200).max(1);

    let dir = tempfile::tempdir().unwrap();
    let pair = ServingPair::self_signed(WEBHOOK_HOST).unwrap();
    pair.write_to(dir.path()).unwrap();

    // The IchorUser rule never asks RBAC: a review fails (a call would be a bug in what is
    // measured), and the measured writes need no user list (counted).
    let lister = Arc::new(FakeLister::default());
    let state = AdmissionState::new(
        Arc::new(FakeReviewer::failing()),
        lister.clone(),
        controller_identity(ichor_renderers::contract::NAMESPACE),
    );
    let server = LoopbackServer::start(
        dir.path().to_path_buf(),
        Arc::new(state),
        ServerOptions::default(),
    )
    .await
    .unwrap();

    // The kube-apiserver keeps connections to a webhook alive; so does this client.
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(pair.cert_pem.as_bytes()).unwrap())
        .resolve(WEBHOOK_HOST, server.addr())
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let url = Arc::new(server.url(WEBHOOK_HOST, ICHORUSERS_PATH));

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
    let run = open_loop(rate, total, |i| {
        let (client, url) = (client.clone(), Arc::clone(&url));
        async move {
            match client.post(url.as_str()).body(document(i)).send().await {
                Ok(response) if response.status().is_success() => response
                    .json::<Value>()
                    .await
                    .is_ok_and(|v| v["response"]["allowed"] == json!(true)),
                _ => false,
            }
        }
    })
    .await;
    let wall = run.wall;
    let errors = run.results.iter().filter(|(_, ok)| !ok).count();
    let mut latencies: Vec<Duration> = run.results.into_iter().map(|(took, _)| took).collect();
    latencies.sort();
    let _ = server.stop().await;

    println!(
        "webhook /validate/ichorusers over HTTPS, paced {rate} req/s for {seconds} s: {} requests in {:.2} s \
         ({:.1} req/s achieved)",
        latencies.len(),
        wall.as_secs_f64(),
        latencies.len() as f64 / wall.as_secs_f64()
    );
    println!(
        "latency p50 {:.3} ms  p99 {:.3} ms  max {:.3} ms  errors {}  user-cache reads {}",
        ms(percentile(&latencies, 50.0)),
        ms(percentile(&latencies, 99.0)),
        ms(latencies.last().copied().unwrap_or_default()),
        errors,
        lister.calls()
    );
}
