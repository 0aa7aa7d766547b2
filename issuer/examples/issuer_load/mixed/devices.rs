//! Known devices in the mixed workload: a few users who signed in once before the phases, and
//! kept the device cookie the issuer set, sign in again at a steady pace in both phases sending
//! it, as a browser that signed in before does. Their latencies and outcomes, before and during
//! the flood, go in the report beside the flood's shed count.

use super::task::is_shed;
use crate::client::{PASSWORD, client, sign_in_device, source};
use crate::stats::{ms, percentile};
use anyhow::{Context as _, Result};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How many known devices sign in, one user each (`bench-40` … , users neither the paced
/// sign-ins nor the flood use).
pub(crate) const DEVICES: usize = 6;
/// How often each device signs in.
pub(crate) const EVERY: Duration = Duration::from_secs(3);
const FIRST_USER: usize = 40;
/// Sign-ins per forwarded address before the next one (the per-source burst is 10).
const PER_ADDRESS: usize = 5;

/// One browser that signed in before: its client, its user and its device cookie.
pub(crate) struct Device {
    http: reqwest::Client,
    user: String,
    cookie: String,
    n: usize,
    source_base: usize,
}

/// What the known devices' sign-ins of one phase got: the latencies of those that succeeded,
/// how many were shed (503 busy) and the other errors.
#[derive(Default)]
pub(crate) struct Outcomes {
    ok: Vec<Duration>,
    shed: usize,
    errors: BTreeMap<String, usize>,
}

impl Outcomes {
    fn merge(&mut self, other: Outcomes) {
        self.ok.extend(other.ok);
        self.shed += other.shed;
        for (m, n) in other.errors {
            *self.errors.entry(m).or_default() += n;
        }
    }
}

/// The known devices' own runtime: one thread apart from the generator's, which the flood's
/// loops keep busy. The devices stand for other people's browsers; sharing the generator's
/// threads, their sign-ins would wait behind the flood's own tasks in this process, and the
/// figure would time the generator instead of the issuers.
pub(crate) struct OwnThread(tokio::runtime::Runtime);

impl OwnThread {
    /// Starts the thread.
    pub(crate) fn start() -> Result<Self> {
        Ok(OwnThread(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("known-devices")
                .enable_all()
                .build()?,
        ))
    }

    /// Stops the thread (from within the generator's runtime, where it may not block).
    pub(crate) fn stop(self) {
        self.0.shutdown_background();
    }
}

/// Signs each device's user in once (no flood yet) on the devices' own thread and keeps the
/// cookie it got; the devices' connections live on that thread from then on.
pub(crate) async fn enrol(own: &OwnThread, ca: &[u8], issuers: &[String]) -> Result<Vec<Device>> {
    own.0.spawn(enrol_here(ca.to_vec(), issuers.to_vec())).await?
}

async fn enrol_here(ca: Vec<u8>, issuers: Vec<String>) -> Result<Vec<Device>> {
    let ca = ca.as_slice();
    let mut devices = Vec::new();
    for i in 0..DEVICES {
        let http = client(ca)?;
        let user = format!("bench-{}", FIRST_USER + i);
        let source_base = 7_000_000 + i * 10_000;
        let issuer = &issuers[i % issuers.len()];
        let (_, cookie) = sign_in_device(
            &http,
            issuer,
            &user,
            PASSWORD,
            ichor_renderers::contract::KUBE_AUDIENCE,
            &source(source_base),
            None,
        )
        .await
        .with_context(|| format!("first sign-in of {user}"))?;
        let cookie = cookie.with_context(|| format!("the sign-in of {user} set no device cookie"))?;
        devices.push(Device {
            http,
            user,
            cookie,
            n: 1,
            source_base,
        });
    }
    Ok(devices)
}

/// Signs `device` in every [`EVERY`] until `deadline`, alternating between the issuers and
/// keeping the renewed cookie.
async fn paced(
    mut device: Device,
    issuers: Arc<Vec<String>>,
    offset: Duration,
    deadline: Instant,
) -> (Device, Outcomes) {
    let mut out = Outcomes::default();
    tokio::time::sleep(offset).await;
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if Instant::now() >= deadline {
            break;
        }
        let issuer = &issuers[device.n % issuers.len()];
        let from = source(device.source_base + device.n / PER_ADDRESS);
        device.n += 1;
        let t = Instant::now();
        let attempt = sign_in_device(
            &device.http,
            issuer,
            &device.user,
            PASSWORD,
            ichor_renderers::contract::KUBE_AUDIENCE,
            &from,
            Some(&device.cookie),
        )
        .await;
        match attempt {
            Ok((_, cookie)) => {
                out.ok.push(t.elapsed());
                if let Some(cookie) = cookie {
                    device.cookie = cookie;
                }
            }
            Err(e) if is_shed(&e.to_string()) => out.shed += 1,
            Err(e) => {
                *out.errors
                    .entry(e.to_string().chars().take(100).collect())
                    .or_default() += 1
            }
        }
    }
    (device, out)
}

/// Runs every device paced until `deadline` on their own thread (their first sign-ins spread
/// over [`EVERY`]).
pub(crate) fn start(
    own: &OwnThread,
    devices: Vec<Device>,
    issuers: &Arc<Vec<String>>,
    deadline: Instant,
) -> Vec<tokio::task::JoinHandle<(Device, Outcomes)>> {
    let step = EVERY / u32::try_from(DEVICES).unwrap_or(1);
    devices
        .into_iter()
        .enumerate()
        .map(|(i, d)| {
            let offset = step * u32::try_from(i).unwrap_or(0);
            own.0.spawn(paced(d, Arc::clone(issuers), offset, deadline))
        })
        .collect()
}

/// Waits for the devices of [`start`]: them again, and the phase's outcomes.
pub(crate) async fn finish(
    handles: Vec<tokio::task::JoinHandle<(Device, Outcomes)>>,
) -> Result<(Vec<Device>, Outcomes)> {
    let mut devices = Vec::new();
    let mut outcomes = Outcomes::default();
    for h in handles {
        let (d, o) = h.await?;
        devices.push(d);
        outcomes.merge(o);
    }
    outcomes.ok.sort();
    Ok((devices, outcomes))
}

/// The report's section: the known devices' sign-ins before and during the flood, with the
/// flood's own shed count beside them.
pub(crate) fn report(sustained: &Outcomes, flooded: &Outcomes, flood_shed: usize) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n## Known devices ({DEVICES} users who signed in before, sending their device cookie, one sign-in each every {} s)\n",
        EVERY.as_secs()
    );
    let _ = writeln!(
        out,
        "| phase | signed in | shed (503 busy) | errors | p50 ms | p99 ms | max ms | flood shed (503 busy) |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    for (name, o, shed) in [("sustained", sustained, 0), ("flood", flooded, flood_shed)] {
        let errors: usize = o.errors.values().sum();
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {errors} | {:.1} | {:.1} | {:.1} | {shed} |",
            o.ok.len(),
            o.shed,
            ms(percentile(&o.ok, 50.0)),
            ms(percentile(&o.ok, 99.0)),
            ms(o.ok.last().copied().unwrap_or_default()),
        );
    }
    let (before, during) = (
        ms(percentile(&sustained.ok, 99.0)),
        ms(percentile(&flooded.ok, 99.0)),
    );
    let verdict = if flooded.shed == 0 && during < 2000.0 && !flooded.ok.is_empty() {
        "holds"
    } else {
        "BROKEN"
    };
    let _ = writeln!(
        out,
        "\nKnown-device p99 during the flood: **{during:.1} ms** ({:.1}x the sustained phase's {before:.1} ms); \
         goal: none shed and p99 under 2 s ({verdict}).",
        during / before.max(0.001)
    );
    for (phase, o) in [("sustained", sustained), ("flood", flooded)] {
        for (m, n) in &o.errors {
            let _ = writeln!(out, "\n{phase} known-device error x{n}: `{m}`");
        }
    }
    out
}
