//! Engine benchmarks on the toy graph at the real graph's scale: 1,000 users, 50 clusters,
//! 150 machines. Run briefly: `cargo bench -p ichor-graph -- --quick`.
#![allow(missing_docs, clippy::unwrap_used)]

#[path = "../tests/it/toy/mod.rs"]
mod toy;

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ichor_graph::{Event, JournalReader, World, replay};
use toy::*;

fn converged() -> (Toy, World) {
    let mut t = toy();
    let mut world = world_of(populate(1_000, 50));
    settle(&mut t.graph, &mut world, &mut 0, 100).expect("a fixed point");
    (t, world)
}

fn one_object_change(c: &mut Criterion) {
    let (mut t, mut world) = converged();
    let mut i = 0u64;
    c.bench_function("one user change (1000 users, 50 clusters, 150 machines)", |b| {
        b.iter(|| {
            i += 1;
            let name = format!("u{}", i % 1_000);
            world.apply(Event::Applied(user(
                &name,
                (i % 1_000).is_multiple_of(2),
                &format!("name-{i}"),
            )));
            black_box(t.graph.evaluate(&mut world).actions.len())
        });
    });
    let mut j = 0u64;
    c.bench_function("one cluster change (3 machines follow)", |b| {
        b.iter(|| {
            j += 1;
            world.apply(Event::Applied(cluster(
                &format!("c{}", j % 50),
                &format!("https://e{j}"),
            )));
            black_box(t.graph.evaluate(&mut world).actions.len())
        });
    });
}

fn replay_throughput(c: &mut Criterion) {
    let bytes = churn_journal(100_000);
    let mut t = toy();
    let mut g = c.benchmark_group("replay");
    g.sample_size(10);
    g.throughput(Throughput::Elements(100_000));
    g.bench_function("100000-event journal, event by event", |b| {
        b.iter(|| {
            black_box(
                replay(JournalReader::new(&bytes[..]), &mut t.graph)
                    .unwrap()
                    .actions
                    .len(),
            )
        });
    });
    g.finish();
}

criterion_group!(benches, one_object_change, replay_throughput);
criterion_main!(benches);
