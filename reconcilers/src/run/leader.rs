//! Leader election on a `coordination.k8s.io/v1` Lease, with the pod name as holder.
//!
//! The protocol is client-go's: a replica takes the Lease when it is free, its own, or when its
//! record (holder, renewTime, transitions) has not changed for the lease duration *by this
//! replica's own clock* (no comparison of clocks between nodes). Every write is a PUT carrying
//! the resourceVersion read (optimistic concurrency: of two replicas racing, one gets 409).
//!
//! The leader renews every [`LeaseConfig::renew_every`] and leads only until
//! [`LeaseConfig::renew_deadline`] after the start of its last successful renewal: an API
//! server it cannot reach makes it stop applying before a standby may take over (deadline 10 s
//! < duration 15 s). `kube-lease-manager` was not used because it keeps reporting leadership
//! while its renewals fail.
//!
//! The RBAC of the chart grants `create` on Leases and `get`/`update` on this one by name, which
//! is exactly what is used here.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;

/// Timings and names of the election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This replica's identity (the pod name).
    pub identity: String,
    /// How long a record must stay unchanged before a standby takes the Lease.
    pub duration: Duration,
    /// How long after the start of its last successful renewal the leader keeps applying.
    pub renew_deadline: Duration,
    /// How often the leader renews.
    pub renew_every: Duration,
    /// How often a standby looks again.
    pub retry_every: Duration,
}

impl LeaseConfig {
    /// The defaults: duration 15 s, renew deadline 10 s, renew every 5 s, retry every 2 s.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>, identity: impl Into<String>) -> Self {
        LeaseConfig {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            renew_every: Duration::from_secs(5),
            retry_every: Duration::from_secs(2),
        }
    }
}

/// The parts of a Lease whose change proves its holder alive.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    holder: Option<String>,
    renew_time: Option<Timestamp>,
    transitions: Option<i32>,
}

impl Record {
    fn of(spec: Option<&LeaseSpec>) -> Self {
        Record {
            holder: spec
                .and_then(|s| s.holder_identity.clone())
                .filter(|h| !h.is_empty()),
            renew_time: spec.and_then(|s| s.renew_time.as_ref()).map(|t| t.0),
            transitions: spec.and_then(|s| s.lease_transitions),
        }
    }
}

/// Whether `me` may write the Lease: it is free, it is mine, or its record has stayed the same
/// for its lease duration (`fallback` when the Lease names none) by the local clock.
pub fn may_take(spec: Option<&LeaseSpec>, me: &str, unchanged_for: Duration, fallback: Duration) -> bool {
    let holder = spec
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty());
    match holder {
        None => true,
        Some(h) if h == me => true,
        Some(_) => {
            let duration = spec
                .and_then(|s| s.lease_duration_seconds)
                .and_then(|s| u64::try_from(s).ok())
                .map(Duration::from_secs)
                .unwrap_or(fallback);
            unchanged_for >= duration
        }
    }
}

/// One replica's view of the election.
pub struct Elector {
    api: Api<Lease>,
    config: LeaseConfig,
    observed: Option<(Record, Instant)>,
    leading: bool,
}

impl Elector {
    /// An elector for `config`, talking through `client`.
    pub fn new(client: Client, config: LeaseConfig) -> Self {
        let api = Api::namespaced(client, &config.namespace);
        Elector {
            api,
            config,
            observed: None,
            leading: false,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    fn spec_for(&self, previous: Option<&LeaseSpec>, wall: Timestamp) -> LeaseSpec {
        let mine = Record::of(previous).holder.as_deref() == Some(self.config.identity.as_str());
        let transitions = previous.and_then(|s| s.lease_transitions).unwrap_or(0);
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(i32::try_from(self.config.duration.as_secs()).unwrap_or(15)),
            renew_time: Some(MicroTime(wall)),
            acquire_time: if mine {
                previous.and_then(|s| s.acquire_time.clone())
            } else {
                Some(MicroTime(wall))
            },
            lease_transitions: Some(if mine || previous.is_none() {
                transitions
            } else {
                transitions.saturating_add(1)
            }),
            ..LeaseSpec::default()
        }
    }

    /// One attempt at `now` (local monotonic clock) and `wall` (for renewTime): reads the
    /// Lease, and creates, takes or renews it when allowed. Returns whether this replica holds
    /// it now; a lost race (409) is `Ok(false)`.
    ///
    /// # Errors
    /// The API could not be reached or refused otherwise; leadership is then unknown (the
    /// caller lets it lapse at the renew deadline).
    pub async fn step(&mut self, now: Instant, wall: Timestamp) -> Result<bool, kube::Error> {
        let current = self.api.get_opt(&self.config.name).await?;
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(self.spec_for(None, wall)),
            };
            return self.written(self.api.create(&PostParams::default(), &lease).await, now);
        };
        let record = Record::of(lease.spec.as_ref());
        match &self.observed {
            Some((seen, _)) if *seen == record => {}
            _ => self.observed = Some((record, now)),
        }
        let unchanged_for = self
            .observed
            .as_ref()
            .map(|(_, at)| now.saturating_duration_since(*at))
            .unwrap_or_default();
        if !may_take(
            lease.spec.as_ref(),
            &self.config.identity,
            unchanged_for,
            self.config.duration,
        ) {
            self.leading = false;
            return Ok(false);
        }
        lease.spec = Some(self.spec_for(lease.spec.as_ref(), wall));
        let written = self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await;
        self.written(written, now)
    }

    fn written(&mut self, result: Result<Lease, kube::Error>, now: Instant) -> Result<bool, kube::Error> {
        match result {
            Ok(lease) => {
                self.observed = Some((Record::of(lease.spec.as_ref()), now));
                self.leading = true;
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                self.leading = false;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Gives the Lease up (shutdown): holder cleared, duration 1 s, so a standby takes over at
    /// once. Does nothing unless this replica leads.
    ///
    /// # Errors
    /// The API refused or could not be reached (the Lease then expires by itself).
    pub async fn release(&mut self) -> Result<(), kube::Error> {
        if !self.leading {
            return Ok(());
        }
        self.leading = false;
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            return Ok(());
        };
        if Record::of(lease.spec.as_ref()).holder.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        if let Some(spec) = &mut lease.spec {
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
        }
        self.api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
    }
}

/// Whether this replica leads, as the loop reads it: leadership lapses by itself at its
/// deadline, whatever the election task is doing.
#[derive(Debug)]
pub struct LeaderFlag {
    always: bool,
    until: Mutex<Option<Instant>>,
    tx: watch::Sender<bool>,
}

impl LeaderFlag {
    /// A flag that is always set (`--leader-elect=false`: single replica, development).
    pub fn always() -> Arc<Self> {
        Arc::new(LeaderFlag {
            always: true,
            until: Mutex::new(None),
            tx: watch::channel(true).0,
        })
    }

    /// A flag set by an election, initially not leading.
    pub fn elected() -> Arc<Self> {
        Arc::new(LeaderFlag {
            always: false,
            until: Mutex::new(None),
            tx: watch::channel(false).0,
        })
    }

    /// Leads until `until` (a successful renewal).
    pub fn lead_until(&self, until: Instant) {
        if let Ok(mut slot) = self.until.lock() {
            *slot = Some(until);
        }
        self.tx.send_if_modified(|v| !std::mem::replace(v, true));
    }

    /// Does not lead (lost race, another holder, or the deadline passed).
    pub fn stop(&self) {
        if let Ok(mut slot) = self.until.lock() {
            *slot = None;
        }
        self.tx.send_if_modified(|v| std::mem::replace(v, false));
    }

    /// Whether this replica may apply at `now`.
    pub fn is_leader_at(&self, now: Instant) -> bool {
        self.always || self.until.lock().ok().and_then(|u| *u).is_some_and(|u| now < u)
    }

    /// Whether this replica may apply now.
    pub fn is_leader(&self) -> bool {
        self.is_leader_at(Instant::now())
    }

    /// Changes of leadership (gained, lost) as the election task saw them.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.tx.subscribe()
    }
}

/// Runs the election until `shutdown` turns true, then releases the Lease if held.
pub async fn run(mut elector: Elector, flag: Arc<LeaderFlag>, mut shutdown: watch::Receiver<bool>) {
    let config = elector.config().clone();
    loop {
        let started = Instant::now();
        let attempt = tokio::time::timeout(config.renew_every, elector.step(started, Timestamp::now())).await;
        match attempt {
            Ok(Ok(true)) => flag.lead_until(started + config.renew_deadline),
            Ok(Ok(false)) => flag.stop(),
            Ok(Err(e)) => tracing::warn!(error = %e, lease = %config.name, "lease not renewed"),
            Err(_) => tracing::warn!(lease = %config.name, "lease request timed out"),
        }
        if !flag.is_leader() {
            flag.stop();
        }
        let pause = if flag.is_leader() {
            config.renew_every
        } else {
            config.retry_every
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            break;
        }
    }
    flag.stop();
    if let Err(e) = elector.release().await {
        tracing::warn!(error = %e, "lease not released; it expires by itself");
    }
}
