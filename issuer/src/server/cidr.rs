//! IP networks in CIDR notation (`10.0.0.0/8`, `fd00::/8`), for `--trusted-proxy`: the peers
//! whose `X-Forwarded-For` is believed when deciding a request's source (back-off per source).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// An IP network: an address with its host bits zero, and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

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

fn bits(addr: IpAddr) -> (u128, u8) {
    match addr {
        IpAddr::V4(a) => (u128::from(u32::from(a)), 32),
        IpAddr::V6(a) => (u128::from(a), 128),
    }
}

fn mask(prefix: u8, width: u8) -> u128 {
    let all: u128 = if width == 32 {
        u128::from(u32::MAX)
    } else {
        u128::MAX
    };
    if prefix == 0 {
        0
    } else {
        // `width - prefix` < 128 here.
        (all >> (width - prefix)) << (width - prefix)
    }
}

impl Cidr {
    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// The network address.
    pub fn network(&self) -> IpAddr {
        self.network
    }

    /// Whether `addr` lies in the network. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, as a
    /// dual-stack socket reports IPv4 peers) is matched as the IPv4 address.
    pub fn contains(&self, addr: IpAddr) -> bool {
        let addr = match addr {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
            v4 => v4,
        };
        let (net, width) = bits(self.network);
        let (a, a_width) = bits(addr);
        width == a_width && (a & mask(self.prefix, width)) == net
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, prefix) = s
            .split_once('/')
            .ok_or_else(|| CidrError::NoPrefix(s.to_owned()))?;
        let network: IpAddr = addr.parse().map_err(|_| CidrError::BadAddress(addr.to_owned()))?;
        let (value, width) = bits(network);
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|p| *p <= width && !prefix.starts_with('+'))
            .ok_or_else(|| CidrError::BadPrefix {
                found: prefix.to_owned(),
                max: width,
            })?;
        let masked = value & mask(prefix, width);
        if masked != value {
            let net = match network {
                IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::from(u32::try_from(masked).unwrap_or(0))),
                IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::from(masked)),
            };
            return Err(CidrError::HostBits {
                given: s.to_owned(),
                network: format!("{net}/{prefix}"),
            });
        }
        Ok(Cidr { network, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
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
}
