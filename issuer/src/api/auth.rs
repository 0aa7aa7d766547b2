//! Who is calling: the bearer ID token ([`BearerVerifier`], implemented by the issuer's token
//! module), the caller's `IchorUser` re-read through the store cache, and its session state
//! (`notBefore`, `mustChange`) through a short cache ([`SessionCache`]).

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::Duration,
};

use ichor_renderers::{
    auth::{second_factor_policy::SecondFactorLevel, user_name::ICHOR_PREFIX},
    rbac::Subject,
};
use jiff::Timestamp;
use tokio::time::Instant;

use crate::{external::ExternalIdentity, store::USER_CACHE_TTL};

/// The audience a `UserService` bearer token must carry.
pub use ichor_renderers::contract::UI_AUDIENCE as API_AUDIENCE;

/// The group every authenticated Kubernetes user is in; sent with every access review so custom
/// bindings to it answer as the kube-apiserver would.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";

/// The most session states [`SessionCache`] keeps (so probing names cannot grow it).
pub const MAX_CACHED_SESSIONS: usize = 4096;

/// The claims of a verified bearer token that the API uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BearerClaims {
    /// The user name.
    pub sub: String,
    /// The groups claim (informational: roles are read from the `IchorUser`).
    pub groups: Vec<String>,
    /// Issued at (compared with the credentials' `notBefore`).
    pub iat: Timestamp,
    /// Expiry.
    pub exp: Timestamp,
    /// How the user authenticated (RFC 8176; `["pwd"]` when the token says nothing).
    pub amr: Vec<String>,
}

/// Why a bearer token was refused. The text is shown to the caller: it must not echo the token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the bearer token is not valid: {0}")]
pub struct BearerError(pub String);

/// Verifies an ID token for the API: signature with the issuer's current keys, `iss`, `aud` =
/// [`API_AUDIENCE`], `exp` after `now`. The OIDC issuer's token module implements it.
pub trait BearerVerifier: Send + Sync + 'static {
    /// The token's claims if it is valid at `now`.
    ///
    /// # Errors
    /// [`BearerError`] for any token that is not a valid `ichor-ui` ID token at `now`.
    fn verify(&self, token: &str, now: Timestamp) -> Result<BearerClaims, BearerError>;
}

/// Where the service reads the time (a trait so tests can fix it).
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// The authenticated caller of one call: an Ichor user, from its `IchorUser` (not from the
/// token), or a person of the external provider, from the verified token ([`Caller::external`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The user name: the `IchorUser`'s name, or for an external caller its Kubernetes user name
    /// (`oidc:alice@example.org`).
    pub name: String,
    /// The roles, from `spec.roles`.
    pub roles: Vec<String>,
    /// From `spec.displayName`.
    pub display_name: Option<String>,
    /// From `spec.email`.
    pub email: Option<String>,
    /// The credentials say the password must be changed.
    pub must_change: bool,
    /// The second-factor policy's level for this user's roles (`Off` for an external caller:
    /// its factors are its provider's).
    pub second_factor: SecondFactorLevel,
    /// The policy requires a second factor this user has not set up: every call but the
    /// enrolment's is refused until they do.
    pub must_enrol: bool,
    /// `Some` for a person signed in at the external provider: no Ichor roles, Kubernetes RBAC
    /// alone decides.
    pub external: Option<ExternalIdentity>,
}

impl Caller {
    /// An Ichor user's caller value (no external identity).
    pub fn ichor(name: &str, roles: &[&str]) -> Self {
        Caller {
            name: name.to_owned(),
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
            display_name: None,
            email: None,
            must_change: false,
            second_factor: SecondFactorLevel::Off,
            must_enrol: false,
            external: None,
        }
    }

    /// The caller of an external identity: its Kubernetes user name, no roles.
    pub fn from_external(identity: ExternalIdentity) -> Self {
        Caller {
            name: identity.username.clone(),
            roles: Vec::new(),
            display_name: identity.display_name.clone(),
            email: identity.email.clone(),
            must_change: false,
            second_factor: SecondFactorLevel::Off,
            must_enrol: false,
            external: Some(identity),
        }
    }

    /// The Kubernetes identity RBAC is asked about: user `ichor:<name>`, groups `ichor:<role>`
    /// for each role, and `system:authenticated`; for an external caller its prefixed user name
    /// and the prefixed groups the API keeps ([`ExternalIdentity::api_groups`]).
    pub fn subject(&self) -> Subject {
        if let Some(external) = &self.external {
            let mut groups = external.api_groups.clone();
            groups.push(AUTHENTICATED_GROUP.to_owned());
            return Subject {
                user: external.username.clone(),
                groups,
            };
        }
        let mut groups: Vec<String> = self.roles.iter().map(|r| format!("{ICHOR_PREFIX}{r}")).collect();
        groups.push(AUTHENTICATED_GROUP.to_owned());
        Subject {
            user: format!("{ICHOR_PREFIX}{}", self.name),
            groups,
        }
    }
}

/// The bearer token of an `authorization` header value, if it is one.
pub fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The part of a credentials entry a call needs. `None` in the cache: the user has no entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionState {
    /// Tokens issued before this are refused.
    pub not_before: Timestamp,
    /// The password must be changed.
    pub must_change: bool,
    /// The user has a second factor: only tokens of a sign-in that used one are accepted.
    pub has_factor: bool,
}

/// Session states read from the credentials store, each kept at most the configured TTL (at most
/// [`USER_CACHE_TTL`]), and dropped on this replica whenever it writes the user's credentials.
#[derive(Debug)]
pub struct SessionCache {
    ttl: Duration,
    entries: Mutex<HashMap<String, (Instant, Option<SessionState>)>>,
}

impl SessionCache {
    /// A cache keeping states for `ttl` (capped at [`USER_CACHE_TTL`]; zero disables it).
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl: ttl.min(USER_CACHE_TTL),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The cached state of `name`, if fresh (`Some(None)`: cached as "no entry").
    pub fn get(&self, name: &str) -> Option<Option<SessionState>> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, state) = entries.get(name)?;
        (Instant::now().saturating_duration_since(*at) < self.ttl).then_some(*state)
    }

    /// Remembers the state of `name`.
    pub fn put(&self, name: &str, state: Option<SessionState>) {
        if self.ttl.is_zero() {
            return;
        }
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= MAX_CACHED_SESSIONS && !entries.contains_key(name) {
            let ttl = self.ttl;
            entries.retain(|_, (at, _)| now.saturating_duration_since(*at) < ttl);
            if entries.len() >= MAX_CACHED_SESSIONS {
                entries.clear();
            }
        }
        entries.insert(name.to_owned(), (now, state));
    }

    /// Forgets `name` (after a credentials write by this replica).
    pub fn invalidate(&self, name: &str) {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name);
    }
}

impl Default for SessionCache {
    fn default() -> Self {
        Self::new(USER_CACHE_TTL)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn reads_a_bearer_token_case_insensitively_and_refuses_other_schemes() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer  abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearerabc"), None);
    }

    #[test]
    fn the_subject_is_the_ichor_user_and_its_role_groups() {
        let caller = Caller::ichor("alice", &["operator", "auditor"]);
        let subject = caller.subject();
        assert_eq!(subject.user, "ichor:alice");
        assert_eq!(
            subject.groups,
            ["ichor:operator", "ichor:auditor", "system:authenticated"]
        );
    }

    #[test]
    fn an_external_subject_is_its_prefixed_name_and_the_groups_the_api_keeps_with_no_roles() {
        let caller = Caller::from_external(ExternalIdentity {
            username: "oidc:carol@example.org".into(),
            groups: vec!["oidc:dev".into(), "oidc:ops".into()],
            api_groups: vec!["oidc:ops".into()],
            display_name: None,
            email: Some("carol@example.org".into()),
        });
        assert!(caller.roles.is_empty());
        let subject = caller.subject();
        assert_eq!(subject.user, "oidc:carol@example.org");
        assert_eq!(subject.groups, ["oidc:ops", "system:authenticated"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cached_session_state_expires_after_its_ttl_and_on_invalidate() {
        let cache = SessionCache::new(Duration::from_secs(10));
        let state = SessionState {
            not_before: Timestamp::UNIX_EPOCH,
            must_change: true,
            has_factor: false,
        };
        cache.put("alice", Some(state));
        assert_eq!(cache.get("alice"), Some(Some(state)));
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(cache.get("alice"), None);
        cache.put("alice", None);
        assert_eq!(cache.get("alice"), Some(None));
        cache.invalidate("alice");
        assert_eq!(cache.get("alice"), None);
    }

    #[test]
    fn the_ttl_is_capped_at_ten_seconds() {
        assert_eq!(SessionCache::new(Duration::from_secs(60)).ttl, USER_CACHE_TTL);
    }
}
