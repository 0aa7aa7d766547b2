//! Waiting for a real system to reach a state, bounded: the one poll loop of the tests.

use std::time::{Duration, Instant};

/// How often [`until`] probes.
pub const PROBE_EVERY: Duration = Duration::from_millis(200);

/// Calls `probe` every [`PROBE_EVERY`] until it returns `Ok(Some(value))`, for at most
/// `timeout`; then an error naming `what` with the last error the probe returned (a probe's
/// error is not fatal: the system may not be up yet).
///
/// # Errors
/// The timeout, with the last probe error.
pub fn until<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut() -> anyhow::Result<Option<T>>,
) -> anyhow::Result<T> {
    let deadline = Instant::now() + timeout;
    let mut last = String::from("(no error: the state was not reached)");
    loop {
        match probe() {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last = format!("{e:#}"),
        }
        if Instant::now() >= deadline {
            anyhow::bail!("{what}: not reached within {timeout:?}; last probe: {last}");
        }
        std::thread::sleep(PROBE_EVERY);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_probe_that_succeeds_late_is_waited_for_and_one_that_never_does_times_out_with_its_error() {
        let mut calls = 0;
        let v = until("three calls", Duration::from_secs(5), || {
            calls += 1;
            Ok((calls >= 3).then_some(calls))
        })
        .unwrap();
        assert_eq!(v, 3);
        let e = until::<()>("never", Duration::from_millis(300), || anyhow::bail!("refused")).unwrap_err();
        assert!(
            e.to_string().contains("never") && e.to_string().contains("refused"),
            "{e}"
        );
    }
}
