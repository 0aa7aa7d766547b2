//! [`ExternalVerifier`]: an external provider's ID token verified with the `openidconnect`
//! crate against the provider's discovery document and JWKS: RS256 signature by a published
//! key, `iss` equal to the configured issuer, `aud` containing the configured client id (no
//! other audience), `exp` after `now`. The discovery document and the JWKS are fetched on first
//! use and kept; a token signed with a key the kept JWKS lacks (the provider rotated) makes it
//! read the JWKS again, at most every [`JWKS_REFETCH_INTERVAL`], so garbage `kid`s cannot make
//! the issuer hammer the provider.
//!
//! Every fetch is over https (the client refuses any other scheme, so a discovery document that
//! names an `http` `jwks_uri` yields no keys). No lock is held while a token is checked against
//! the kept keys: a fetch (one at a time) holds only the fetch lock, which a token with a known
//! key never waits for, so a slow provider delays only the tokens that need its answer.

use std::{str::FromStr as _, sync::Arc, time::Duration};

use base64::Engine as _;
use jiff::Timestamp;
use openidconnect::{
    ClaimsVerificationError, ClientId, IssuerUrl, Nonce, SignatureVerificationError,
    core::{CoreIdToken, CoreIdTokenVerifier, CoreJsonWebKeySet, CoreProviderMetadata},
};
use tokio::{sync::Mutex, time::Instant};

use super::{
    identity::{ExternalIdentity, identity},
    provider::ExternalProvider,
};
use crate::api::BearerError;

/// The kept keys, read without waiting for a fetch in flight.
type KeptKeys = std::sync::Mutex<Option<Arc<Keys>>>;

/// The shortest time between two reads of the JWKS (or two discovery attempts after a failure).
pub const JWKS_REFETCH_INTERVAL: Duration = Duration::from_secs(10);
/// Connect timeout to the provider.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Whole-request timeout to the provider.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest bearer token read (an ID token is a few KiB).
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// The `iss` of a JWT, read without verifying anything: only to choose which verifier to ask.
/// `None` for anything that is not a bounded three-part JWT with a string `iss`.
pub fn unverified_issuer(token: &str) -> Option<String> {
    if token.len() > MAX_TOKEN_BYTES {
        return None;
    }
    let mut parts = token.split('.');
    let (_, payload, _, None) = (parts.next()?, parts.next()?, parts.next()?, parts.next()) else {
        return None;
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    claims.get("iss")?.as_str().map(str::to_owned)
}

/// A verified external token: who it names and until when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The Kubernetes identity.
    pub identity: ExternalIdentity,
    /// The token's expiry.
    pub exp: Timestamp,
}

struct Keys {
    jwks_uri: openidconnect::JsonWebKeySetUrl,
    jwks: CoreJsonWebKeySet,
}

/// What only the fetcher touches (under the fetch lock).
#[derive(Default)]
struct Fetching {
    /// When the last discovery attempt failed.
    last_failure: Option<Instant>,
    /// When the JWKS was last read (or its read started).
    jwks_read: Option<Instant>,
}

/// Verifies ID tokens of one external provider (cheap to share: clone the `Arc`).
pub struct ExternalVerifier {
    provider: ExternalProvider,
    issuer_url: IssuerUrl,
    http: reqwest::Client,
    refetch_interval: Duration,
    /// The keys in use; replaced whole by a fetch, never held across I/O.
    keys: KeptKeys,
    /// One fetch at a time; held across the provider's I/O by the fetcher only.
    fetching: Mutex<Fetching>,
}

impl std::fmt::Debug for ExternalVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalVerifier")
            .field("issuer", &self.provider.issuer)
            .finish_non_exhaustive()
    }
}

fn unavailable(why: impl std::fmt::Display) -> BearerError {
    BearerError(format!(
        "your identity provider's keys cannot be read right now ({why}); try again shortly"
    ))
}

/// Why a verifier for the external provider could not be built; the issuer does not start.
#[derive(Debug, thiserror::Error)]
pub enum VerifierError {
    /// The issuer URL is not a URL.
    #[error("--external-issuer-url {issuer:?}: {reason}")]
    IssuerUrl {
        /// The configured issuer.
        issuer: String,
        /// Why it does not parse.
        reason: url::ParseError,
    },
    /// The provider's CA file holds no usable certificate.
    #[error("--external-ca-file: {0}")]
    Ca(reqwest::Error),
    /// The HTTP client could not be built.
    #[error("the HTTP client for the identity provider: {0}")]
    Client(reqwest::Error),
}

impl ExternalVerifier {
    /// A verifier for `provider`, trusting the system's roots and the provider's CA.
    ///
    /// # Errors
    /// The HTTP client cannot be built (an unusable CA), or the issuer URL does not parse.
    pub fn new(provider: ExternalProvider) -> Result<Arc<Self>, VerifierError> {
        Self::with_refetch_interval(provider, JWKS_REFETCH_INTERVAL)
    }

    /// As [`Self::new`], with another shortest time between two reads of the JWKS than
    /// [`JWKS_REFETCH_INTERVAL`] (tests shorten it).
    ///
    /// # Errors
    /// As [`Self::new`].
    pub fn with_refetch_interval(
        provider: ExternalProvider,
        refetch_interval: Duration,
    ) -> Result<Arc<Self>, VerifierError> {
        let issuer_url =
            IssuerUrl::new(provider.issuer.clone()).map_err(|reason| VerifierError::IssuerUrl {
                issuer: provider.issuer.clone(),
                reason,
            })?;
        let mut builder = reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .redirect(reqwest::redirect::Policy::none())
            .https_only(true)
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("ichor-issuer/", env!("CARGO_PKG_VERSION")));
        for der in rustls_native_certs::load_native_certs().certs {
            if let Ok(cert) = reqwest::Certificate::from_der(&der) {
                builder = builder.add_root_certificate(cert);
            }
        }
        if let Some(pem) = &provider.ca_pem {
            for cert in reqwest::Certificate::from_pem_bundle(pem.as_bytes()).map_err(VerifierError::Ca)? {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder.build().map_err(VerifierError::Client)?;
        Ok(Arc::new(Self {
            provider,
            issuer_url,
            http,
            refetch_interval,
            keys: std::sync::Mutex::new(None),
            fetching: Mutex::new(Fetching::default()),
        }))
    }

    /// The provider this verifier checks tokens of.
    pub fn provider(&self) -> &ExternalProvider {
        &self.provider
    }

    /// The kept keys (a clone of the `Arc`; the lock is held for that only).
    fn kept(&self) -> Option<Arc<Keys>> {
        self.keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn keep(&self, keys: Keys) -> Arc<Keys> {
        let keys = Arc::new(keys);
        *self
            .keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::clone(&keys));
        keys
    }

    /// The keys: the kept ones, or discovery and JWKS fetched now (the first time, or again
    /// after a failure once the refetch interval has passed). Waits for a fetch in flight only
    /// when there are no keys yet.
    async fn keys(&self) -> Result<Arc<Keys>, BearerError> {
        if let Some(keys) = self.kept() {
            return Ok(keys);
        }
        let mut fetching = self.fetching.lock().await;
        if let Some(keys) = self.kept() {
            return Ok(keys);
        }
        if fetching
            .last_failure
            .is_some_and(|at| at.elapsed() < self.refetch_interval)
        {
            return Err(unavailable("its discovery failed moments ago"));
        }
        match CoreProviderMetadata::discover_async(self.issuer_url.clone(), &self.http).await {
            Ok(metadata) => {
                fetching.last_failure = None;
                fetching.jwks_read = Some(Instant::now());
                Ok(self.keep(Keys {
                    jwks_uri: metadata.jwks_uri().clone(),
                    jwks: metadata.jwks().clone(),
                }))
            }
            Err(e) => {
                fetching.last_failure = Some(Instant::now());
                tracing::warn!(issuer = %self.provider.issuer, error = %e, "external provider discovery failed (discovery and JWKS must be served over https)");
                Err(unavailable("its discovery document could not be read"))
            }
        }
    }

    /// The keys after `seen` lacked a token's key: newer ones if another fetch replaced them
    /// meanwhile, or the JWKS read again if the last read is older than the refetch interval;
    /// `None` when there is nothing newer to try.
    async fn newer_keys(&self, seen: &Arc<Keys>) -> Option<Arc<Keys>> {
        let mut fetching = self.fetching.lock().await;
        let current = self.kept()?;
        if !Arc::ptr_eq(&current, seen) {
            return Some(current);
        }
        if fetching
            .jwks_read
            .is_some_and(|at| at.elapsed() < self.refetch_interval)
        {
            return None;
        }
        fetching.jwks_read = Some(Instant::now());
        match CoreJsonWebKeySet::fetch_async(&current.jwks_uri, &self.http).await {
            Ok(jwks) => Some(self.keep(Keys {
                jwks_uri: current.jwks_uri.clone(),
                jwks,
            })),
            Err(e) => {
                tracing::warn!(issuer = %self.provider.issuer, error = %e, "external provider JWKS read failed");
                None
            }
        }
    }

    fn check(
        &self,
        token: &CoreIdToken,
        jwks: &CoreJsonWebKeySet,
        now: Timestamp,
    ) -> Result<Timestamp, ClaimsVerificationError> {
        let at = chrono::DateTime::from_timestamp(now.as_second(), now.subsec_nanosecond().max(0) as u32)
            .unwrap_or_default();
        let verifier = CoreIdTokenVerifier::new_public_client(
            ClientId::new(self.provider.client_id.clone()),
            self.issuer_url.clone(),
            jwks.clone(),
        )
        .set_time_fn(move || at);
        // A bearer token carries the nonce of a sign-in this server never saw: not checked here
        // (the client that signed in checked it).
        let claims = token.claims(&verifier, |_: Option<&Nonce>| Ok(()))?;
        Ok(Timestamp::from_second(claims.expiration().timestamp()).unwrap_or(Timestamp::UNIX_EPOCH))
    }

    /// Verifies `token` (whose unverified `iss` is this provider's) at `now`.
    ///
    /// # Errors
    /// [`BearerError`] for a token that is not a valid ID token of this provider for its client
    /// at `now`, that names nobody usable, or when the provider's keys cannot be read.
    pub async fn verify(&self, token: &str, now: Timestamp) -> Result<Verified, BearerError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(BearerError("the bearer token is too large".to_owned()));
        }
        let parsed = CoreIdToken::from_str(token)
            .map_err(|_| BearerError("the bearer token is not an ID token".to_owned()))?;
        let keys = self.keys().await?;
        let mut result = self.check(&parsed, &keys.jwks, now);
        if matches!(
            result,
            Err(ClaimsVerificationError::SignatureVerification(
                SignatureVerificationError::NoMatchingKey
            ))
        ) && let Some(newer) = self.newer_keys(&keys).await
        {
            result = self.check(&parsed, &newer.jwks, now);
        }
        let exp = result.map_err(|e| BearerError(refusal(&e).to_owned()))?;
        // The payload was just verified; read the configured claims from it.
        let payload = token.split('.').nth(1).unwrap_or_default();
        let claims: serde_json::Value = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(|| BearerError("the bearer token's claims are not JSON".to_owned()))?;
        let identity = identity(&self.provider, &claims).map_err(|e| BearerError(e.to_string()))?;
        Ok(Verified { identity, exp })
    }
}

/// The caller-facing reason of a refusal (never the token, never key material).
fn refusal(e: &ClaimsVerificationError) -> &'static str {
    match e {
        ClaimsVerificationError::Expired(_) => "the bearer token has expired: sign in again",
        ClaimsVerificationError::InvalidAudience(_) => {
            "the bearer token was issued for another application (audience): sign in to Ichor again"
        }
        ClaimsVerificationError::InvalidIssuer(_) => "the bearer token's issuer does not match",
        ClaimsVerificationError::SignatureVerification(_) => {
            "the bearer token's signature does not verify with your identity provider's keys"
        }
        _ => "the bearer token is not a valid ID token of your identity provider",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(payload: &str) -> String {
        let b = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!("{}.{}.sig", b(r#"{"alg":"RS256"}"#), b(payload))
    }

    #[test]
    fn the_unverified_issuer_is_read_only_from_a_bounded_three_part_jwt() {
        assert_eq!(
            unverified_issuer(&jwt(r#"{"iss":"https://idp.example.com"}"#)).as_deref(),
            Some("https://idp.example.com")
        );
        assert_eq!(unverified_issuer(&jwt(r#"{"iss":7}"#)), None);
        assert_eq!(unverified_issuer(&format!("{}.x", jwt("{}"))), None);
        assert_eq!(unverified_issuer("not a token"), None);
        let huge = jwt(&format!(
            r#"{{"iss":"x","pad":"{}"}}"#,
            "a".repeat(MAX_TOKEN_BYTES)
        ));
        assert_eq!(unverified_issuer(&huge), None);
    }
}
