//! A token held in memory: serialised as itself (the cache needs it) but never shown by
//! `Debug`, so no log line or error can carry it by accident.

use serde::{Deserialize, Serialize};

/// A bearer credential (ID token, refresh token, authorization code).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a credential.
    pub fn new(value: String) -> Self {
        Self(value)
    }

    /// The credential itself, for the one place that sends or prints it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_value() {
        let s = Secret::new("eyJ-very-secret".into());
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
        assert_eq!(s.expose(), "eyJ-very-secret");
    }
}
