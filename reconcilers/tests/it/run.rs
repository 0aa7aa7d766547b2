//! `ichor-controller run` without a cluster: the loop core with a fake applier, the watch event
//! conversion, the journal's redaction, the metrics and endpoints, the flags, and the Lease
//! election's faults against a scripted API server (a lost race, an unreachable server). The
//! election itself (a missing Lease created, a held one taken only once its record stood still)
//! runs against a real apiserver in `tests/cluster`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use clap::Parser;
use ichor_graph::{Action, Event, Object, ObjectKey, World};
use ichor_reconcile::memory::merge_into;
use ichor_reconcile::perform::{self, KeyMaterial, Outcome};
use ichor_reconcile::problem::{Problem, ProblemKind};
use ichor_reconcile::sim::TEST_RSA_PEM;
use ichor_reconcile::sim::fixtures::{issuer_service, user};
use ichor_reconcilers::run::convert::WatchState;
use ichor_reconcilers::run::leader::{Elector, LeaderFlag, LeaseConfig, may_take};
use ichor_reconcilers::run::metrics::{self, Health, Metrics};
use ichor_reconcilers::run::observe::ClusterObserver;
use ichor_reconcilers::run::watch::{Batch, SyncState, sources};
use ichor_reconcilers::run::{Apply, Driver, Loop, Report as ApplyReport, RunArgs, drive, journal};
use ichor_renderers::trust::{NAMESPACE, SIGNING_SECRET, TLS_SECRET};
use ichor_server::logging::LogFormat;
use jiff::Timestamp;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher;
use serde_json::{Value, json};

// ─── a fake applier ──────────────────────────────────────────────────────────────────────────

struct FixedMaterial;

impl KeyMaterial for FixedMaterial {
    fn rsa_pkcs8_pem(&mut self) -> Result<String, String> {
        Ok(TEST_RSA_PEM.to_owned())
    }
    fn hmac_secret(&mut self, _kid: &str) -> Result<[u8; 32], String> {
        Ok([7; 32])
    }
}

/// Applies like the API server would: merges owned fields, performs effects, stamps a
/// resourceVersion, and hands the written objects back.
#[derive(Default)]
struct FakeApplier {
    calls: usize,
    rv: u64,
    /// Problems to report on the next calls (and apply nothing then).
    fail_next: VecDeque<String>,
    seen: Vec<String>,
}

impl FakeApplier {
    fn stamp(&mut self, mut object: Object) -> Event {
        self.rv += 1;
        object.resource_version = Some(self.rv.to_string());
        Event::Applied(object)
    }
}

#[async_trait]
impl Apply for FakeApplier {
    async fn apply(&mut self, world: &World, actions: &[Action]) -> ApplyReport {
        self.calls += 1;
        self.seen.extend(actions.iter().map(ToString::to_string));
        if let Some(problem) = self.fail_next.pop_front() {
            return ApplyReport {
                problems: vec![Problem::new(ProblemKind::Unavailable, problem)],
                ..ApplyReport::default()
            };
        }
        let mut report = ApplyReport::default();
        let mut effects = Vec::new();
        for action in actions {
            match action {
                Action::Apply { object, .. } => {
                    let mut value = world
                        .get(&object.key())
                        .map(|o| o.value.clone())
                        .unwrap_or_else(|| json!({}));
                    merge_into(&mut value, &object.value);
                    let written = Object::new(
                        object.kind.clone(),
                        object.namespace.clone(),
                        object.name.clone(),
                        value,
                    );
                    report.applied.push(format!("{}", object.key()));
                    let event = self.stamp(written);
                    report.events.push(event);
                }
                Action::Delete { key, .. } => report.events.push(Event::Deleted(key.clone())),
                Action::Effect { request, .. } => effects.push(request),
            }
        }
        if !effects.is_empty() {
            match perform::perform(world, &effects, &mut FixedMaterial) {
                Ok(outcomes) => {
                    for outcome in outcomes {
                        if let Outcome::Secret(secret) = outcome {
                            report.applied.push(format!("Secret {}", secret.name));
                            let event = self.stamp(secret.to_object());
                            report.events.push(event);
                        }
                    }
                }
                Err(e) => report
                    .problems
                    .push(Problem::new(ProblemKind::Effect, e.to_string())),
            }
        }
        report
    }
}

fn now() -> Timestamp {
    "2027-03-01T12:00:00Z".parse().unwrap()
}

fn leader_loop() -> (Loop, prometheus_client::registry::Registry) {
    let (metrics, registry) = Metrics::new();
    let mut lp = Loop::new(
        ichor_reconcile::identity::Controller::new().unwrap(),
        None,
        ClusterObserver::new(metrics),
    );
    lp.ingest([
        Event::Applied(issuer_service("10.96.0.10")),
        Event::Applied(user("admin", &["admin"], false, 1)),
    ]);
    lp.set_synced();
    lp.set_leader(true);
    (lp, registry)
}

fn always() -> bool {
    true
}

fn secret_key(name: &str) -> ObjectKey {
    ObjectKey::new("Secret", NAMESPACE, name)
}

// ─── the loop core ───────────────────────────────────────────────────────────────────────────

#[tokio::test]
async fn a_leader_settles_a_fresh_install_and_then_decides_nothing() {
    let (mut lp, _) = leader_loop();
    let mut applier = FakeApplier::default();
    let report = {
        lp.tick(now());
        lp.settle(&mut applier, &always)
    }
    .await;
    assert!(report.settled, "{report:?}");
    assert!(report.problems.is_empty(), "{report:?}");
    assert!(report.rounds >= 2, "results were fed back: {report:?}");
    assert!(
        report
            .actions
            .iter()
            .any(|a| a.starts_with("effect generate-rsa-key")),
        "{report:?}"
    );
    assert!(lp.world().get(&secret_key(SIGNING_SECRET)).is_some());
    assert!(lp.world().get(&secret_key(TLS_SECRET)).is_some());

    let calls = applier.calls;
    let again = {
        lp.tick(now());
        lp.settle(&mut applier, &always)
    }
    .await;
    assert!(again.actions.is_empty() && again.settled, "{again:?}");
    assert_eq!(applier.calls, calls);
}

#[tokio::test]
async fn a_standby_applies_nothing_and_decides_everything_once_it_leads() {
    let (mut lp, _) = leader_loop();
    lp.set_leader(false);
    let mut applier = FakeApplier::default();
    let report = {
        lp.tick(now());
        lp.settle(&mut applier, &always)
    }
    .await;
    assert!(report.actions.is_empty() && report.settled, "{report:?}");
    assert_eq!(applier.calls, 0);

    // The standby's evaluation discarded its actions; taking the lease diffs everything again.
    // Taking the lease diffs everything again and hands over the effects the standby's
    // evaluation requested (the graph announces an effect only once).
    lp.set_leader(true);
    let report = {
        lp.tick(now());
        lp.settle(&mut applier, &always)
    }
    .await;
    assert!(report.settled, "{report:?}");
    assert!(
        report
            .actions
            .iter()
            .any(|a| a.starts_with("effect generate-rsa-key") && a.contains("requested-effects")),
        "{report:?}"
    );
    assert!(applier.calls > 0);
    assert!(lp.world().get(&secret_key(TLS_SECRET)).is_some());
}

#[tokio::test]
async fn nothing_is_decided_before_every_watcher_listed() {
    let (metrics, _) = Metrics::new();
    let mut lp = Loop::new(
        ichor_reconcile::identity::Controller::new().unwrap(),
        None,
        ClusterObserver::new(metrics),
    );
    lp.set_leader(true);
    lp.ingest([Event::Applied(issuer_service("10.96.0.10"))]);
    assert!(
        {
            lp.tick(now());
            lp.decide()
        }
        .is_empty()
    );
    lp.set_synced();
    assert!(
        !{
            lp.tick(now());
            lp.decide()
        }
        .is_empty()
    );
}

#[tokio::test]
async fn a_lease_lost_before_a_round_stops_the_applying() {
    let (mut lp, _) = leader_loop();
    let mut applier = FakeApplier::default();
    let report = {
        lp.tick(now());
        lp.settle(&mut applier, &|| false)
    }
    .await;
    assert!(report.actions.is_empty(), "{report:?}");
    assert_eq!(applier.calls, 0);
    assert!(!lp.is_leader());
}

#[tokio::test]
async fn the_next_deadline_is_after_now_and_a_tick_there_moves_it_on() {
    let (mut lp, _) = leader_loop();
    let mut applier = FakeApplier::default();
    {
        lp.tick(now());
        lp.settle(&mut applier, &always)
    }
    .await;
    let deadline = lp.next_deadline().expect("a settled install has a next deadline");
    assert!(deadline > now(), "{deadline} after {}", now());
    let report = {
        lp.tick(deadline);
        lp.settle(&mut applier, &always)
    }
    .await;
    assert!(report.settled, "{report:?}");
    let next = lp.next_deadline().expect("another deadline");
    assert!(next > deadline, "{next} after {deadline}");
}

#[tokio::test]
async fn an_applier_problem_backs_off_and_the_next_cycle_asks_again() {
    let (mut lp, _) = leader_loop();
    let mut applier = FakeApplier::default();
    applier
        .fail_next
        .push_back("Secret ichor-oidc-signing: 500 Internal Server Error".into());
    let report = {
        lp.tick(now());
        lp.settle(&mut applier, &always)
    }
    .await;
    assert_eq!(report.problems.len(), 1, "{report:?}");
    assert!(!report.settled);
    assert_eq!(lp.retry_delay(), Some(Duration::from_secs(2)));
    let first = applier.seen.clone();

    let report = {
        lp.tick(now());
        lp.settle(&mut applier, &always)
    }
    .await;
    assert!(report.settled && report.problems.is_empty(), "{report:?}");
    // The same actions (by what they act on; the reason may now be drift) come again.
    let target = |a: &String| a.split(" (").next().unwrap_or_default().to_owned();
    let again: Vec<String> = applier.seen[first.len()..].iter().map(target).collect();
    assert!(
        first.iter().map(target).all(|a| again.contains(&a)),
        "the failed actions are decided again: {first:#?} then {again:#?}"
    );
    assert_eq!(lp.retry_delay(), None);
}

#[test]
fn retry_delays_double_up_to_five_minutes() {
    let (metrics, _) = Metrics::new();
    let mut lp = Loop::new(
        ichor_reconcile::identity::Controller::new().unwrap(),
        None,
        ClusterObserver::new(metrics),
    );
    let failed = || ApplyReport {
        problems: vec![Problem::new(ProblemKind::Conflict, "x")],
        ..ApplyReport::default()
    };
    let mut delays = Vec::new();
    for _ in 0..10 {
        lp.absorb(failed());
        delays.push(lp.retry_delay().unwrap().as_secs());
    }
    assert_eq!(delays, [2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
    lp.absorb(ApplyReport::default());
    assert_eq!(lp.retry_delay(), None);
}

#[tokio::test]
async fn the_driver_folds_a_batch_applies_as_leader_and_stops_on_shutdown() {
    let (metrics, _) = Metrics::new();
    let mut lp = Loop::new(
        ichor_reconcile::identity::Controller::new().unwrap(),
        None,
        ClusterObserver::new(metrics),
    );
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    let sync = Arc::new(SyncState::new(1));
    let health = Arc::new(Health::default());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let driver = Driver {
        rx,
        sync: sync.clone(),
        leader: LeaderFlag::always(),
        health: health.clone(),
        shutdown: stop_rx,
        resync_every: Duration::from_secs(600),
    };
    tx.send(Batch {
        source: "Service".into(),
        events: vec![Event::Applied(issuer_service("10.96.0.10"))],
    })
    .await
    .unwrap();
    sync.mark(0);
    let mut applier = FakeApplier::default();
    let stopper = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        stop_tx.send(true).unwrap();
        tx
    });
    tokio::time::timeout(Duration::from_secs(20), drive(&mut lp, &mut applier, driver))
        .await
        .expect("the driver stops on shutdown");
    stopper.await.unwrap();
    assert!(health.is_ready());
    assert!(applier.calls > 0);
    assert!(lp.world().get(&secret_key(TLS_SECRET)).is_some());
}

// ─── watch events → graph events ─────────────────────────────────────────────────────────────

fn dynamic(name: &str, rv: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NAMESPACE, "resourceVersion": rv,
            "managedFields": [{"manager": "kubectl"}]},
        "spec": {"roles": ["admin"]}
    }))
    .unwrap()
}

fn users_resource() -> ApiResource {
    sources("app.kubernetes.io/component=issuer", "ichor-identity")
        .into_iter()
        .find(|s| s.label == "IchorUser")
        .unwrap()
        .resource
}

#[test]
fn an_applied_object_carries_kind_api_version_and_resource_version_without_managed_fields() {
    let mut state = WatchState::new(users_resource());
    let events = state.on_event(watcher::Event::Apply(dynamic("alice", "7")));
    let [Event::Applied(o)] = events.as_slice() else {
        panic!("{events:?}")
    };
    assert_eq!(o.key(), ObjectKey::new("IchorUser", NAMESPACE, "alice"));
    assert_eq!(o.resource_version.as_deref(), Some("7"));
    assert_eq!(o.value["apiVersion"], json!("ichor.maesh.dev/v1alpha1"));
    assert_eq!(o.value["kind"], json!("IchorUser"));
    assert_eq!(o.value["spec"]["roles"], json!(["admin"]));
    assert!(o.value["metadata"].get("managedFields").is_none());
}

#[test]
fn a_relist_deletes_what_vanished_and_skips_what_is_unchanged() {
    let mut state = WatchState::new(users_resource());
    state.on_event(watcher::Event::Init);
    state.on_event(watcher::Event::InitApply(dynamic("alice", "1")));
    state.on_event(watcher::Event::InitApply(dynamic("bob", "2")));
    assert!(!state.is_synced());
    assert!(state.on_event(watcher::Event::InitDone).is_empty());
    assert!(state.is_synced());

    // Disconnected; bob was deleted meanwhile, alice is unchanged, carol is new.
    let mut events = state.on_event(watcher::Event::Init);
    events.extend(state.on_event(watcher::Event::InitApply(dynamic("alice", "1"))));
    events.extend(state.on_event(watcher::Event::InitApply(dynamic("carol", "9"))));
    events.extend(state.on_event(watcher::Event::InitDone));
    let summary: Vec<String> = events
        .iter()
        .map(|e| match e {
            Event::Applied(o) => format!("applied {}", o.name),
            Event::Deleted(k) => format!("deleted {}", k.name),
            Event::Tick(_) => "tick".into(),
        })
        .collect();
    assert_eq!(summary, ["applied carol", "deleted bob"]);

    let events = state.on_event(watcher::Event::Delete(dynamic("alice", "3")));
    assert_eq!(
        events,
        [Event::Deleted(ObjectKey::new("IchorUser", NAMESPACE, "alice"))]
    );
    assert_eq!(
        state
            .on_event(watcher::Event::Apply(dynamic("carol", "10")))
            .len(),
        1,
        "a new resourceVersion is folded"
    );
}

#[test]
fn owned_secrets_and_the_trust_configmap_are_watched_by_name() {
    let all = sources("app.kubernetes.io/component=issuer", "ichor-identity");
    let labels: Vec<&str> = all.iter().map(|s| s.label.as_str()).collect();
    for name in [
        "Secret ichor-oidc-signing",
        "Secret ichor-oidc-ca",
        "Secret ichor-oidc-tls",
        "Secret ichor-webhook-tls",
        "Secret ichor-user-credentials",
        "ConfigMap ichor-oidc-trust",
        "ValidatingWebhookConfiguration ichor-identity",
    ] {
        let source = all
            .iter()
            .find(|s| s.label == name)
            .unwrap_or_else(|| panic!("{name} in {labels:?}"));
        let wanted = format!("metadata.name={}", name.split_once(' ').unwrap().1);
        assert_eq!(source.config.field_selector.as_deref(), Some(wanted.as_str()));
    }
    let service = all.iter().find(|s| s.resource.kind == "Service").unwrap();
    assert_eq!(
        service.config.label_selector.as_deref(),
        Some("app.kubernetes.io/component=issuer")
    );
    let cluster_scoped: Vec<&str> = all
        .iter()
        .filter(|s| !s.namespaced)
        .map(|s| s.resource.kind.as_str())
        .collect();
    assert_eq!(
        cluster_scoped,
        ["IchorInstallation", "ValidatingWebhookConfiguration"]
    );
    assert!(
        all.iter().filter(|s| !s.namespaced).all(|s| s.optional),
        "a cluster whose RBAC grants neither still runs"
    );
}

// ─── the journal ─────────────────────────────────────────────────────────────────────────────

#[tokio::test]
async fn the_journal_holds_no_secret_data_and_continues_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let (metrics, _) = Metrics::new();
    let mut lp = Loop::new(
        ichor_reconcile::identity::Controller::new().unwrap(),
        Some(journal::open(&path).unwrap()),
        ClusterObserver::new(metrics),
    );
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
    use ichor_reconcilers::admission::AdmissionObserver as _;
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
    let app = metrics::router(Arc::new(registry), health.clone());
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
    assert_eq!(
        cli.run.issuer_service_selector,
        "app.kubernetes.io/component=issuer"
    );
    assert_eq!(cli.run.log_format, LogFormat::Json);
    let cli = Cli::try_parse_from(["run", "--leader-elect=false", "--log-format", "text"]).unwrap();
    assert!(!cli.run.leader_elect);
    assert_eq!(cli.run.log_format, LogFormat::Text);
    assert!(Cli::try_parse_from(["run", "--log-format", "yaml"]).is_err());
}

// ─── leader election against a scripted API server ───────────────────────────────────────────

type Script = Arc<Mutex<VecDeque<(String, u16, Value)>>>;

/// A kube client whose requests are answered in order from `script`: each entry names the
/// expected `METHOD path` and the answer. The requests are recorded with their bodies.
fn scripted(script: Script, seen: Arc<Mutex<Vec<(String, Value)>>>) -> kube::Client {
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let script = script.clone();
        let seen = seen.clone();
        async move {
            let line = format!("{} {}", req.method(), req.uri().path());
            let body = req.into_body().collect_bytes().await.unwrap();
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            seen.lock().unwrap().push((line.clone(), body));
            let (expected, status, answer) = script.lock().unwrap().pop_front().expect("a scripted answer");
            assert_eq!(line, expected);
            let response = http::Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(serde_json::to_vec(&answer).unwrap()))
                .unwrap();
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    kube::Client::new(service, NAMESPACE)
}

const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/ichor-system/leases/ichor-controller";

fn lease(holder: &str, rv: &str, transitions: i32) -> Value {
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "ichor-controller", "namespace": "ichor-system", "resourceVersion": rv},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
            "renewTime": "2027-03-01T12:00:00.000000Z", "leaseTransitions": transitions}})
}

fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": reason,
        "reason": reason, "code": code})
}

fn elector(script: Script, seen: Arc<Mutex<Vec<(String, Value)>>>) -> Elector {
    Elector::new(
        scripted(script, seen),
        LeaseConfig::new(NAMESPACE, "ichor-controller", "pod-a"),
    )
}

#[tokio::test]
async fn a_lost_race_for_the_lease_is_a_standby_not_an_error() {
    let script: Script = Arc::new(Mutex::new(VecDeque::from([
        (format!("GET {LEASE}"), 200, lease("", "5", 0)),
        (format!("PUT {LEASE}"), 409, status(409, "Conflict")),
        (format!("GET {LEASE}"), 200, lease("pod-a", "7", 1)),
        (format!("PUT {LEASE}"), 200, lease("pod-a", "8", 1)),
    ])));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut e = elector(script.clone(), seen.clone());
    assert!(!e.step(Instant::now(), now()).await.unwrap());
    assert!(e.step(Instant::now(), now()).await.unwrap(), "own lease renewed");
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen[3].1["spec"]["leaseTransitions"],
        json!(1),
        "a renewal is no transition"
    );
}

#[tokio::test]
async fn an_unreachable_api_server_is_an_error_and_leadership_lapses_at_its_deadline() {
    let script: Script = Arc::new(Mutex::new(VecDeque::from([(
        format!("GET {LEASE}"),
        500,
        status(500, "InternalError"),
    )])));
    let mut e = elector(script, Arc::new(Mutex::new(Vec::new())));
    assert!(e.step(Instant::now(), now()).await.is_err());

    let flag = LeaderFlag::elected();
    let t0 = Instant::now();
    flag.lead_until(t0 + Duration::from_secs(10));
    assert!(flag.is_leader_at(t0 + Duration::from_secs(9)));
    assert!(!flag.is_leader_at(t0 + Duration::from_secs(10)));
    flag.stop();
    assert!(!flag.is_leader_at(t0));
    assert!(LeaderFlag::always().is_leader());
}

#[test]
fn the_lease_may_be_taken_when_free_own_or_stale() {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    let held = LeaseSpec {
        holder_identity: Some("pod-b".into()),
        lease_duration_seconds: Some(15),
        ..LeaseSpec::default()
    };
    let d = Duration::from_secs(30);
    assert!(may_take(None, "pod-a", Duration::ZERO, d));
    assert!(!may_take(Some(&held), "pod-a", Duration::from_secs(14), d));
    assert!(may_take(Some(&held), "pod-a", Duration::from_secs(15), d));
    assert!(may_take(Some(&held), "pod-b", Duration::ZERO, d));
    let free = LeaseSpec {
        holder_identity: Some(String::new()),
        ..held
    };
    assert!(may_take(Some(&free), "pod-a", Duration::ZERO, d));
}

// ─── the watchers against a scripted API server ──────────────────────────────────────────────

#[tokio::test]
async fn the_watchers_list_by_name_and_selector_and_sync_with_an_optional_input_refused() {
    let requests: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let seen = seen.clone();
        async move {
            let path = req.uri().path().to_owned();
            let query = req.uri().query().unwrap_or_default().to_owned();
            seen.lock().unwrap().push(format!("{path}?{query}"));
            if query.contains("watch=true") {
                // A watch that never delivers anything: the lists are what is tested.
                futures::future::pending::<()>().await;
            }
            let (code, body) = if path.ends_with("/ichorinstallations") {
                (403, status(403, "Forbidden"))
            } else if path.ends_with("/services") {
                (
                    200,
                    json!({"apiVersion": "v1", "kind": "ServiceList", "metadata": {"resourceVersion": "10"},
                        "items": [{"metadata": {"name": "ichor-issuer", "namespace": NAMESPACE,
                            "resourceVersion": "9", "labels": {"app.kubernetes.io/component": "issuer"}},
                            "spec": {"clusterIP": "10.96.0.10"}}]}),
                )
            } else {
                (
                    200,
                    json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "10"}, "items": []}),
                )
            };
            let response = http::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(serde_json::to_vec(&body).unwrap()))
                .unwrap();
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    let client = kube::Client::new(service, NAMESPACE);
    let all = sources("app.kubernetes.io/component=issuer", "ichor-identity");
    let sync = Arc::new(SyncState::new(all.len()));
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let tasks = ichor_reconcilers::run::watch::spawn(&client, NAMESPACE, all, tx, sync.clone());
    tokio::time::timeout(Duration::from_secs(20), async {
        while !sync.all() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("every watcher synced, IchorInstallation refused and counted as empty");
    let batch = rx.recv().await.unwrap();
    let [Event::Applied(service)] = batch.events.as_slice() else {
        panic!("{batch:?}")
    };
    assert_eq!(
        service.key(),
        ObjectKey::new("Service", NAMESPACE, "ichor-issuer")
    );
    assert_eq!(service.value["apiVersion"], json!("v1"));
    assert_eq!(service.value["spec"]["clusterIP"], json!("10.96.0.10"));
    for t in tasks {
        t.abort();
    }

    let requests = requests.lock().unwrap();
    let lists: Vec<&String> = requests.iter().filter(|r| !r.contains("watch=true")).collect();
    let secret_lists: Vec<&&String> = lists
        .iter()
        .filter(|r| r.starts_with("/api/v1/namespaces/ichor-system/secrets?"))
        .collect();
    assert_eq!(secret_lists.len(), 5, "{lists:#?}");
    assert!(
        secret_lists
            .iter()
            .all(|r| r.contains("fieldSelector=metadata.name%3Dichor-")),
        "every Secret is listed by name (the RBAC grants no other list): {secret_lists:#?}"
    );
    assert!(
        lists
            .iter()
            .any(|r| r.starts_with("/api/v1/namespaces/ichor-system/services?")
                && r.contains("labelSelector=app.kubernetes.io%2Fcomponent%3Dissuer")),
        "{lists:#?}"
    );
    assert!(
        lists
            .iter()
            .any(|r| r.starts_with("/apis/ichor.maesh.dev/v1alpha1/namespaces/ichor-system/ichorusers?")),
        "{lists:#?}"
    );
}

/// A [`FakeApplier`] whose call count can be read while the driver holds it.
struct Counting {
    inner: FakeApplier,
    calls: Arc<std::sync::atomic::AtomicUsize>,
}

#[async_trait]
impl Apply for Counting {
    async fn apply(&mut self, world: &World, actions: &[Action]) -> ApplyReport {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.apply(world, actions).await
    }
}

#[tokio::test]
async fn the_driver_of_a_standby_is_ready_but_applies_only_once_it_gains_the_lease() {
    use std::sync::atomic::Ordering;
    let (metrics, _) = Metrics::new();
    let mut lp = Loop::new(
        ichor_reconcile::identity::Controller::new().unwrap(),
        None,
        ClusterObserver::new(metrics),
    );
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    let sync = Arc::new(SyncState::new(1));
    let health = Arc::new(Health::default());
    let flag = LeaderFlag::elected();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let driver = Driver {
        rx,
        sync: sync.clone(),
        leader: flag.clone(),
        health: health.clone(),
        shutdown: stop_rx,
        resync_every: Duration::from_secs(600),
    };
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut applier = Counting {
        inner: FakeApplier::default(),
        calls: calls.clone(),
    };
    let script = async {
        tx.send(Batch {
            source: "Service".into(),
            events: vec![Event::Applied(issuer_service("10.96.0.10"))],
        })
        .await
        .unwrap();
        sync.mark(0);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(health.is_ready(), "a standby is ready (it serves the webhooks)");
        assert_eq!(calls.load(Ordering::SeqCst), 0, "a standby applies nothing");
        flag.lead_until(Instant::now() + Duration::from_secs(60));
        let deadline = Instant::now() + Duration::from_secs(10);
        while calls.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(calls.load(Ordering::SeqCst) > 0, "the new leader applies");
        stop_tx.send(true).unwrap();
    };
    tokio::time::timeout(
        Duration::from_secs(30),
        futures::future::join(drive(&mut lp, &mut applier, driver), script),
    )
    .await
    .expect("the driver stops on shutdown");
    assert!(lp.world().get(&secret_key(TLS_SECRET)).is_some());
}
