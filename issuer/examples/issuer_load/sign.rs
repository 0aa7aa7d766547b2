//! `sign --threads T --seconds S`: the signing limit the refresh grants are set against, measured
//! with the issuer's own RS256 signer ([`Rs256Signer`], the key `setup` writes) on `T` threads
//! signing flat out, the input as long as an ID token's signing input. Prints the rate and the
//! count; `hack/bench/issuer.sh` times the process (`time`, as it does the load generator) for
//! the CPU of one signature.

use crate::setup::RSA_PEM;
use anyhow::{Context as _, Result};
use ichor_issuer::keys::Rs256Signer;
use std::time::{Duration, Instant};

pub(crate) fn run(threads: usize, seconds: u64) -> Result<()> {
    let signer = Rs256Signer::from_pem(RSA_PEM.as_bytes()).context("load the test key")?;
    let input: Vec<u8> = b"abcdefghijklmnopqrstuvwxyz"
        .iter()
        .copied()
        .cycle()
        .take(600)
        .collect();
    let (threads, duration, start) = (threads.max(1), Duration::from_secs(seconds), Instant::now());
    let counts = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
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
    let elapsed = start.elapsed().as_secs_f64();
    let total: u64 = counts.iter().sum();
    println!(
        "sign threads={threads} seconds={elapsed:.1} signatures={total} sign_per_s={:.1}",
        total as f64 / elapsed
    );
    Ok(())
}
