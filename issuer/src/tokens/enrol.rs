//! The enrolment ticket of an authenticator app: what `BeginTotp` hands the caller and
//! `ConfirmTotp` takes back, so that nothing is stored before a first code proves the app has
//! the secret (docs/mfa.md, "API, CLI, UI").
//!
//! The ticket is signed, not encrypted: it carries the secret the same response shows the
//! caller, and is handled like that secret (never logged). It is bound to the user (`sub`) and
//! to the entry's `notBefore` when it was made (`nb`), so a password change, a factor reset or
//! any other factor change since refuses it, and it lives [`TOTP_ENROL_TTL`].

use jiff::SignedDuration;
use serde::{Deserialize, Serialize};

use super::Artifact;

/// Header `typ` of authenticator-app enrolment tickets.
pub const TYP_TOTP_ENROL: &str = "ichor-totp-enrol+jwt";
/// Lifetime of an enrolment ticket: long enough to scan a QR code and type a first code.
pub const TOTP_ENROL_TTL: SignedDuration = SignedDuration::from_mins(10);

/// "This secret was offered to this user": the pending authenticator app of `BeginTotp`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TotpEnrolClaims {
    /// Issuer.
    pub iss: String,
    /// The user the secret was offered to.
    pub sub: String,
    /// The entry's `notBefore` when the ticket was made (RFC 3339): if it moved since, the
    /// ticket is refused.
    pub nb: String,
    /// The offered secret: 32 upper-case base32 characters.
    pub secret: String,
    /// Issued at, unix seconds.
    pub iat: i64,
    /// Expiry, unix seconds.
    pub exp: i64,
}

impl std::fmt::Debug for TotpEnrolClaims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TotpEnrolClaims")
            .field("iss", &self.iss)
            .field("sub", &self.sub)
            .field("nb", &self.nb)
            .field("secret", &"<redacted>")
            .field("iat", &self.iat)
            .field("exp", &self.exp)
            .finish()
    }
}

/// Header `typ` of passkey registration tickets.
pub const TYP_PASSKEY_ENROL: &str = "ichor-passkey-enrol+jwt";

/// "This registration was started for this user": the pending passkey of
/// `BeginPasskeyRegistration`, with the relying party's state (the challenge, the user handle,
/// the passkeys excluded), so the issuer keeps nothing between the two calls. It lives
/// [`TOTP_ENROL_TTL`] and is bound to the entry's `notBefore` as the authenticator app's is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PasskeyEnrolClaims {
    /// Issuer.
    pub iss: String,
    /// The user the registration was started for.
    pub sub: String,
    /// The entry's `notBefore` when the ticket was made (RFC 3339).
    pub nb: String,
    /// The relying-party library's registration state.
    pub state: serde_json::Value,
    /// Issued at, unix seconds.
    pub iat: i64,
    /// Expiry, unix seconds.
    pub exp: i64,
}

impl Artifact for PasskeyEnrolClaims {
    const TYP: &'static str = TYP_PASSKEY_ENROL;
    /// The state lists the credential ids of the user's passkeys (up to ten of 255 bytes).
    const MAX_BYTES: usize = 16 * 1024;
    fn iss(&self) -> &str {
        &self.iss
    }
    fn exp(&self) -> i64 {
        self.exp
    }
}

impl Artifact for TotpEnrolClaims {
    const TYP: &'static str = TYP_TOTP_ENROL;
    fn iss(&self) -> &str {
        &self.iss
    }
    fn exp(&self) -> i64 {
        self.exp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_leaves_the_secret_out() {
        let claims = TotpEnrolClaims {
            iss: "https://ichor.example.com".into(),
            sub: "alice".into(),
            nb: "2026-01-01T00:00:00Z".into(),
            secret: "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ".into(),
            iat: 0,
            exp: 600,
        };
        let shown = format!("{claims:?}");
        assert!(!shown.contains("GEZDGNBV"), "{shown}");
        assert!(shown.contains("alice"), "{shown}");
    }
}
