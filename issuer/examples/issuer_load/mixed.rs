//! `mixed`: a paced mixed workload (discovery, JWKS, refresh grants, `UserService/WhoAmI` over
//! gRPC-web and sign-ins) against several issuers, then the same with a login flood added; prints
//! a markdown report. This module holds the endpoint classes and the two phases; the paced
//! requests are in `task`, the flood in `flood`, the known devices' sign-ins in `devices`, the
//! readings of the issuer processes in `process` and the report in `report`.

use crate::client::{PASSWORD, client, sign_in_tokens, source};
use anyhow::{Context as _, Result};
use flood::flood_loop;
use process::{cpu_seconds, vm_hwm_mib};
use report::report;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use task::{Record, Task, paced};

mod devices;
mod flood;
mod process;
mod report;
mod task;

/// One endpoint class of the paced workload: its name, requests per second in all, and
/// how many tasks share that rate.
pub(crate) const CLASSES: &[(&str, f64, usize)] = &[
    ("discovery", 100.0, 4),
    ("jwks", 100.0, 4),
    ("refresh", 40.0, 8),
    ("whoami (gRPC-web)", 40.0, 4),
    ("sign-in (authorize+password+code)", 2.0, 2),
];

/// What one phase measured: the paced requests' record, and each issuer's VmHWM after it and
/// CPU share during it, and the flood's outcomes.
pub(crate) struct Phase {
    pub(crate) name: &'static str,
    pub(crate) seconds: f64,
    pub(crate) record: Record,
    pub(crate) hwm: Vec<u64>,
    pub(crate) cpu: Vec<f64>,
    pub(crate) flood: BTreeMap<String, usize>,
    pub(crate) devices: devices::Outcomes,
}

#[allow(clippy::too_many_arguments)]
async fn phase(
    own: &devices::OwnThread,
    name: &'static str,
    tasks: Vec<Task>,
    known: Vec<devices::Device>,
    duration: Duration,
    flood: usize,
    ca: &[u8],
    pids: &[u32],
) -> Result<(Vec<Task>, Vec<devices::Device>, Phase)> {
    let issuers = Arc::clone(&tasks.first().context("no tasks")?.issuers);
    let cpu_before: Vec<f64> = pids.iter().map(|p| cpu_seconds(*p).unwrap_or(0.0)).collect();
    let deadline = Instant::now() + duration;
    let mut handles = Vec::new();
    for task in tasks {
        let &(_, rate, count) = CLASSES.iter().find(|c| c.0 == task.class).context("class")?;
        let every = Duration::from_secs_f64(count as f64 / rate);
        handles.push(tokio::spawn(paced(task, every, deadline)));
    }
    let known = devices::start(own, known, &issuers, deadline);
    let mut floods = Vec::new();
    for i in 0..flood {
        let http = client(ca)?;
        floods.push(tokio::spawn(flood_loop(http, Arc::clone(&issuers), i, deadline)));
    }
    let mut tasks = Vec::new();
    let mut record = Record::default();
    for h in handles {
        let (task, r) = h.await?;
        tasks.push(task);
        record.merge(r);
    }
    let mut flood_counts = BTreeMap::new();
    for f in floods {
        for (k, v) in f.await? {
            *flood_counts.entry(k).or_default() += v;
        }
    }
    let (known, known_outcomes) = devices::finish(known).await?;
    // Rates over the phase itself (a paced request in flight at the deadline still counts).
    let seconds = duration.as_secs_f64();
    for v in record.ok.values_mut() {
        v.sort();
    }
    let hwm = pids.iter().map(|p| vm_hwm_mib(*p).unwrap_or(0)).collect();
    let cpu = pids
        .iter()
        .zip(cpu_before)
        .map(|(p, before)| (cpu_seconds(*p).unwrap_or(0.0) - before) / seconds)
        .collect();
    Ok((
        tasks,
        known,
        Phase {
            name,
            seconds,
            record,
            hwm,
            cpu,
            flood: flood_counts,
            devices: known_outcomes,
        },
    ))
}

/// Signs in the paced tasks' users (refresh families and `ichor-ui` ID tokens) and runs
/// the sustained phase, then the flood phase; prints the markdown report.
pub(crate) async fn run(
    issuers: &[String],
    ca: &Path,
    pids: &[u32],
    duration: Duration,
    flood: usize,
) -> Result<()> {
    let ca = std::fs::read(ca)?;
    let issuers = Arc::new(issuers.to_vec());
    let mut tasks = Vec::new();
    let mut user = 0usize;
    for &(class, _, count) in CLASSES {
        for _ in 0..count {
            let http = client(&ca)?;
            let (mut refresh_token, mut id_token) = (String::new(), String::new());
            if class == "refresh" || class.starts_with("whoami") {
                let name = format!("bench-{user}");
                let issuer = &issuers[user % issuers.len()];
                let tokens = sign_in_tokens(
                    &http,
                    issuer,
                    &name,
                    PASSWORD,
                    ichor_renderers::contract::UI_AUDIENCE,
                    &source(5_000_000 + user),
                )
                .await
                .with_context(|| format!("sign in {name}"))?;
                refresh_token = tokens["refresh_token"]
                    .as_str()
                    .context("no refresh_token")?
                    .to_owned();
                id_token = tokens["id_token"].as_str().context("no id_token")?.to_owned();
                user += 1;
            }
            tasks.push(Task {
                class,
                http,
                issuers: Arc::clone(&issuers),
                refresh_token,
                id_token,
                n: tasks.len(),
                source_base: 6_000_000 + tasks.len() * 100_000,
            });
        }
    }
    let own = devices::OwnThread::start()?;
    let known = devices::enrol(&own, &ca, &issuers).await?;
    eprintln!("mixed: sustained phase, {}s", duration.as_secs());
    let (tasks, known, sustained) = phase(&own, "sustained", tasks, known, duration, 0, &ca, pids).await?;
    eprintln!(
        "mixed: flood phase ({flood} sign-in loops), {}s",
        duration.as_secs()
    );
    let (_, _, flooded) = phase(&own, "flood", tasks, known, duration, flood, &ca, pids).await?;
    own.stop();
    print!("{}", report(issuers.len(), &sustained, &flooded, flood));
    let flood_shed = flooded
        .flood
        .iter()
        .filter(|(k, _)| k.ends_with("HTTP 503"))
        .map(|(_, n)| n)
        .sum();
    print!(
        "{}",
        devices::report(&sustained.devices, &flooded.devices, flood_shed)
    );
    Ok(())
}
