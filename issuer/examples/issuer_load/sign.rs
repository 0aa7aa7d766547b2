//! `sign --threads T --seconds S`: the signing limit the refresh grants are set against, measured
//! with the issuer's own RS256 signer ([`Rs256Signer`], the key `setup` writes) on `T` threads
//! signing flat out, the input as long as an ID token's signing input. Prints the rate and the
//! process's CPU per signature, so `hack/bench/issuer.sh` can set the issuer's CPU per grant
//! against it as it does against `openssl speed`.

use anyhow::{Context as _, Result};
use ichor_issuer::keys::Rs256Signer;
use std::time::{Duration, Instant};

const RSA_PEM: &str = include_str!("../../tests/fixtures/rsa3072-1.pkcs8.pem");

/// The process's user + system CPU so far, from `/proc/self/stat` (in clock ticks).
fn cpu_ticks() -> Result<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").context("read /proc/self/stat")?;
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let rest = stat.rsplit_once(')').context("parse /proc/self/stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| -> Result<u64> {
        fields
            .get(i)
            .context("short /proc/self/stat")?
            .parse()
            .context("parse /proc/self/stat")
    };
    Ok(field(11)? + field(12)?)
}

pub(crate) fn run(threads: usize, seconds: u64) -> Result<()> {
    let signer = Rs256Signer::from_pem(RSA_PEM.as_bytes()).context("load the test key")?;
    let input: Vec<u8> = b"abcdefghijklmnopqrstuvwxyz"
        .iter()
        .copied()
        .cycle()
        .take(600)
        .collect();
    for _ in 0..20 {
        signer.sign(&input)?;
    }
    let duration = Duration::from_secs(seconds);
    let hz: f64 = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0);
    let (ticks0, start) = (cpu_ticks()?, Instant::now());
    let counts = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                scope.spawn(|| -> Result<u64> {
                    let mut n = 0u64;
                    while start.elapsed() < duration {
                        signer.sign(&input)?;
                        n += 1;
                    }
                    Ok(n)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .map_err(|_| anyhow::anyhow!("a signing thread panicked"))?
            })
            .collect::<Result<Vec<u64>>>()
    })?;
    let (elapsed, ticks) = (start.elapsed().as_secs_f64(), cpu_ticks()? - ticks0);
    let total: u64 = counts.iter().sum();
    println!(
        "sign threads={} seconds={elapsed:.1} signatures={total} sign_per_s={:.1} cpu_ms_per_sig={:.3}",
        threads.max(1),
        total as f64 / elapsed,
        ticks as f64 / hz * 1000.0 / total.max(1) as f64
    );
    Ok(())
}
