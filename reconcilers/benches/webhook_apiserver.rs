//! The `IchorUser` admission webhook as the real kube-apiserver calls it, at a paced rate (default
//! 200 requests/s), with 1,000 IchorUsers in the namespace: the test kit's control plane, the
//! chart installed, one `ichor-controller` replica serving the chart's webhook through its Service
//! (as `tests/cluster` does). Every request is a dry-run merge patch (`dryRun=All`: admitted,
//! never stored) sent to the apiserver as an impersonated admin, in three phases of the same
//! length and rate:
//!
//! 1. `no webhook`: an admin renaming a viewer, with the chart's webhook configuration removed
//!    (the apiserver's own cost: the baseline, measured last);
//! 2. `webhook, no list`: the same request, reviewed by the webhook (a rename needs no list);
//! 3. `webhook, last-admin list`: an admin disabling another admin, which the webhook allows
//!    only after finding another enabled admin among every IchorUser of the namespace (its watch
//!    cache) and reading that admin again from the apiserver.
//!
//! Open loop: a request starts every 1/rate s whatever the others do; latency is measured from
//! the scheduled start. Prints one `webhook-apiserver phase=… p50_ms=… p99_ms=…` line per phase.
//!
//! Environment: `WEBHOOK_BENCH_SECONDS` (default 10), `WEBHOOK_BENCH_RPS` (default 200),
//! `WEBHOOK_BENCH_USERS` (default 1000). Run with `hack/bench/webhook-apiserver.sh`.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[allow(dead_code)]
#[path = "../tests/cluster/replicas.rs"]
mod replicas;
#[allow(dead_code)]
#[path = "../tests/cluster/webhooks.rs"]
mod webhooks;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ichor_renderers::contract::{ADMIN_GROUP, WEBHOOK_CONFIGURATION};
use ichor_testkit::control_plane::{ControlPlane, Options};
use ichor_testkit::install::{self, CONTROLLER_SERVICE_ACCOUNT, NAMESPACE, ichor_user};
use ichor_testkit::load::{env_number, ms, open_loop, percentile};
use serde_json::{Value, json};

/// One dry-run merge patch of `name`, as the admin `alice` (impersonated).
#[derive(Clone)]
struct Request {
    name: &'static str,
    body: fn(usize) -> Value,
}

const RENAME: Request = Request {
    name: "user-0000",
    body: |i| json!({"spec": {"displayName": format!("renamed {i}")}}),
};
const DISABLE_ADMIN: Request = Request {
    name: "henry",
    body: |_| json!({"spec": {"disabled": true}}),
};

struct Phase {
    ok: Vec<Duration>,
    errors: usize,
    first_error: Option<String>,
    wall: Duration,
}

async fn drive(client: &reqwest::Client, base: &str, request: &Request, rate: u64, seconds: u64) -> Phase {
    let url = Arc::new(format!(
        "{base}/apis/ichor.maesh.dev/v1alpha1/namespaces/{NAMESPACE}/ichorusers/{}?dryRun=All",
        request.name
    ));
    let total = usize::try_from(seconds * rate).unwrap_or(usize::MAX);
    let run = open_loop(rate, total, |i| {
        let (client, url, body) = (client.clone(), Arc::clone(&url), (request.body)(i));
        async move {
            let answer = client
                .patch(url.as_str())
                .header("content-type", "application/merge-patch+json")
                .header("impersonate-user", "ichor:alice")
                .header("impersonate-group", ADMIN_GROUP)
                .body(body.to_string())
                .send()
                .await;
            match answer {
                Ok(r) if r.status().is_success() => Ok(()),
                Ok(r) => Err(format!(
                    "HTTP {}: {}",
                    r.status(),
                    r.text().await.unwrap_or_default()
                )),
                Err(e) => Err(format!("transport: {e}")),
            }
        }
    })
    .await;
    let mut phase = Phase {
        ok: Vec::with_capacity(total),
        errors: 0,
        first_error: None,
        wall: run.wall,
    };
    for (took, outcome) in run.results {
        match outcome {
            Ok(()) => phase.ok.push(took),
            Err(e) => {
                phase.errors += 1;
                phase.first_error.get_or_insert(e);
            }
        }
    }
    phase.ok.sort();
    phase
}

fn report(name: &str, rate: u64, p: &Phase) {
    println!(
        "webhook-apiserver phase={name} rate={rate} ok={} errors={} achieved_rps={:.1} p50_ms={:.2} p99_ms={:.2} max_ms={:.2}",
        p.ok.len(),
        p.errors,
        p.ok.len() as f64 / p.wall.as_secs_f64(),
        ms(percentile(&p.ok, 50.0)),
        ms(percentile(&p.ok, 99.0)),
        ms(p.ok.last().copied().unwrap_or_default()),
    );
    if let Some(e) = &p.first_error {
        println!(
            "webhook-apiserver phase={name} first error: {}",
            e.chars().take(300).collect::<String>()
        );
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let seconds = env_number("WEBHOOK_BENCH_SECONDS", 10);
    let rate = env_number("WEBHOOK_BENCH_RPS", 200).max(1);
    let users = env_number("WEBHOOK_BENCH_USERS", 1000);

    let options = Options {
        // The webhook Service resolved through its endpoints, as in tests/cluster.
        extra_args: vec!["--enable-aggregator-routing=true".to_owned()],
        ..Options::default()
    };
    let Some(plane) = ControlPlane::start(options)? else {
        anyhow::bail!("kube-apiserver, etcd or kubectl is missing; run hack/kube/build.sh first");
    };
    // The users exist before the chart's webhooks do (creating them is not what is measured).
    install::install_crds(&plane)?;
    let mut docs: Vec<String> = (0..users)
        .map(|i| ichor_user(&format!("user-{i:04}"), &["viewer"]))
        .collect();
    docs.push(ichor_user("alice", &["admin"]));
    docs.push(ichor_user("henry", &["admin"]));
    for chunk in docs.chunks(250) {
        plane.apply(&chunk.join("\n---\n"))?;
    }
    install::install_chart(&plane)?;

    let dir = tempfile::tempdir()?;
    let kubeconfig = install::component_kubeconfig(&plane, 0, CONTROLLER_SERVICE_ACCOUNT)?;
    let replica = replicas::Replica::start(dir.path(), "ichor-controller-bench", &kubeconfig)?;
    let settle = Duration::from_secs(120);
    install::wait_webhook_ca_bundles(&plane, WEBHOOK_CONFIGURATION, settle)
        .map_err(|e| e.context(replica.log_tail()))?;
    webhooks::serve_from(&plane, &replica)?;

    let admin = &plane.pki().admin;
    let client = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(plane.ca_pem().as_bytes())?)
        .identity(reqwest::Identity::from_pem(
            format!("{}\n{}", admin.cert_pem, admin.key_pem).as_bytes(),
        )?)
        .timeout(Duration::from_secs(10))
        .build()?;
    let base = plane.url(0);

    // The webhook answers once the Service reaches the replica (the apiserver's endpoint
    // informer); the warm-up also opens the connection.
    let started = Instant::now();
    loop {
        let warm = drive(&client, &base, &DISABLE_ADMIN, 20, 1).await;
        if warm.errors == 0 {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(60),
            "the webhook was not reached within 60 s: {:?}\n{}",
            warm.first_error,
            replica.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    let no_list = drive(&client, &base, &RENAME, rate, seconds).await;
    report("webhook-no-list", rate, &no_list);
    let list = drive(&client, &base, &DISABLE_ADMIN, rate, seconds).await;
    report("webhook-last-admin-list", rate, &list);
    plane.kubectl_run(
        &["delete", "validatingwebhookconfiguration", WEBHOOK_CONFIGURATION],
        None,
    )?;
    // The apiserver drops the configuration from its informer shortly after the delete.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let bare = drive(&client, &base, &RENAME, rate, seconds).await;
    report("no-webhook", rate, &bare);
    println!("webhook-apiserver users={}", users + 2);
    drop(replica);
    Ok(())
}
