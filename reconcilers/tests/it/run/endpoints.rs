//! The journal, the metrics and health endpoints, and the flags the chart passes.

use super::*;

// ─── the journal ─────────────────────────────────────────────────────────────────────────────

#[tokio::test]
async fn the_journal_holds_no_secret_data_and_continues_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let (mut lp, _) = identity_loop(Some(&path));
    lp.ingest([
        Event::Applied(issuer_service("10.96.0.10")),
        Event::Applied(user("admin", &["admin"], false, 1)),
    ]);
    lp.set_synced();
    lp.set_leader(true);
    let mut applier = FakeApplier::default();
    {
        lp.tick(now());
        lp.settle(&mut applier, &always)
    }
    .await;
    drop(lp.take_journal());

    let text = std::fs::read_to_string(&path).unwrap();
    let tls = lp.world().get(&secret_key(TLS_SECRET)).unwrap();
    let key_b64 = tls.value["data"]["tls.key"].as_str().unwrap();
    assert!(key_b64.len() > 100);
    assert!(
        !text.contains(key_b64),
        "the private key's base64 is in the journal"
    );
    assert!(!text.contains("PRIVATE KEY"));
    let signing = lp.world().get(&secret_key(SIGNING_SECRET)).unwrap();
    let keys_b64 = signing.value["data"]["keys.json"].as_str().unwrap();
    assert!(!text.contains(keys_b64));
    let secret_lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["object"]["kind"] == json!("Secret"))
        .collect();
    assert!(!secret_lines.is_empty());
    for line in &secret_lines {
        for (_, v) in line["object"]["value"]["data"].as_object().unwrap() {
            assert!(v["sha256"].is_string(), "{v}");
        }
    }
    assert!(text.lines().any(|l| l.contains(r#""type":"tick""#)));
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let last = journal::last_seq(&path).unwrap().unwrap();
    let mut reopened = journal::open(&path).unwrap();
    assert_eq!(reopened.append(&Event::Tick(now())).unwrap(), last + 1);
}

#[test]
fn a_journal_with_a_cut_line_is_kept_aside_and_a_new_one_started() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    std::fs::write(
        &path,
        "{\"type\":\"tick\",\"seq\":1,\"now\":\"2027-01-01T00:00:00Z\"}\n{\"type\":\"ti",
    )
    .unwrap();
    let mut writer = journal::open(&path).unwrap();
    assert_eq!(writer.append(&Event::Tick(now())).unwrap(), 1);
    let aside: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("journal.jsonl.bad-"))
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
}

// ─── metrics and endpoints ───────────────────────────────────────────────────────────────────

#[tokio::test]
async fn the_metrics_text_has_every_family_and_the_issuer_certificate_expiry() {
    let (mut lp, registry) = leader_loop();
    let mut applier = FakeApplier::default();
    {
        lp.tick(now());
        lp.settle(&mut applier, &always)
    }
    .await;
    lp.absorb(ApplyReport {
        problems: vec![Problem::new(
            ProblemKind::Conflict,
            "Secret ichor-oidc-signing: a 409",
        )],
        ..ApplyReport::default()
    });
    let text = metrics::encode(&registry).unwrap();
    for family in [
        "ichor_controller_reconciles_total",
        "ichor_controller_actions_total{action=\"effect\",kind=\"generate-rsa-key\"",
        "ichor_controller_events_total{type=\"applied\"}",
        "ichor_controller_graph_evaluation_seconds_bucket",
        "ichor_controller_apply_problems_total{kind=\"conflict\"} 1",
        "ichor_controller_leader 1",
        "ichor_controller_watchers_synced 1",
        "ichor_controller_world_objects",
    ] {
        assert!(text.contains(family), "{family} missing from:\n{text}");
    }
    let expiry: i64 = text
        .lines()
        .find_map(|l| l.strip_prefix("ichor_controller_issuer_certificate_expiry_timestamp_seconds "))
        .expect("the expiry gauge")
        .parse()
        .unwrap();
    let tls = lp.world().get(&secret_key(TLS_SECRET)).unwrap();
    assert_eq!(Some(expiry), metrics::certificate_expiry(&tls.value));
    assert!(expiry > now().as_second(), "{expiry}");
}

#[test]
fn admission_decisions_are_counted_by_webhook_and_answer_with_their_latency() {
    use ichor_controller::admission::AdmissionObserver as _;
    let (metrics, registry) = metrics::Metrics::new();
    metrics.decided("ichorusers", false, std::time::Duration::from_millis(2));
    metrics.decided("ichorusers", true, std::time::Duration::from_micros(300));
    let text = metrics::encode(&registry).unwrap();
    for line in [
        "ichor_controller_admission_seconds_count{webhook=\"ichorusers\",allowed=\"false\"} 1",
        "ichor_controller_admission_seconds_count{webhook=\"ichorusers\",allowed=\"true\"} 1",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
}

#[tokio::test]
async fn readyz_waits_for_the_watchers_while_healthz_and_metrics_answer() {
    use tower::ServiceExt as _;
    let (_, registry) = Metrics::new();
    let health = Arc::new(Health::default());
    let app = metrics::router(Arc::new(registry), health.clone(), None);
    let get = |path: &str| http::Request::get(path).body(axum::body::Body::empty()).unwrap();
    let status = |app: axum::Router, path: &'static str| async move {
        app.oneshot(get(path)).await.unwrap().status().as_u16()
    };
    assert_eq!(status(app.clone(), "/healthz").await, 200);
    assert_eq!(status(app.clone(), "/readyz").await, 503);
    assert_eq!(status(app.clone(), "/metrics").await, 200);
    health.set_ready();
    assert_eq!(status(app.clone(), "/readyz").await, 200);
}

// ─── flags ───────────────────────────────────────────────────────────────────────────────────

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

#[test]
fn the_chart_arguments_parse_and_leader_election_can_be_turned_off() {
    let cli = Cli::try_parse_from(["run", "--leader-elect", "--webhook-port", "9443"]).unwrap();
    assert!(cli.run.leader_elect);
    assert_eq!(cli.run.webhook_port, 9443);
    assert_eq!(cli.run.lease_name, "ichor-controller");
    assert_eq!(cli.run.namespace, NAMESPACE);
    assert_eq!(cli.run.metrics_listen.to_string(), "0.0.0.0:8080");
    assert_eq!(cli.run.issuer_service_selector, "app.kubernetes.io/component=ui");
    assert_eq!(cli.run.issuer_service_name, "ichor-issuer");
    assert_eq!(cli.run.log_format, LogFormat::Json);
    let cli = Cli::try_parse_from(["run", "--leader-elect=false", "--log-format", "text"]).unwrap();
    assert!(!cli.run.leader_elect);
    assert_eq!(cli.run.log_format, LogFormat::Text);
    assert!(Cli::try_parse_from(["run", "--log-format", "yaml"]).is_err());
}

#[test]
fn a_listener_that_cannot_bind_is_named_by_the_flag_that_sets_it() {
    let refused = |flag, addr: &str| {
        ichor_controller::run::RunError::Listen {
            flag,
            addr: addr.parse().unwrap(),
            error: std::io::ErrorKind::AddrInUse.into(),
        }
        .to_string()
    };
    let webhook = refused("--webhook-port", "0.0.0.0:9443");
    assert!(
        webhook.starts_with("--webhook-port 0.0.0.0:9443: cannot listen"),
        "{webhook}"
    );
    assert!(!webhook.contains("--metrics-listen"), "{webhook}");
    let metrics = refused("--metrics-listen", "0.0.0.0:8080");
    assert!(
        metrics.starts_with("--metrics-listen 0.0.0.0:8080: cannot listen"),
        "{metrics}"
    );
}
