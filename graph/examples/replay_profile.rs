//! Replays the bench's journal once (event by event) and prints the throughput: a small binary
//! to profile the per-event path with `perf` or `valgrind --tool=callgrind`.
//!
//! `cargo run --release -p ichor-graph --example replay_profile -- [events]`
#![allow(missing_docs, clippy::unwrap_used, clippy::print_stdout)]

#[path = "../tests/it/toy/mod.rs"]
mod toy;

use std::time::Instant;

use ichor_graph::{JournalReader, replay};
use toy::*;

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
    let bytes = churn_journal(events);
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
