//! Engine benchmarks on the toy graph at the real graph's scale: 1,000 users, 50 clusters,
//! 150 machines. Run briefly: `cargo bench -p ichor-graph -- --quick`.
#![allow(missing_docs, clippy::unwrap_used)]

#[path = "../tests/it/toy/mod.rs"]
mod toy;

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ichor_graph::{Event, JournalReader, JournalWriter, World, replay};
use toy::*;

fn converged() -> (Toy, World) {
    let mut t = toy();
    let mut world = World::new();
    for e in populate(1_000, 50) {
        world.apply(e);
    }
    let mut rv = 0;
    loop {
        let eval = t.graph.evaluate(&mut world);
        if eval.actions.is_empty() {
            break;
        }
        for a in &eval.actions {
            rv += 1;
            for e in perform(&world, a, rv) {
                world.apply(e);
            }
        }
    }
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

fn journal(events: usize) -> Vec<u8> {
    let mut w = JournalWriter::new(Vec::new());
    let mut n = 0;
    for e in populate(1_000, 50) {
        w.append(&e).unwrap();
        n += 1;
    }
    let mut i = 0u64;
    while n < events {
        i += 1;
        let e = match i % 100 {
            0 => Event::Applied(cluster(&format!("c{}", i % 50), &format!("https://e{i}"))),
            1 => Event::Applied(machine(
                &format!("c{}-m1", i % 50),
                &format!("c{}", (i / 7) % 50),
                "worker",
            )),
            2 => Event::Tick(at(1_000 + i as i64)),
            // One in a hundred events enables or disables a user, which recomputes the
            // enabled-count aggregate over all 1,000 users.
            3 => Event::Applied(user(
                &format!("u{}", i % 1_000),
                (i / 100).is_multiple_of(2),
                &format!("n{i}"),
            )),
            // The rest edit a user's display name.
            _ => Event::Applied(user(
                &format!("u{}", i % 1_000),
                (i % 1_000).is_multiple_of(2),
                &format!("n{i}"),
            )),
        };
        w.append(&e).unwrap();
        n += 1;
    }
    w.into_inner()
}

fn replay_throughput(c: &mut Criterion) {
    let bytes = journal(100_000);
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
