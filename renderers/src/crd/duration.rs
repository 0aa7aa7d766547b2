//! Durations written the way Kubernetes and Go write them (`5m`, `12h`, `1h30m`).

use std::{fmt, str::FromStr};

use jiff::SignedDuration;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A non-negative duration in Go's `time.ParseDuration` notation restricted to the units an
/// operator writes in a manifest: `h`, `m`, `s` (for example `5m`, `12h`, `720h`, `1h30m`).
///
/// Kept as whole seconds; fractions and days are refused so that two spellings of the same value
/// always compare equal after parsing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GoDuration(SignedDuration);

/// Why a duration string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GoDurationError {
    /// Nothing was written.
    #[error("empty duration: write a number and a unit, for example 5m or 12h")]
    Empty,
    /// The text is not `<number><unit>` repeated.
    #[error("invalid duration {0:?}: write whole numbers with the units h, m or s, for example 5m or 1h30m")]
    Syntax(String),
    /// The value is too large to represent (its seconds do not fit in 64 bits).
    #[error(
        "duration {0:?} is too large: the longest this reads is 2562047788015215h, and every setting \
         accepts far less (write one such as 15m or 720h)"
    )]
    Overflow(String),
}

impl GoDuration {
    /// A duration of whole seconds.
    pub const fn from_secs(secs: i64) -> Self {
        Self(SignedDuration::from_secs(secs))
    }

    /// The duration in whole seconds.
    pub const fn as_secs(&self) -> i64 {
        self.0.as_secs()
    }

    /// The duration as a `jiff` duration, for arithmetic on timestamps.
    pub const fn as_signed(&self) -> SignedDuration {
        self.0
    }
}

impl FromStr for GoDuration {
    type Err = GoDurationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err(GoDurationError::Empty);
        }
        if s.len() > 32 {
            return Err(GoDurationError::Syntax(s.chars().take(32).collect()));
        }
        let syntax = || GoDurationError::Syntax(s.to_owned());
        let overflow = || GoDurationError::Overflow(s.to_owned());
        let bytes = s.as_bytes();
        let (mut i, mut total, mut seen_unit) = (0usize, 0i64, false);
        while i < bytes.len() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            if start == i || i == bytes.len() {
                return Err(syntax());
            }
            let n: i64 = s[start..i].parse().map_err(|_| overflow())?;
            let unit = match bytes[i] {
                b'h' => 3600,
                b'm' => 60,
                b's' => 1,
                _ => return Err(syntax()),
            };
            i += 1;
            seen_unit = true;
            total = n
                .checked_mul(unit)
                .and_then(|v| v.checked_add(total))
                .ok_or_else(overflow)?;
        }
        if !seen_unit {
            return Err(syntax());
        }
        Ok(Self(SignedDuration::from_secs(total)))
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.as_secs();
        if secs == 0 {
            return f.write_str("0s");
        }
        let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
        if h > 0 {
            write!(f, "{h}h")?;
        }
        if m > 0 {
            write!(f, "{m}m")?;
        }
        if s > 0 {
            write!(f, "{s}s")?;
        }
        Ok(())
    }
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for GoDuration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "GoDuration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^([0-9]+[hms])+$",
            "maxLength": 32,
        })
    }

    fn inline_schema() -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_spellings_an_operator_writes() {
        assert_eq!("5m".parse::<GoDuration>().unwrap().as_secs(), 300);
        assert_eq!("12h".parse::<GoDuration>().unwrap().as_secs(), 43_200);
        assert_eq!("1h30m".parse::<GoDuration>().unwrap().as_secs(), 5_400);
        assert_eq!("90s".parse::<GoDuration>().unwrap().as_secs(), 90);
    }

    #[test]
    fn refuses_fractions_days_signs_and_bare_numbers() {
        for bad in ["", "5", "1.5h", "1d", "-5m", "m", "5 m", "5mm"] {
            assert!(bad.parse::<GoDuration>().is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn refuses_values_that_overflow() {
        assert!(matches!(
            "9999999999999999999h".parse::<GoDuration>(),
            Err(GoDurationError::Overflow(_))
        ));
    }

    #[test]
    fn refuses_every_overflow_the_crd_pattern_lets_through_with_an_error_not_a_wrap() {
        // Each passes the CRD's pattern ^([0-9]+[hms])+$ and maxLength 32.
        let twenty_digits = "99999999999999999999s";
        for too_large in [
            twenty_digits,
            "9223372036854775808s",
            "2562047788015216h",
            "153722867280912931m",
            "9223372036854775807s1s",
        ] {
            assert_eq!(
                too_large.parse::<GoDuration>(),
                Err(GoDurationError::Overflow(too_large.to_owned())),
                "{too_large}"
            );
        }
        assert_eq!(
            GoDurationError::Overflow(twenty_digits.to_owned()).to_string(),
            "duration \"99999999999999999999s\" is too large: the longest this reads is 2562047788015215h, \
             and every setting accepts far less (write one such as 15m or 720h)"
        );
        // The largest that fits is read, not wrapped; leading zeros are only zeros.
        assert_eq!(
            "2562047788015215h".parse::<GoDuration>().unwrap().as_secs(),
            2_562_047_788_015_215 * 3600
        );
        assert_eq!(
            "9223372036854775807s".parse::<GoDuration>().unwrap().as_secs(),
            i64::MAX
        );
        assert_eq!(
            "0000000000000000000000000000005m"
                .parse::<GoDuration>()
                .unwrap()
                .as_secs(),
            300
        );
        // Through serde (the CRD's fields), the same error.
        let err = serde_json::from_value::<GoDuration>(serde_json::json!(twenty_digits)).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("duration \"99999999999999999999s\" is too large"),
            "{err}"
        );
    }

    #[test]
    fn displays_in_canonical_form() {
        assert_eq!(GoDuration::from_secs(5_400).to_string(), "1h30m");
        assert_eq!(GoDuration::from_secs(0).to_string(), "0s");
        assert_eq!(GoDuration::from_secs(61).to_string(), "1m1s");
    }
}
