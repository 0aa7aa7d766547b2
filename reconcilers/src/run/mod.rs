//! `ichor-controller run`: the cluster driver of the one reconcile loop
//! (`ichor_controller_core::cycle`).
//!
//! ```text
//! watchers (one per input) ─► mpsc ─► Loop::ingest (journal, fold)
//!                                        │ Tick(now) at the graph's next deadline, resync every 10 min
//!                                        ▼
//!                                 Loop::settle: decide ─► Apply (leader only) ─► absorb ─► …
//! Lease election ─► LeaderFlag (lapses at its renew deadline by itself)
//! axum on --metrics-listen: /metrics /healthz /readyz
//! ```
//!
//! - `args`: the flags ([`RunArgs`]) and their checks;
//! - [`observe`]: the loop's decisions and problems as logs and metrics;
//! - [`convert`]: watch events → graph events, re-lists included;
//! - [`watch`]: the watchers of the inputs;
//! - [`leader`]: Lease election;
//! - [`metrics`]: Prometheus metrics and the plain-HTTP endpoints;
//! - [`journal`]: the `--journal FILE` writer (Secret data redacted), resumed across restarts.

mod args;
pub mod convert;
pub mod journal;
pub mod leader;
pub mod metrics;
pub mod observe;
pub mod watch;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ichor_controller_core::identity::Controller;
use ichor_controller_core::identity::nodes::{users_fallback_object, with_publish_lead};
use ichor_controller_core::identity::rollout;
use ichor_controller_core::perform::OsKeyMaterial;
use ichor_graph::{Action, Event, World};
use ichor_renderers::trust::NAMESPACE;
use ichor_server::reload::WatchOptions;
use jiff::Timestamp;
use kube::Client;
use tokio::sync::{mpsc, watch as signal};

pub use self::args::RunArgs;
use self::leader::{Elector, LeaderFlag, LeaseConfig};
use self::metrics::{Health, Metrics};
use self::observe::ClusterObserver;
use self::watch::{Batch, SyncState};
use crate::admission::{self, AdmissionState, KubeAccessReviewer, KubeUserLister, UserCache};
use crate::apply::KubeApplier;
pub use ichor_controller_core::cycle::{Apply, CycleReport, DryRun, MAX_ROUNDS, Report};

/// The cluster driver's loop: the one reconcile loop, observed as logs and metrics.
pub type Loop = ichor_controller_core::cycle::Loop<ClusterObserver>;
/// The journal the loop writes (`--journal FILE`), Secret data redacted to sha256.
pub type Journal = ichor_graph::JournalWriter<Box<dyn std::io::Write + Send>>;

/// Why `run` could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The namespace flag names another namespace.
    #[error(
        "--namespace (ICHOR_CONTROLLER_NAMESPACE) is {0:?}, but Ichor runs in {NAMESPACE} only (its object names are a contract)"
    )]
    Namespace(String),
    /// Leader election without an identity.
    #[error(
        "--leader-elect needs --pod-name (ICHOR_CONTROLLER_POD_NAME, the pod's metadata.name); use --leader-elect=false for a single replica"
    )]
    NoPodName,
    /// A signing-key flag is out of its range.
    #[error("{flag} must be {range}")]
    KeysFlag {
        /// The flag and its variable.
        flag: &'static str,
        /// Its range.
        range: &'static str,
    },
    /// A rollout flag is out of its range.
    #[error("{flag} must be {range}")]
    RolloutFlag {
        /// The flag and its variable.
        flag: &'static str,
        /// Its range.
        range: &'static str,
    },
    /// No Kubernetes client configuration.
    #[error("no Kubernetes client configuration (in-cluster service account or kubeconfig): {0}")]
    Client(kube::Error),
    /// A listener could not bind: the metrics one or the webhooks' one.
    #[error("{flag} {addr}: cannot listen: {error}")]
    Listen {
        /// The flag that sets it (`--metrics-listen` or `--webhook-port`).
        flag: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The operating system's reason.
        error: std::io::Error,
    },
    /// The journal could not be opened.
    #[error(transparent)]
    Journal(#[from] journal::OpenError),
    /// The identity graph did not build (a bug).
    #[error("the identity graph did not build: {0}")]
    Graph(#[from] ichor_graph::BuildError),
    /// `--token-ttl` or `--refresh-lifetime` is out of the issuer's range.
    #[error("{flag} is out of range: use {range}, the same value as the issuer's flag")]
    UsersFlag {
        /// The flag and its environment variable.
        flag: &'static str,
        /// The accepted range.
        range: &'static str,
    },
    /// The async runtime could not start.
    #[error("the async runtime did not start: {0}")]
    Runtime(std::io::Error),
    /// The webhooks' certificate directory cannot be followed.
    #[error(transparent)]
    Admission(#[from] admission::AdmissionError),
}

/// The channels and shared state [`drive`] runs on.
pub struct Driver {
    /// The watchers' batches.
    pub rx: mpsc::Receiver<Batch>,
    /// The watchers' first lists.
    pub sync: Arc<SyncState>,
    /// Leadership.
    pub leader: Arc<LeaderFlag>,
    /// Readiness.
    pub health: Arc<Health>,
    /// Turns true on SIGTERM / Ctrl-C.
    pub shutdown: signal::Receiver<bool>,
    /// Time between full resyncs.
    pub resync_every: Duration,
}

fn count_world(lp: &Loop) {
    let objects = i64::try_from(lp.world().len()).unwrap_or(i64::MAX);
    lp.observer().metrics().world_objects.set(objects);
}

/// How long from `now` until `deadline` (zero when past), plus 5 ms so the Tick lands after it.
fn until(deadline: Timestamp, now: Timestamp) -> Duration {
    let left = Duration::try_from(deadline.duration_since(now)).unwrap_or_default();
    left + Duration::from_millis(5)
}

/// The loop: folds batches (draining what is queued), marks readiness once every watcher
/// synced, and runs a [`Loop::settle`] cycle on every wake-up — a batch, a watcher's first
/// list, a change of leadership, the graph's next deadline, a retry after applier problems, or
/// the periodic resync. A cycle of the leader is abandoned as soon as the lease is lost. Ends
/// on shutdown or when every watcher is gone.
pub async fn drive<A: Apply + ?Sized>(lp: &mut Loop, applier: &mut A, mut d: Driver) {
    let mut leader_rx = d.leader.subscribe();
    let mut next_resync = Instant::now() + d.resync_every;
    let mut retry_at: Option<Instant> = None;
    loop {
        let mut wake = next_resync;
        if let Some(deadline) = lp.next_deadline() {
            wake = wake.min(Instant::now() + until(deadline, Timestamp::now()));
        }
        if let Some(r) = retry_at {
            wake = wake.min(r);
        }
        tokio::select! {
            batch = d.rx.recv() => match batch {
                None => break,
                Some(first) => {
                    let mut events = first.events;
                    while let Ok(more) = d.rx.try_recv() {
                        events.extend(more.events);
                    }
                    lp.ingest(events);
                    count_world(lp);
                }
            },
            _ = d.sync.changed() => {}
            _ = leader_rx.changed() => {}
            _ = tokio::time::sleep_until(wake.into()) => {}
            _ = d.shutdown.changed() => {}
        }
        if *d.shutdown.borrow() {
            break;
        }
        if !d.health.is_ready() && d.sync.all() {
            lp.set_synced();
            d.health.set_ready();
        }
        if Instant::now() >= next_resync {
            lp.resync();
            next_resync = Instant::now() + d.resync_every;
        }
        lp.set_leader(d.leader.is_leader());
        let leading = lp.is_leader();
        let flag = d.leader.clone();
        let still_leader = move || flag.is_leader();
        lp.tick(Timestamp::now());
        let report = if leading {
            tokio::select! {
                report = lp.settle(applier, &still_leader) => Some(report),
                _ = leader_rx.wait_for(|v| !*v) => None,
            }
        } else {
            Some(lp.settle(applier, &still_leader).await)
        };
        count_world(lp);
        match report {
            Some(report) => {
                retry_at = lp.retry_delay().map(|delay| Instant::now() + delay);
                if !report.actions.is_empty() || !report.problems.is_empty() {
                    tracing::info!(
                        rounds = report.rounds,
                        actions = report.actions.len(),
                        problems = report.problems.len(),
                        settled = report.settled,
                        "cycle"
                    );
                }
            }
            None => {
                lp.set_leader(false);
                lp.resync();
                tracing::warn!("lease lost during a cycle: applying stopped mid-cycle");
            }
        }
    }
}

async fn shutdown_signal(tx: signal::Sender<bool>) {
    ichor_server::shutdown::signal().await;
    let _ = tx.send(true);
}

/// Runs the controller until SIGTERM, applying with the applier `make_applier` builds.
///
/// # Errors
/// [`RunError`]: bad flags, no client configuration, the metrics port taken, the journal.
pub async fn run<A, F>(args: RunArgs, make_applier: F) -> Result<(), RunError>
where
    A: Apply,
    F: FnOnce(Client) -> A,
{
    if args.namespace != NAMESPACE {
        return Err(RunError::Namespace(args.namespace));
    }
    let identity = match (&args.pod_name, args.leader_elect) {
        (Some(p), _) if !p.is_empty() => p.clone(),
        (_, true) => return Err(RunError::NoPodName),
        _ => env!("CARGO_PKG_NAME").to_owned(),
    };
    let users_fallback = args.users_fallback()?;
    let rollout_settings = args.rollout_settings()?;
    let publish_lead = args.key_publish_lead()?;
    let client = Client::try_default().await.map_err(RunError::Client)?;
    let (shutdown_tx, shutdown_rx) = signal::channel(false);
    tokio::spawn(shutdown_signal(shutdown_tx));

    let (metrics, registry) = Metrics::new();
    let sources = watch::sources_named(
        &args.issuer_service_selector,
        &args.issuer_service_name,
        &args.webhook_configuration,
    );
    let sync = Arc::new(SyncState::new(sources.len()));
    let health = Arc::new(Health::watching(sync.clone()));
    let listener = tokio::net::TcpListener::bind(args.metrics_listen)
        .await
        .map_err(|error| RunError::Listen {
            flag: "--metrics-listen",
            addr: args.metrics_listen,
            error,
        })?;
    // The webhooks' serving pair, followed from the start: readiness waits for it.
    let webhook_pair = admission::watch_certificate(&args.webhook_cert_dir, WatchOptions::default())?;
    let ops = metrics::router(
        Arc::new(registry),
        health.clone(),
        Some(Arc::new(webhook_pair.clone())),
    );
    let mut ops_shutdown = shutdown_rx.clone();
    tokio::spawn(async move {
        let serve = axum::serve(listener, ops).with_graceful_shutdown(async move {
            let _ = ops_shutdown.wait_for(|v| *v).await;
        });
        if let Err(e) = serve.await {
            tracing::error!(error = %e, "the metrics server stopped");
        }
    });

    // The admission webhooks, on every replica (leader or not): failurePolicy Fail makes them
    // part of every write of the kinds they guard. Their user cache is fed by the IchorUser
    // watcher below (one watch for the graph and the webhooks).
    let (user_cache, user_feed) = UserCache::new(&args.namespace);
    let state = AdmissionState::new(
        Arc::new(KubeAccessReviewer::new(client.clone())),
        Arc::new(KubeUserLister::new(client.clone(), user_cache)),
        admission::controller_identity(&args.namespace),
    )
    .with_users_namespace(&args.namespace)
    .with_observer(Arc::new(metrics.clone()));
    let webhook_addr = SocketAddr::from(([0, 0, 0, 0], args.webhook_port));
    let webhook_listener = tokio::net::TcpListener::bind(webhook_addr)
        .await
        .map_err(|error| RunError::Listen {
            flag: "--webhook-port",
            addr: webhook_addr,
            error,
        })?;
    let mut webhook_shutdown = shutdown_rx.clone();
    let webhooks = tokio::spawn(admission::serve_with(
        webhook_listener,
        webhook_pair,
        Arc::new(state),
        async move {
            let _ = webhook_shutdown.wait_for(|v| *v).await;
        },
        admission::ServerOptions::default().serve,
    ));
    tracing::info!(
        listen = %webhook_addr,
        cert_dir = %args.webhook_cert_dir.display(),
        "admission webhooks served"
    );

    let (leader, election) = if args.leader_elect {
        let flag = LeaderFlag::elected();
        let config = LeaseConfig::new(&args.namespace, &args.lease_name, &identity);
        let elector = Elector::new(client.clone(), config);
        let task = tokio::spawn(leader::run(elector, flag.clone(), shutdown_rx.clone()));
        (flag, Some(task))
    } else {
        (LeaderFlag::always(), None)
    };

    let (tx, rx) = mpsc::channel(1024);
    let watchers = watch::spawn(
        &client,
        &args.namespace,
        sources,
        tx,
        sync.clone(),
        Some(user_feed),
    );

    let journal = args.journal.as_deref().map(journal::open).transpose()?;
    let mut lp = Loop::new(Controller::new()?, journal, ClusterObserver::new(metrics));
    lp.ingest([Event::Applied(with_publish_lead(
        users_fallback_object(&users_fallback),
        publish_lead,
    ))]);
    if args.rollout {
        lp.ingest([Event::Applied(rollout::settings_object(&rollout_settings))]);
    }
    let mut applier = make_applier(client);
    tracing::info!(identity = %identity, leader_elect = args.leader_elect, dry_run = args.dry_run, "started");
    let driver = Driver {
        rx,
        sync,
        leader,
        health,
        shutdown: shutdown_rx,
        resync_every: Duration::from_secs(args.resync_seconds),
    };
    drive(&mut lp, &mut applier, driver).await;
    for w in watchers {
        w.abort();
    }
    match tokio::time::timeout(Duration::from_secs(5), webhooks).await {
        Ok(Ok(Err(e))) => tracing::error!(error = %e, "the admission webhooks stopped"),
        Err(_) => tracing::warn!("the admission webhooks did not stop within 5 s"),
        _ => {}
    }
    drop(lp.take_journal());
    // The election task releases the Lease on shutdown, so a standby takes over at once.
    if let Some(task) = election
        && tokio::time::timeout(Duration::from_secs(5), task).await.is_err()
    {
        tracing::warn!("the Lease was not released within 5 s; it expires by itself");
    }
    Ok(())
}

/// The appliers `ichor-controller run` chooses from.
pub enum Applier {
    /// The Kubernetes applier.
    Kube(Box<KubeApplier>),
    /// `--dry-run`: nothing is applied.
    DryRun(DryRun),
}

#[async_trait::async_trait]
impl Apply for Applier {
    async fn apply(&mut self, world: &World, actions: &[Action]) -> Report {
        match self {
            Applier::Kube(kube) => kube.apply(world, actions).await,
            Applier::DryRun(dry) => {
                for action in actions {
                    tracing::info!(action = %action, "dry run: not applied");
                }
                dry.apply(world, actions).await
            }
        }
    }
}

/// `ichor-controller run`: starts logging and the runtime, and runs. The applier is chosen here.
///
/// # Errors
/// See [`run`].
pub fn main(args: RunArgs) -> Result<(), RunError> {
    ichor_server::logging::init(args.log_format);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(RunError::Runtime)?;
    if args.dry_run {
        tracing::warn!("--dry-run: decisions are logged and counted, nothing is applied");
        return runtime.block_on(run(args, |_client| Applier::DryRun(DryRun)));
    }
    let namespace = args.namespace.clone();
    let sweep_interval = std::time::Duration::from_millis(args.credentials_sweep_interval_ms);
    runtime.block_on(run(args, move |client| {
        Applier::Kube(Box::new(
            KubeApplier::new(client, namespace, Box::new(OsKeyMaterial)).with_sweep_interval(sweep_interval),
        ))
    }))
}
