//! Open-loop load for the benchmarks (feature `load`): one request started every 1/rate s
//! whatever the others do, each one's latency measured from its scheduled start (no
//! coordinated omission), and the percentiles of what came back.

use std::future::Future;
use std::time::{Duration, Instant};

/// A number from the environment variable `name`, or `default` when unset or not a number.
pub fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The `p`-th percentile (nearest rank) of `sorted`; zero when empty.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `d` in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// What one open-loop run gave: each request's latency and outcome, in completion order, and
/// the wall time from the first scheduled start to the last answer.
#[derive(Debug)]
pub struct Run<T> {
    /// Latency from the scheduled start, and what the request returned.
    pub results: Vec<(Duration, T)>,
    /// From the first scheduled start to the last answer.
    pub wall: Duration,
}

/// Starts `total` requests at `rate` per second, request `i` being `request(i)` spawned on the
/// current tokio runtime at its scheduled time, and waits for them all.
///
/// # Panics
/// When a request task panics (a bug of the benchmark).
pub async fn open_loop<F, Fut, T>(rate: u64, total: usize, mut request: F) -> Run<T>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let period = Duration::from_nanos(1_000_000_000 / rate.max(1));
    let mut tasks = tokio::task::JoinSet::new();
    let begin = Instant::now();
    for i in 0..total {
        let scheduled = begin + period * u32::try_from(i).unwrap_or(u32::MAX);
        tokio::time::sleep_until(scheduled.into()).await;
        let answer = request(i);
        tasks.spawn(async move {
            let outcome = answer.await;
            (scheduled.elapsed(), outcome)
        });
    }
    let mut results = Vec::with_capacity(total);
    while let Some(done) = tasks.join_next().await {
        results.push(done.unwrap_or_else(|e| panic!("a request task failed: {e}")));
    }
    Run {
        results,
        wall: begin.elapsed(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn percentiles_are_nearest_ranks() {
        let sorted: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&sorted, 50.0), Duration::from_millis(50));
        assert_eq!(percentile(&sorted, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&sorted, 100.0), Duration::from_millis(100));
        assert_eq!(percentile(&[], 99.0), Duration::ZERO);
        assert!((ms(Duration::from_micros(1500)) - 1.5).abs() < 1e-9);
    }

    #[tokio::test]
    async fn an_open_loop_starts_every_request_on_schedule_whatever_the_others_take() {
        // Each request takes 200 ms; started every 10 ms, all 20 finish in about 390 ms, not 4 s.
        let run = open_loop(100, 20, |i| async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            i
        })
        .await;
        let mut seen: Vec<usize> = run.results.iter().map(|(_, i)| *i).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..20).collect::<Vec<_>>());
        assert!(run.wall < Duration::from_secs(2), "{:?}", run.wall);
        assert!(
            run.results
                .iter()
                .all(|(took, _)| *took >= Duration::from_millis(200))
        );
    }
}
