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
use ichor_controller::admission::{AdmissionError, UserCache};
use ichor_controller::run::convert::{WatchState, metadata_event};
use ichor_controller::run::leader::{Elector, LeaderFlag, LeaseConfig, may_take};
use ichor_controller::run::metrics::{self, Health, Metrics};
use ichor_controller::run::observe::ClusterObserver;
use ichor_controller::run::watch::{Batch, SyncState, sources};
use ichor_controller::run::{Apply, Driver, Loop, Report as ApplyReport, RunArgs, drive, journal};
use ichor_controller_core::memory::merge_into;
use ichor_controller_core::perform::{self, KeyMaterial, KeyMaterialError, Outcome};
use ichor_controller_core::problem::{Problem, ProblemKind};
use ichor_controller_core::sim::TEST_RSA_PEM;
use ichor_controller_core::sim::fixtures::{issuer_service, user};
use ichor_graph::{Action, Event, Object, ObjectKey, World};
use ichor_renderers::trust::{NAMESPACE, SIGNING_SECRET, TLS_SECRET};
use ichor_server::logging::LogFormat;
use jiff::Timestamp;
use kube::api::{ApiResource, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::watcher;
use serde_json::{Value, json};

mod endpoints;
mod leader;
mod watch;

// ─── a fake applier ──────────────────────────────────────────────────────────────────────────

struct FixedMaterial;

impl KeyMaterial for FixedMaterial {
    fn rsa_pkcs8_pem(&mut self) -> Result<String, KeyMaterialError> {
        Ok(TEST_RSA_PEM.to_owned())
    }
    fn hmac_secret(&mut self, _kid: &str) -> Result<[u8; 32], KeyMaterialError> {
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

fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": reason,
        "reason": reason, "code": code})
}

fn now() -> Timestamp {
    "2027-03-01T12:00:00Z".parse().unwrap()
}

/// A loop of the identity controller, journaling to the file `journal` when given, and the
/// registry of its metrics.
pub(crate) fn identity_loop(
    journal: Option<&std::path::Path>,
) -> (Loop, prometheus_client::registry::Registry) {
    let (metrics, registry) = Metrics::new();
    let lp = Loop::new(
        ichor_controller_core::identity::Controller::new().unwrap(),
        journal.map(|path| journal::open(path).unwrap()),
        ClusterObserver::new(metrics),
    );
    (lp, registry)
}

fn leader_loop() -> (Loop, prometheus_client::registry::Registry) {
    let (mut lp, registry) = identity_loop(None);
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
        ichor_controller_core::identity::Controller::new().unwrap(),
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
        ichor_controller_core::identity::Controller::new().unwrap(),
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
        ichor_controller_core::identity::Controller::new().unwrap(),
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
        ichor_controller_core::identity::Controller::new().unwrap(),
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
