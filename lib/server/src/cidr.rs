//! IP networks in CIDR notation (`10.0.0.0/8`, `fd00::/8`), for `--trusted-proxy`: the peers
//! whose `X-Forwarded-For` is believed when deciding a request's source (back-off per source).
//! The arithmetic is `ipnet`'s; this module adds the strict reading of the flag (a prefix is
//! required, host bits are refused, each mistake named), the walk of `X-Forwarded-For`, and the
//! warning about forwarding headers from an internal peer that is not trusted
//! ([`UntrustedForwarders`]). Trust exact proxy addresses (`10.0.12.7/32`), not ranges: anyone
//! inside a trusted range can forge the header and take another client's source.

use std::collections::{HashSet, VecDeque};
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use ipnet::IpNet;

/// An IP network: an address with its host bits zero, and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr(IpNet);

/// Why a CIDR was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    /// No `/`.
    #[error("{0:?} is not in CIDR notation; write an address, '/', and a prefix length, like 10.0.12.7/32")]
    NoPrefix(String),
    /// The address part is not an IP address.
    #[error("{0:?} is not an IPv4 or IPv6 address")]
    BadAddress(String),
    /// The prefix length is not a number in range.
    #[error("prefix length {found:?} is not a number from 0 to {max}")]
    BadPrefix {
        /// What was given.
        found: String,
        /// 32 for IPv4, 128 for IPv6.
        max: u8,
    },
    /// The address has bits set after the prefix.
    #[error("{given} has host bits set; the network is {network}")]
    HostBits {
        /// What was given.
        given: String,
        /// The network it lies in.
        network: String,
    },
}

impl Cidr {
    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.0.prefix_len()
    }

    /// The network address.
    pub fn network(&self) -> IpAddr {
        self.0.network()
    }

    /// Whether `addr` lies in the network. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, as a
    /// dual-stack socket reports IPv4 peers) is matched as the IPv4 address.
    pub fn contains(&self, addr: IpAddr) -> bool {
        self.0.contains(&addr.to_canonical())
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, prefix) = s
            .split_once('/')
            .ok_or_else(|| CidrError::NoPrefix(s.to_owned()))?;
        let address: IpAddr = addr.parse().map_err(|_| CidrError::BadAddress(addr.to_owned()))?;
        let max = if address.is_ipv4() { 32 } else { 128 };
        let bad_prefix = || CidrError::BadPrefix {
            found: prefix.to_owned(),
            max,
        };
        if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad_prefix());
        }
        let len: u8 = prefix.parse().map_err(|_| bad_prefix())?;
        let net = IpNet::new(address, len).map_err(|_| bad_prefix())?;
        if net.trunc() != net {
            return Err(CidrError::HostBits {
                given: s.to_owned(),
                network: net.trunc().to_string(),
            });
        }
        Ok(Cidr(net))
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The most addresses a trusted network holds without [`TrustedProxies::wide`] naming it (a /24
/// of IPv4, a /120 of IPv6).
pub const WIDE_NETWORK: u32 = 256;

/// The proxies whose `X-Forwarded-For` is believed: a list of networks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    networks: Vec<Cidr>,
}

impl TrustedProxies {
    /// No trusted proxy: the peer address is always the source.
    pub fn none() -> Self {
        Self::default()
    }

    /// These networks.
    pub fn new(networks: Vec<Cidr>) -> Self {
        TrustedProxies { networks }
    }

    /// Parses entries like `10.0.12.7/32` or `fd00::7/128` (surrounding white space ignored).
    ///
    /// # Errors
    /// The first malformed entry.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, CidrError> {
        entries
            .iter()
            .map(|e| e.as_ref().trim().parse::<Cidr>())
            .collect::<Result<Vec<_>, _>>()
            .map(Self::new)
    }

    /// Whether `ip` is a trusted proxy.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.networks.iter().any(|n| n.contains(ip))
    }

    /// The networks of more than [`WIDE_NETWORK`] addresses: every host inside one can forge
    /// `X-Forwarded-For` and be taken for any client, so they deserve a warning at start-up.
    pub fn wide(&self) -> Vec<Cidr> {
        self.networks
            .iter()
            .filter(|n| {
                let bits = if n.network().is_ipv4() { 32 } else { 128 };
                u32::from(bits - n.prefix()) > WIDE_NETWORK.trailing_zeros()
            })
            .copied()
            .collect()
    }
}

/// The address a request comes from. The peer, unless the peer is a trusted proxy: then the
/// `X-Forwarded-For` chain (all header values, in order) is walked from the right, skipping
/// trusted proxies, and the first untrusted address is the source. A malformed entry stops the
/// walk at the last good hop (a trusted proxy), so a forged value never wins; `None` when the
/// peer is unknown.
pub fn source_address(
    peer: Option<IpAddr>,
    forwarded_for: &[&str],
    trusted: &TrustedProxies,
) -> Option<IpAddr> {
    let peer = peer?.to_canonical();
    if !trusted.contains(peer) {
        return Some(peer);
    }
    let hops = forwarded_for.iter().flat_map(|v| v.split(',')).map(str::trim);
    let mut source = peer;
    for hop in hops.collect::<Vec<_>>().into_iter().rev() {
        let Ok(ip) = hop.parse::<IpAddr>() else {
            break;
        };
        source = ip.to_canonical();
        if !trusted.contains(source) {
            break;
        }
    }
    Some(source)
}

/// Whether `ip` is an address a proxy inside the installation would have: private (RFC 1918,
/// unique local `fc00::/7`), shared (`100.64.0.0/10`, RFC 6598), loopback or link-local.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip.to_canonical() {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_private() || v4.is_loopback() || v4.is_link_local() || (a == 100 && (64..128).contains(&b))
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            v6.is_loopback() || (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfe80
        }
    }
}

/// How many peers [`UntrustedForwarders`] remembers having warned about.
pub const FORWARDER_MEMORY: usize = 1024;
/// The least time between two warnings of [`UntrustedForwarders`].
pub const FORWARDER_WARNING_INTERVAL: Duration = Duration::from_secs(10);

/// The warnings about forwarding headers (`X-Forwarded-For`, `Forwarded`) from an internal peer
/// that is no trusted proxy: an ingress or load balancer left out of `--trusted-proxy`, behind
/// which every client shares the ingress's address and so its per-source limits.
///
/// Each such peer is warned about once; the peers warned about are remembered up to
/// [`FORWARDER_MEMORY`] (the oldest forgotten first), and at most one warning is logged per
/// [`FORWARDER_WARNING_INTERVAL`] (a peer not warned about for that reason is warned about at a
/// later request). The header values are never logged.
#[derive(Debug)]
pub struct UntrustedForwarders {
    state: Mutex<WarnedPeers>,
}

#[derive(Debug, Default)]
struct WarnedPeers {
    warned: HashSet<IpAddr>,
    order: VecDeque<IpAddr>,
    last: Option<Instant>,
}

impl Default for UntrustedForwarders {
    fn default() -> Self {
        Self::new()
    }
}

impl UntrustedForwarders {
    /// No peer warned about yet.
    pub fn new() -> Self {
        UntrustedForwarders {
            state: Mutex::new(WarnedPeers::default()),
        }
    }

    /// Notes a request from `peer` that carries forwarding headers (`forwarded`) and logs a
    /// warning when `peer` is an internal address ([`is_internal`]) outside `trusted` that has
    /// not been warned about, unless a warning was logged less than
    /// [`FORWARDER_WARNING_INTERVAL`] before `now`. Returns whether it warned.
    pub fn observe(&self, peer: IpAddr, forwarded: bool, trusted: &TrustedProxies, now: Instant) -> bool {
        let peer = peer.to_canonical();
        if !forwarded || trusted.contains(peer) || !is_internal(peer) {
            return false;
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.warned.contains(&peer)
            || state
                .last
                .is_some_and(|last| now.saturating_duration_since(last) < FORWARDER_WARNING_INTERVAL)
        {
            return false;
        }
        state.last = Some(now);
        if state.order.len() >= FORWARDER_MEMORY
            && let Some(oldest) = state.order.pop_front()
        {
            state.warned.remove(&oldest);
        }
        state.warned.insert(peer);
        state.order.push_back(peer);
        drop(state);
        tracing::warn!(
            %peer,
            "a request from {peer} carries X-Forwarded-For or Forwarded, but {peer} is not a trusted \
             proxy: the header is ignored, and every client behind that proxy shares its address and \
             so one per-source limit (garbage from one of them slows down the others' failures). If \
             it is your ingress or load balancer, add its exact address ({}) to --trusted-proxy (the \
             chart's issuer.trustedProxies); never a whole range, since anyone inside it could then \
             forge the header",
            exact(peer)
        );
        true
    }
}

/// `ip` as a one-address network (`/32` or `/128`).
fn exact(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(_) => format!("{ip}/32"),
        IpAddr::V6(_) => format!("{ip}/128"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> Cidr {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn an_ipv4_network_contains_its_addresses_and_not_others() {
        let net = cidr("10.1.0.0/16");
        assert!(net.contains("10.1.255.3".parse().unwrap()));
        assert!(!net.contains("10.2.0.1".parse().unwrap()));
        assert!(!net.contains("::1".parse().unwrap()));
    }

    #[test]
    fn an_ipv4_mapped_peer_matches_the_ipv4_network() {
        assert!(cidr("192.168.0.0/24").contains("::ffff:192.168.0.9".parse().unwrap()));
    }

    #[test]
    fn an_ipv6_network_and_the_zero_prefix_match() {
        assert!(cidr("fd00::/8").contains("fd12::1".parse().unwrap()));
        assert!(!cidr("fd00::/8").contains("fe80::1".parse().unwrap()));
        assert!(cidr("0.0.0.0/0").contains("8.8.8.8".parse().unwrap()));
        assert!(cidr("::/0").contains("2001:db8::1".parse().unwrap()));
        assert!(cidr("127.0.0.1/32").contains("127.0.0.1".parse().unwrap()));
    }

    #[test]
    fn refuses_host_bits_naming_the_network() {
        assert_eq!(
            "10.1.2.3/16".parse::<Cidr>(),
            Err(CidrError::HostBits {
                given: "10.1.2.3/16".into(),
                network: "10.1.0.0/16".into()
            })
        );
    }

    #[test]
    fn refuses_a_missing_or_out_of_range_prefix_and_a_bad_address() {
        assert!(matches!("10.0.0.0".parse::<Cidr>(), Err(CidrError::NoPrefix(_))));
        assert!(matches!(
            "10.0.0.0/33".parse::<Cidr>(),
            Err(CidrError::BadPrefix { max: 32, .. })
        ));
        assert!(matches!(
            "::/129".parse::<Cidr>(),
            Err(CidrError::BadPrefix { max: 128, .. })
        ));
        assert!(matches!(
            "10.0.0.0/+8".parse::<Cidr>(),
            Err(CidrError::BadPrefix { .. })
        ));
        assert!(matches!(
            "example/8".parse::<Cidr>(),
            Err(CidrError::BadAddress(_))
        ));
    }

    #[test]
    fn networks_wider_than_a_slash_24_are_wide() {
        let trusted = TrustedProxies::parse(&[
            "10.0.0.0/8",
            "10.0.12.7/32",
            "10.1.0.0/24",
            "10.2.0.0/23",
            "fd00::/64",
            "fd00::7/128",
        ])
        .expect("parse");
        let wide: Vec<String> = trusted.wide().iter().map(ToString::to_string).collect();
        assert_eq!(wide, ["10.0.0.0/8", "10.2.0.0/23", "fd00::/64"]);
    }

    #[test]
    fn internal_addresses_are_private_shared_loopback_and_link_local_ones() {
        for ip in [
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.1",
            "192.168.1.1",
            "100.64.0.1",
            "100.127.255.1",
            "127.0.0.6",
            "169.254.1.1",
            "::1",
            "fd12::1",
            "fc00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
        ] {
            assert!(is_internal(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "203.0.113.7",
            "2001:db8::1",
        ] {
            assert!(!is_internal(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn an_untrusted_internal_forwarder_is_warned_about_once_and_warnings_are_spaced() {
        let forwarders = UntrustedForwarders::new();
        let trusted = TrustedProxies::parse(&["10.0.12.7/32"]).expect("parse");
        let t0 = Instant::now();
        let ingress: IpAddr = "10.0.9.9".parse().unwrap();
        assert!(forwarders.observe(ingress, true, &trusted, t0));
        assert!(
            !forwarders.observe(ingress, true, &trusted, t0 + Duration::from_secs(60)),
            "once"
        );
        // Not warned about: no header, a trusted proxy, a public peer.
        let other: IpAddr = "10.0.9.10".parse().unwrap();
        let later = t0 + Duration::from_secs(120);
        assert!(!forwarders.observe(other, false, &trusted, later));
        assert!(!forwarders.observe("10.0.12.7".parse().unwrap(), true, &trusted, later));
        assert!(!forwarders.observe("203.0.113.7".parse().unwrap(), true, &trusted, later));
        // A second peer right after a warning waits for the interval, then is warned about.
        assert!(forwarders.observe(other, true, &trusted, later));
        let third: IpAddr = "fd00::3".parse().unwrap();
        assert!(!forwarders.observe(third, true, &trusted, later + Duration::from_secs(1)));
        assert!(forwarders.observe(third, true, &trusted, later + FORWARDER_WARNING_INTERVAL));
    }

    #[test]
    fn the_warned_peers_are_bounded_and_the_oldest_is_forgotten_first() {
        let forwarders = UntrustedForwarders::new();
        let trusted = TrustedProxies::none();
        let mut now = Instant::now();
        let peer = |n: usize| IpAddr::from([10, 1, (n / 256) as u8, (n % 256) as u8]);
        for n in 0..=FORWARDER_MEMORY {
            now += FORWARDER_WARNING_INTERVAL;
            assert!(forwarders.observe(peer(n), true, &trusted, now), "peer {n}");
        }
        let state = forwarders.state.lock().unwrap();
        assert_eq!(state.warned.len(), FORWARDER_MEMORY);
        assert_eq!(state.order.len(), FORWARDER_MEMORY);
        assert!(!state.warned.contains(&peer(0)), "the oldest was forgotten");
        drop(state);
        now += FORWARDER_WARNING_INTERVAL;
        assert!(
            forwarders.observe(peer(0), true, &trusted, now),
            "and is warned about again"
        );
    }

    #[test]
    fn forwarded_for_is_believed_only_from_a_trusted_proxy() {
        let trusted = TrustedProxies::parse(&["10.0.0.0/8", "fd00::/8"]).expect("parse");
        let proxy: IpAddr = "10.1.2.3".parse().expect("ip");
        let client: IpAddr = "203.0.113.7".parse().expect("ip");
        assert_eq!(
            source_address(Some(client), &["198.51.100.1"], &trusted),
            Some(client),
            "an untrusted peer's header is ignored"
        );
        assert_eq!(
            source_address(Some(proxy), &["198.51.100.1, 203.0.113.7, 10.9.9.9"], &trusted),
            Some(client),
            "the rightmost untrusted hop is the source; the forged leftmost entry is ignored"
        );
        assert_eq!(
            source_address(Some(proxy), &["203.0.113.7", "10.9.9.9"], &trusted),
            Some(client),
            "several header lines form one chain"
        );
        assert_eq!(source_address(Some(proxy), &["garbage"], &trusted), Some(proxy));
        assert_eq!(source_address(Some(proxy), &[], &trusted), Some(proxy));
        assert!(TrustedProxies::parse(&["10.0.0.0/33"]).is_err());
        assert!(TrustedProxies::parse(&["example.com"]).is_err());
    }
}
