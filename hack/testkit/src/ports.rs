//! Free TCP ports for processes the tests start and restart.
//!
//! A port asked of the kernel with `bind(…:0)` comes from the ephemeral range, the same range
//! every outgoing connection's local port is drawn from. A test that stops a server and starts it
//! again on the same port (the issuer's URL is fixed in the apiserver's configuration) can then
//! find the port taken by some unrelated connection in between. These ports are drawn from below
//! the ephemeral range instead, where no outgoing connection lands, and checked free when asked.

use std::net::Ipv4Addr;

use anyhow::{Context as _, bail};

/// The lowest port handed out: above the well-known and most registered service ports.
const LOWEST: u16 = 20_000;

/// How many candidates are tried before giving up.
const TRIES: usize = 200;

/// A TCP port free on 127.0.0.1 (free when asked; the caller binds it soon after), outside the
/// kernel's ephemeral range so it stays free across a restart of the process that holds it.
pub fn free_port() -> anyhow::Result<u16> {
    free_port_on(&[Ipv4Addr::LOCALHOST])
}

/// A TCP port free on every one of `addresses` at once (free when asked).
pub fn free_port_on(addresses: &[Ipv4Addr]) -> anyhow::Result<u16> {
    free_ports_on(addresses, 1)
}

/// A port `p` such that `p` and `p + 1` are both free on 127.0.0.1 (free when asked).
pub fn free_port_pair() -> anyhow::Result<u16> {
    free_ports_on(&[Ipv4Addr::LOCALHOST], 2)
}

fn free_ports_on(addresses: &[Ipv4Addr], run: u16) -> anyhow::Result<u16> {
    let addresses = if addresses.is_empty() {
        &[Ipv4Addr::LOCALHOST][..]
    } else {
        addresses
    };
    let (low, high) = candidate_range(ephemeral_low());
    let span = u32::from(high - low) + 1 - u32::from(run - 1);
    for _ in 0..TRIES {
        let offset = rand::random_range(0..span);
        let first = low + u16::try_from(offset).context("a port offset beyond u16")?;
        let free = (0..run).all(|i| {
            addresses
                .iter()
                .all(|a| std::net::TcpListener::bind((*a, first + i)).is_ok())
        });
        if free {
            return Ok(first);
        }
    }
    bail!("no run of {run} free port(s) on all of {addresses:?} in {low}..={high} after {TRIES} tries")
}

/// The first port of the kernel's ephemeral range (Linux's default when it cannot be read).
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// The ports drawn from: `LOWEST` up to just below the ephemeral range, or, when that range
/// starts too low to leave a thousand ports, the ports above it.
fn candidate_range(ephemeral_low: u16) -> (u16, u16) {
    if ephemeral_low > LOWEST + 1_000 {
        (LOWEST, ephemeral_low - 1)
    } else {
        (LOWEST, u16::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_come_from_below_the_ephemeral_range_and_a_pair_is_free_together() {
        let low = ephemeral_low();
        for _ in 0..20 {
            let port = free_port().unwrap();
            assert!(port >= LOWEST, "{port}");
            if low > LOWEST + 1_000 {
                assert!(port < low, "{port} is in the ephemeral range from {low}");
            }
            let pair = free_port_pair().unwrap();
            std::net::TcpListener::bind(("127.0.0.1", pair)).unwrap();
            std::net::TcpListener::bind(("127.0.0.1", pair + 1)).unwrap();
        }
    }

    #[test]
    fn a_narrow_or_missing_range_below_the_ephemeral_one_falls_back_above_it() {
        assert_eq!(candidate_range(32_768), (LOWEST, 32_767));
        assert_eq!(candidate_range(1_024), (LOWEST, u16::MAX));
        assert_eq!(candidate_range(LOWEST + 500), (LOWEST, u16::MAX));
    }

    #[test]
    fn a_port_held_by_a_listener_is_not_handed_out() {
        let held: Vec<_> = (0..50)
            .map(|_| std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, free_port().unwrap())).unwrap())
            .collect();
        let taken: Vec<u16> = held.iter().map(|l| l.local_addr().unwrap().port()).collect();
        for _ in 0..50 {
            assert!(!taken.contains(&free_port().unwrap()));
        }
    }
}
