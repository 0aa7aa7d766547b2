//! How the identity graph's cost per event grows with the installation: one IchorUser change and
//! one TalosCluster change folded and evaluated, on installations of 1,000, 10,000 and 50,000
//! IchorUsers with 50 or 500 Ichor-issuer TalosClusters (three control-plane machines each).
//! The cost per event should stay flat: within 2x from 1,000 to 10,000 users.
//!
//! `ICHOR_SCALE_SIZES` picks the installations, as `users x clusters` pairs separated by commas
//! (default `1000x50,10000x50,50000x50,1000x500,10000x500`); `hack/bench/graph-scale.sh` runs
//! it and writes the table.
#![allow(missing_docs, clippy::expect_used, clippy::unwrap_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use ichor_controller_core::sim::Sim;
use ichor_controller_core::sim::workload::{Workload, generate};
use ichor_graph::{Event, ObjectKey};
use ichor_renderers::contract::NAMESPACE;
use serde_json::json;

/// The controller binary's allocator, so the numbers are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DEFAULT_SIZES: &str = "1000x50,10000x50,50000x50,1000x500,10000x500";

fn sizes() -> Vec<(usize, usize)> {
    let spec = std::env::var("ICHOR_SCALE_SIZES").unwrap_or_else(|_| DEFAULT_SIZES.to_owned());
    spec.split(',')
        .filter_map(|pair| {
            let (u, c) = pair.trim().split_once('x')?;
            Some((u.parse().ok()?, c.parse().ok()?))
        })
        .collect()
}

fn settled(users: usize, clusters: usize) -> Sim<std::io::Sink> {
    let mut sim = Sim::new(std::io::sink()).expect("the graph builds");
    sim.record = false;
    let w = Workload {
        users,
        clusters,
        machines: clusters * 3,
        events: 0,
        ..Workload::default()
    };
    generate(&mut sim, w).expect("the installation settles");
    sim
}

fn scale(c: &mut Criterion) {
    let mut group = c.benchmark_group("scale");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    group.sample_size(30);
    for (users, clusters) in sizes() {
        let mut sim = settled(users, clusters);
        let id = format!("{users}x{clusters}");
        let mut i = 0u64;
        group.bench_function(BenchmarkId::new("user change", &id), |b| {
            b.iter(|| {
                i += 1;
                let name = format!("user-{:05}", i % users as u64);
                let key = ObjectKey::new("IchorUser", NAMESPACE, name);
                let mut u = sim
                    .controller()
                    .world()
                    .get(&key)
                    .cloned()
                    .expect("the user exists");
                u.value["spec"]["displayName"] = json!(format!("renamed {i}"));
                u.value["metadata"]["generation"] = json!(i + 10);
                let c = sim.controller_mut();
                c.fold(Event::Applied(u));
                black_box(c.evaluate());
            })
        });
        let mut j = 0u64;
        group.bench_function(BenchmarkId::new("cluster change", &id), |b| {
            b.iter(|| {
                j += 1;
                let name = format!("cluster-{:03}", j % clusters as u64);
                let key = ObjectKey::new("TalosCluster", NAMESPACE, name);
                let mut o = sim
                    .controller()
                    .world()
                    .get(&key)
                    .cloned()
                    .expect("the cluster exists");
                o.value["spec"]["authentication"]["ichor"]["url"] =
                    json!(format!("https://ichor-{j}.example.com"));
                let c = sim.controller_mut();
                c.fold(Event::Applied(o));
                black_box(c.evaluate());
            })
        });
    }
    group.finish();
}

criterion_group!(benches, scale);
criterion_main!(benches);
