//! Unit tests of `ichor config apply`'s durations and `/readyz` URLs.

use std::time::Duration;

use super::{args::parse_duration, inputs::readyz_url, sink::human};

#[test]
fn durations_take_the_friendly_format_and_refuse_negative_ones() {
    assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
    assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    assert!(parse_duration("-1s").is_err());
    assert!(parse_duration("soon").is_err());
}

#[test]
fn the_readyz_url_takes_another_port_and_brackets_ipv6() {
    assert_eq!(
        readyz_url("10.0.0.1", 6443).as_deref(),
        Some("https://10.0.0.1:6443/readyz")
    );
    assert_eq!(
        readyz_url("fd00::1", 7443).as_deref(),
        Some("https://[fd00::1]:7443/readyz")
    );
    assert_eq!(readyz_url("not an address", 6443), None);
}

#[test]
fn durations_print_for_people() {
    assert_eq!(human(Duration::from_millis(2500)), "2.5s");
    assert_eq!(human(Duration::from_secs(300)), "5m00s");
}
