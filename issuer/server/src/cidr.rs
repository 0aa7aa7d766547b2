//! IP networks in CIDR notation (`10.0.0.0/8`, `fd00::/8`), for `--trusted-proxy`: the peers
//! whose `X-Forwarded-For` is believed when deciding a request's source (back-off per source).
//! The arithmetic is `ipnet`'s; this module adds the strict reading of the flag (a prefix is
//! required, host bits are refused, each mistake named) and the walk of `X-Forwarded-For`.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;

/// An IP network: an address with its host bits zero, and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr(IpNet);

/// Why a CIDR was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    /// No `/`.
    #[error("{0:?} is not in CIDR notation; write an address, '/', and a prefix length, like 10.0.0.0/8")]
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

    /// Parses entries like `10.0.0.0/8` or `fd00::/8` (surrounding white space ignored).
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
