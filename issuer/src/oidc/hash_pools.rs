//! The threads the sign-in's argon2id computations run on: a known device's check on a pool of
//! its own at the process's scheduling priority, every other sign-in's on a pool whose threads
//! ask the kernel for a lower one (nice [`SHARED_NICE`]).
//!
//! The gates ([`super::passwords::HashGate`]) bound how many computations run and wait; they
//! cannot say which of the running ones gets the cores. On a loaded node the known devices'
//! lane computes beside the checks already started in this process, in the other replicas on the
//! node, and beside everything else there (TLS, refresh grants, the flood's own connections).
//! Linux schedules threads by weight: a nice-0 thread weighs about nine times a nice-10 one, so a
//! known device's computation, the refresh grants and the request handling take the cores first
//! and the flood's checks use what is left, across processes too. When nothing else wants the
//! cores the lower priority costs nothing: a niced thread runs at full speed on an idle core.
//!
//! Raising one's own nice value needs no privilege. Where it fails (another platform, a seccomp
//! profile that refuses `setpriority`) it is logged once and the pool runs at the normal priority.
//! A pool that cannot be built (no thread could be started) falls back to rayon's global pool, as
//! argon2 uses by default.
//!
//! Every computation through [`run`] is counted while it runs ([`running`], and the most at once
//! since the process started, [`peak_running`]): the number the gates bound, read by the tests
//! that flood them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};

/// The nice value the shared checks' threads run at: low enough that a known device's check,
/// at the process's own priority, gets about nine tenths of a contended core.
pub const SHARED_NICE: i32 = 10;

/// Which pool a password check computes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    /// A known device's check (the lane): the process's own scheduling priority.
    Lane,
    /// Every other sign-in's check: [`SHARED_NICE`] above the process's priority.
    Shared,
}

/// Runs `f` on `pool`'s threads, so the argon2id computation it makes (and the rayon work argon2
/// spreads its lanes over) is scheduled at that pool's priority. Blocks the calling thread until
/// `f` returns: call it from a blocking task.
pub fn run<R: Send>(pool: Pool, f: impl FnOnce() -> R + Send) -> R {
    let _counted = Running::start();
    match threads(pool) {
        Some(threads) => threads.install(f),
        None => f(),
    }
}

static RUNNING: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// One computation counted in [`RUNNING`] until dropped.
struct Running;

impl Running {
    fn start() -> Running {
        let now = RUNNING.fetch_add(1, Ordering::AcqRel) + 1;
        PEAK.fetch_max(now, Ordering::AcqRel);
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How many computations run through [`run`] now, in this process.
pub fn running() -> usize {
    RUNNING.load(Ordering::Acquire)
}

/// The most computations that ran through [`run`] at once since the process started.
pub fn peak_running() -> usize {
    PEAK.load(Ordering::Acquire)
}

fn threads(pool: Pool) -> Option<&'static rayon::ThreadPool> {
    static LANE: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    static SHARED: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    let (cell, name, nice) = match pool {
        Pool::Lane => (&LANE, "argon2-lane", 0),
        Pool::Shared => (&SHARED, "argon2-shared", SHARED_NICE),
    };
    cell.get_or_init(|| build(name, nice)).as_ref()
}

fn build(name: &'static str, nice: i32) -> Option<rayon::ThreadPool> {
    let built = rayon::ThreadPoolBuilder::new()
        .thread_name(move |i| format!("{name}-{i}"))
        .start_handler(move |_| {
            if nice != 0 {
                lower_priority(nice);
            }
        })
        .build();
    match built {
        Ok(pool) => Some(pool),
        Err(e) => {
            tracing::warn!(pool = name, error = %e, "could not start the password check threads; using the process-wide pool");
            None
        }
    }
}

/// Raises the calling thread's nice value by `by` (Linux keeps one per thread).
fn lower_priority(by: i32) {
    static FAILED: Once = Once::new();
    if let Err(e) = nice_thread(by) {
        FAILED.call_once(|| {
            tracing::warn!(error = %e, "could not lower the priority of the shared password check threads; a flood's checks compete with known devices as equals");
        });
    }
}

#[cfg(target_os = "linux")]
fn nice_thread(by: i32) -> std::io::Result<()> {
    use rustix::process::{getpriority_process, setpriority_process};
    let me = Some(rustix::thread::gettid());
    let now = getpriority_process(me)?;
    setpriority_process(me, now.saturating_add(by).min(19))?;
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn nice_thread(_by: i32) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "per-thread priorities are set on Linux only",
    ))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn my_nice() -> i32 {
        rustix::process::getpriority_process(Some(rustix::thread::gettid())).expect("getpriority")
    }

    #[test]
    fn shared_checks_run_niced_below_the_caller_and_the_lane_at_its_priority() {
        let caller = my_nice();
        let (lane, lane_thread) = run(Pool::Lane, || {
            (my_nice(), std::thread::current().name().map(str::to_owned))
        });
        let (shared, shared_thread) = run(Pool::Shared, || {
            (my_nice(), std::thread::current().name().map(str::to_owned))
        });
        assert_eq!(lane, caller, "the lane runs at the process's priority");
        assert_eq!(
            shared,
            (caller + SHARED_NICE).min(19),
            "the shared checks run niced"
        );
        assert!(lane_thread.is_some_and(|n| n.starts_with("argon2-lane-")));
        assert!(shared_thread.is_some_and(|n| n.starts_with("argon2-shared-")));
        assert_eq!(my_nice(), caller, "the caller's own priority is untouched");
    }

    #[test]
    fn a_computation_is_counted_while_it_runs() {
        let inside = run(Pool::Shared, running);
        assert!(inside >= 1, "{inside} running inside");
        assert!(peak_running() >= inside);
    }

    #[test]
    fn the_work_argon2_spreads_stays_on_the_pool_that_runs_the_check() {
        use rayon::prelude::*;
        let priorities: Vec<i32> = run(Pool::Shared, || {
            (0..8).into_par_iter().map(|_| my_nice()).collect()
        });
        let expected = (my_nice() + SHARED_NICE).min(19);
        assert!(priorities.iter().all(|&p| p == expected), "{priorities:?}");
    }
}
