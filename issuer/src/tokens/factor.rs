//! The second-factor ticket: "password verified, second factor pending", what the password step
//! hands a user who has a second factor and `/oidc/login/factor` takes back with a code
//! (docs/mfa.md). Signed, not encrypted: it holds no secret, only what the second step needs, so
//! no server session appears between the steps. It lives [`super::TICKET_TTL`].

use serde::{Deserialize, Serialize};

use super::{Artifact, TicketClaims};

/// Header `typ` of second-factor tickets.
pub const TYP_FACTOR: &str = "ichor-factor+jwt";

/// "Password verified, second factor pending": what the sign-in's second step needs, signed,
/// so no server session holds it between the two steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FactorClaims {
    /// Issuer.
    pub iss: String,
    /// The user whose password was verified.
    pub sub: String,
    /// The authorization request the sign-in answers.
    pub request: TicketClaims,
    /// The entry's `notBefore` at the password check (RFC 3339): a password or factor reset
    /// since moves it, and the second step is refused.
    pub nb: String,
    /// The device id of the device cookie confirmed at the password step: the second step's
    /// back-off key and cookie, and the cookie it must present again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev: Option<String>,
    /// The factor kinds offered (`passkey`, `totp`, `recovery`).
    pub factors: Vec<String>,
    /// The entry's factor use mark at the password check
    /// ([`ichor_renderers::auth::credentials::CredentialsEntry::factor_use_mark`]): once a
    /// factor was used since, the ticket is refused, so it completes one sign-in.
    #[serde(default)]
    pub used: String,
    /// The passkey step, when the user has passkeys and the issuer a relying party.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passkey: Option<PasskeyChallenge>,
    /// Issued at, unix seconds.
    pub iat: i64,
    /// Expiry, unix seconds.
    pub exp: i64,
}

/// A sign-in's passkey step: what the page hands `navigator.credentials.get` and the relying
/// party's state to check the answer against (public keys and the challenge, no secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PasskeyChallenge {
    /// The request options (`{"publicKey":{…}}`, binary fields base64url).
    pub options: serde_json::Value,
    /// The relying-party library's authentication state.
    pub state: serde_json::Value,
}

/// The longest second-factor ticket: the passkey step's state holds the public keys of up to
/// ten passkeys (about 0.5 KiB each for P-256, 1.5 KiB for RSA-2048).
pub const MAX_FACTOR_TICKET_BYTES: usize = 48 * 1024;

impl Artifact for FactorClaims {
    const TYP: &'static str = TYP_FACTOR;
    const MAX_BYTES: usize = MAX_FACTOR_TICKET_BYTES;
    fn iss(&self) -> &str {
        &self.iss
    }
    fn exp(&self) -> i64 {
        self.exp
    }
}
