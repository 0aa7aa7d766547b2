//! [`UserName`]: the name of an `IchorUser`, which is the identity (`sub`, the Kubernetes user
//! `ichor:<name>`, the key of its credentials entry). A lower-case DNS label of at most 63
//! characters: `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest user name, in characters (a DNS label).
pub const MAX_USER_NAME_LEN: usize = 63;

/// The prefix the kube-apiserver gives Ichor users (and their groups): `ichor:`.
pub use crate::contract::USER_PREFIX as ICHOR_PREFIX;

/// A valid user name. Construct with [`UserName::parse`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UserName(String);

/// A user name that is not a lower-case DNS label. The message names the field `metadata.name`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserNameError {
    /// The name is empty.
    #[error("metadata.name: a user name must not be empty")]
    Empty,
    /// The name is longer than 63 characters.
    #[error("metadata.name: user name \"{name}\" is {len} characters, at most 63 are allowed")]
    TooLong {
        /// The refused name.
        name: String,
        /// Its length.
        len: usize,
    },
    /// The name has a character or shape a DNS label does not allow.
    #[error(
        "metadata.name: user name \"{name}\" is not a lower-case DNS label: use a-z, 0-9 and '-', \
         starting and ending with a letter or digit"
    )]
    NotDnsLabel {
        /// The refused name.
        name: String,
    },
}

impl UserName {
    /// Validates a user name.
    pub fn parse(name: &str) -> Result<Self, UserNameError> {
        if name.is_empty() {
            return Err(UserNameError::Empty);
        }
        if name.len() > MAX_USER_NAME_LEN {
            // Never echo an arbitrarily long input back in full.
            let shown: String = name.chars().take(MAX_USER_NAME_LEN).collect();
            return Err(UserNameError::TooLong {
                name: format!("{shown}…"),
                len: name.chars().count(),
            });
        }
        let bytes = name.as_bytes();
        let edge_ok = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        let inner_ok = |b: u8| edge_ok(b) || b == b'-';
        let first = bytes.first().copied().is_some_and(edge_ok);
        let last = bytes.last().copied().is_some_and(edge_ok);
        if !(first && last && bytes.iter().all(|b| inner_ok(*b))) {
            return Err(UserNameError::NotDnsLabel {
                name: name.to_owned(),
            });
        }
        Ok(Self(name.to_owned()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The Kubernetes user name the apiserver gives this user: `ichor:<name>`.
    pub fn kubernetes_user(&self) -> String {
        format!("{ICHOR_PREFIX}{}", self.0)
    }
}

impl fmt::Display for UserName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for UserName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for UserName {
    type Err = UserNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for UserName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for UserName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_dns_labels() {
        for name in ["a", "alice", "bob-2", "0", "a-b-c", &"a".repeat(63)] {
            assert_eq!(UserName::parse(name).unwrap().as_str(), name);
        }
        assert_eq!(UserName::parse("alice").unwrap().kubernetes_user(), "ichor:alice");
    }

    #[test]
    fn refuses_upper_case_dots_edges_and_empty() {
        for name in [
            "Alice", "al.ice", "-alice", "alice-", "al_ice", "ali ce", "élise", "system:x",
        ] {
            let err = UserName::parse(name).unwrap_err();
            assert_eq!(
                err,
                UserNameError::NotDnsLabel {
                    name: name.to_owned()
                }
            );
            assert!(err.to_string().starts_with("metadata.name: "), "{err}");
        }
        assert_eq!(UserName::parse(""), Err(UserNameError::Empty));
    }

    #[test]
    fn refuses_64_characters() {
        let err = UserName::parse(&"a".repeat(64)).unwrap_err();
        assert!(matches!(err, UserNameError::TooLong { len: 64, .. }), "{err:?}");
        assert!(err.to_string().contains("at most 63"), "{err}");
    }

    #[test]
    fn deserializing_validates() {
        assert!(serde_json::from_str::<UserName>("\"alice\"").is_ok());
        let err = serde_json::from_str::<UserName>("\"Alice\"").unwrap_err();
        assert!(err.to_string().contains("not a lower-case DNS label"), "{err}");
    }

    proptest! {
        #[test]
        fn accepts_every_name_the_dns_label_pattern_generates(name in "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?") {
            prop_assert!(UserName::parse(&name).is_ok());
        }

        #[test]
        fn refuses_any_name_with_a_character_outside_the_label_alphabet(
            prefix in "[a-z0-9]{0,20}",
            bad in "[^-a-z0-9]",
            suffix in "[a-z0-9]{0,20}",
        ) {
            let name = format!("{prefix}{bad}{suffix}");
            prop_assert!(UserName::parse(&name).is_err());
        }
    }
}
