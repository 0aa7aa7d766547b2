//! Cost of one request from a new source (and of one sign-in of a new name) when the per-source
//! bucket table (and the back-off table) is full, next to the same on an empty table: eviction
//! must be O(1) amortised, so the two should be within a small factor, whatever the table's size
//! (a full table of 1,024 sources beside the full one of 65,536). The previous eviction (a
//! retain over the whole table, then a scan for the oldest) runs beside them for scale. The
//! empty-table cases start each request on a new table, so they include its first allocation.
//!
//! `cargo bench -p ichor-issuer --bench limits` (`hack/bench/limits.sh` writes the ratios).

use std::{
    collections::HashMap,
    hint::black_box,
    net::{IpAddr, Ipv6Addr},
    time::Duration,
};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use ichor_issuer::oidc::limits::{
    AttemptOutcome, BACKOFF_CAPACITY, BUCKET_CAPACITY, BucketPolicy, SourceKey, TokenBuckets, UserBackoff,
};
use jiff::Timestamp;

/// The `n`-th /64 of one /32: a client with a /48 has 65,536 of them, enough to keep the table
/// full by itself; the bench needs a few more to go on inserting new ones.
fn source(n: u64) -> SourceKey {
    let [.., a, b, c, d] = n.to_be_bytes();
    SourceKey::of(IpAddr::V6(Ipv6Addr::new(
        0x2001,
        0xdb8,
        u16::from_be_bytes([a, b]),
        u16::from_be_bytes([c, d]),
        0,
        0,
        0,
        1,
    )))
}

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// A table of `capacity` sources, full, each with one failure.
fn full_buckets(capacity: usize) -> TokenBuckets<SourceKey> {
    let mut buckets = TokenBuckets::with_capacity(BucketPolicy::TOKEN_FAILURES, capacity);
    for n in 0..capacity as u64 {
        let _ = buckets.reserve(source(n), at(0));
    }
    buckets
}

/// The eviction this crate used before: when full, keep the buckets that are not full, then
/// remove the one touched longest ago, both by walking the whole table.
struct ScanningBuckets {
    buckets: HashMap<SourceKey, (f64, Timestamp)>,
}

impl ScanningBuckets {
    fn take(&mut self, key: SourceKey, now: Timestamp) {
        let policy = BucketPolicy::TOKEN_FAILURES;
        if self.buckets.len() >= BUCKET_CAPACITY && !self.buckets.contains_key(&key) {
            self.buckets.retain(|_, (t, last)| {
                let elapsed = now.duration_since(*last).as_secs_f64().max(0.0);
                (*t + elapsed * policy.per_second) < policy.burst
            });
            if self.buckets.len() >= BUCKET_CAPACITY {
                let oldest = self.buckets.iter().min_by_key(|(_, (_, l))| *l).map(|(k, _)| *k);
                if let Some(k) = oldest {
                    self.buckets.remove(&k);
                }
            }
        }
        self.buckets.insert(key, (policy.burst - 1.0, now));
    }
}

fn source_buckets(c: &mut Criterion) {
    let mut group = c.benchmark_group("failure_from_a_new_source");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    group.bench_function("empty_table", |b| {
        let mut n = 0u64;
        b.iter_batched_ref(
            || TokenBuckets::new(BucketPolicy::TOKEN_FAILURES),
            |buckets| {
                n += 1;
                black_box(buckets.reserve(source(n), at(1)))
            },
            BatchSize::SmallInput,
        )
    });
    for (name, capacity) in [("full_table_of_1024", 1024), ("full_table", BUCKET_CAPACITY)] {
        let mut buckets = full_buckets(capacity);
        let mut n = capacity as u64;
        group.bench_function(name, |b| {
            b.iter(|| {
                n += 1;
                black_box(buckets.reserve(source(n), at(1)))
            })
        });
    }
    let mut scanning = ScanningBuckets {
        buckets: (0..BUCKET_CAPACITY as u64)
            .map(|n| (source(n), (59.0, at(0))))
            .collect(),
    };
    let mut n = BUCKET_CAPACITY as u64;
    group.sample_size(10);
    group.bench_function("full_table_previous_scan", |b| {
        b.iter(|| {
            n += 1;
            scanning.take(source(n), at(1));
        })
    });
    group.finish();
}

fn backoff(c: &mut Criterion) {
    let mut group = c.benchmark_group("sign_in_of_a_new_name");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    let attempt = |table: &mut UserBackoff, n: u64| {
        let name = format!("guess-{n}");
        black_box(table.admit(&name, at(1)));
        table.finish(&name, AttemptOutcome::Failure, at(1));
    };
    group.bench_function("empty_table", |b| {
        let mut n = 0u64;
        b.iter_batched_ref(
            UserBackoff::new,
            |table| {
                n += 1;
                attempt(table, n)
            },
            BatchSize::SmallInput,
        )
    });
    let mut table = UserBackoff::new();
    for n in 0..BACKOFF_CAPACITY as u64 {
        attempt(&mut table, n);
    }
    let mut n = BACKOFF_CAPACITY as u64;
    group.bench_function("full_table", |b| {
        b.iter(|| {
            n += 1;
            attempt(&mut table, n)
        })
    });
    group.finish();
}

criterion_group!(benches, source_buckets, backoff);
criterion_main!(benches);
