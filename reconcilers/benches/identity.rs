//! Benchmarks of the identity graph at the size of a large installation: 1,000 IchorUsers,
//! 50 Ichor-issuer TalosClusters, 150 control-plane TalosMachines.
//!
//! - `one IchorUser change`: fold one user's new spec and evaluate (target < 1 ms median);
//! - `one TalosCluster change`: fold one cluster's new issuer URL and evaluate (its render and
//!   its three machines' conditions);
//! - `replay 100k events`: replay a generated journal of 100,000 events (throughput in events/s;
//!   target > 50,000 events/s).
//!
//! Peak memory of the replay: `ichor-controller gen-journal /tmp/j.jsonl` (a build with the `sim`
//! feature) then
//! `/usr/bin/time -v ichor-controller replay --summary /tmp/j.jsonl` (see hack/bench/identity.sh).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ichor_controller_core::identity::{Controller, replay};
use ichor_controller_core::sim::Sim;
use ichor_controller_core::sim::workload::{Workload, generate};
use ichor_graph::{Event, JournalReader, ObjectKey};
use ichor_renderers::contract::NAMESPACE;
use serde_json::json;

/// The controller binary's allocator, so the numbers are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn settled() -> Sim<std::io::Sink> {
    let mut sim = Sim::new(std::io::sink()).expect("the graph builds");
    sim.record = false;
    let w = Workload {
        events: 0,
        ..Workload::default()
    };
    generate(&mut sim, w).expect("the installation settles");
    sim
}

fn changes(c: &mut Criterion) {
    let mut sim = settled();
    let mut i = 0u64;
    c.bench_function("identity/one IchorUser change", |b| {
        b.iter(|| {
            i += 1;
            let name = format!("user-{:05}", i % 1000);
            let key = ObjectKey::new("IchorUser", NAMESPACE, name);
            let Some(mut u) = sim.controller().world().get(&key).cloned() else {
                return;
            };
            u.value["spec"]["displayName"] = json!(format!("renamed {i}"));
            u.value["metadata"]["generation"] = json!(i + 10);
            let c = sim.controller_mut();
            c.fold(Event::Applied(u));
            black_box(c.evaluate());
        })
    });
    let mut j = 0u64;
    c.bench_function("identity/one TalosCluster change", |b| {
        b.iter(|| {
            j += 1;
            let name = format!("cluster-{:03}", j % 50);
            let key = ObjectKey::new("TalosCluster", NAMESPACE, name);
            let Some(mut o) = sim.controller().world().get(&key).cloned() else {
                return;
            };
            o.value["spec"]["authentication"]["ichor"]["url"] =
                json!(format!("https://ichor-{j}.example.com"));
            let c = sim.controller_mut();
            c.fold(Event::Applied(o));
            black_box(c.evaluate());
        })
    });
}

fn replay_journal(c: &mut Criterion) {
    let mut sim = Sim::new(Vec::new()).expect("the graph builds");
    sim.record = false;
    generate(&mut sim, Workload::default()).expect("the journal is generated");
    let journal = sim.into_journal().expect("the journal is written");
    let mut group = c.benchmark_group("identity");
    group.sample_size(10);
    group.throughput(Throughput::Elements(100_000));
    group.bench_function("replay 100k events", |b| {
        b.iter(|| {
            let mut controller = Controller::new().expect("the graph builds");
            black_box(replay(JournalReader::new(&journal[..]), &mut controller).expect("replays"));
        })
    });
    group.finish();
}

criterion_group!(benches, changes, replay_journal);
criterion_main!(benches);
