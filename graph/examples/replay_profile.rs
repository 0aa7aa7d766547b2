//! Replays the bench's journal once (event by event) and prints the throughput: a small binary
//! to profile the per-event path with `perf` or `valgrind --tool=callgrind`.
//!
//! `cargo run --release -p ichor-graph --example replay_profile -- [events]`
#![allow(missing_docs, clippy::unwrap_used, clippy::print_stdout)]

#[path = "../tests/it/toy/mod.rs"]
mod toy;

use std::time::Instant;

use ichor_graph::{Event, JournalReader, JournalWriter, replay};
use toy::*;

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
            3 => Event::Applied(user(
                &format!("u{}", i % 1_000),
                (i / 100).is_multiple_of(2),
                &format!("n{i}"),
            )),
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

/// Nanoseconds this thread spent on a CPU (Linux), to measure on a loaded machine.
fn cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn main() {
    let events: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let bytes = journal(events);
    let mut t = toy();
    let started = Instant::now();
    let cpu = cpu_ns();
    let report = replay(JournalReader::new(&bytes[..]), &mut t.graph).unwrap();
    let events = report.events;
    drop(report);
    let elapsed = started.elapsed();
    let cpu = cpu_ns().zip(cpu).map(|(b, a)| (b - a) as f64 / 1e9);
    println!(
        "{events} events in {elapsed:?} wall: {:.0} events/s; on-CPU {cpu:.3?} s: {:.0} events/s",
        events as f64 / elapsed.as_secs_f64(),
        cpu.map_or(0.0, |c| events as f64 / c),
    );
    let started = Instant::now();
    for a in JournalReader::new(&bytes[..]) {
        std::hint::black_box(a.unwrap());
    }
    println!("journal parsing alone: {:?}", started.elapsed());
}
