//! The steps every `UserService` call shares (steps 1, 2 and 4 of the [`crate::api`] list):
//! authenticating the caller against its session state, asking RBAC, reading users fresh and
//! as the API shows them, and hashing passwords or checking old ones through the process's
//! password limits (its one argon2id gate, the sign-in back-off and failure buckets).

use std::net::{IpAddr, SocketAddr};

use ichor_renderers::{
    auth::{Password, credentials::AMR_MFA},
    rbac::Attributes,
};
use tonic::Request;

use super::{Gate, UserApi};
use crate::{
    api::{
        access::AccessReview,
        auth::{BearerVerifier, Caller, SessionState, bearer_token},
        backend::UserBackend,
        error::ApiError,
        proto,
    },
    external::{ExternalVerifier, verifier::unverified_issuer},
    oidc::{limits::AccountWrite, password_limits::PasswordLimitError, passwords::ApiCaller},
    store::StoredUser,
};

/// The refusal of every call but enrolling a factor (and `WhoAmI`, `ChangeOwnPassword`) while
/// the second-factor policy requires the caller to enrol.
pub const MUST_ENROL_FIRST: &str = "set up a second factor first: the second-factor policy requires one of \
                                    you, and until you have one only enrolling it is allowed";

/// The one refusal of a token whose issuer is neither Ichor's nor the configured provider's.
pub const UNTRUSTED_ISSUER: &str = "the bearer token is not from Ichor's issuer or the configured identity \
                                    provider: sign in again";

impl<B, A, V> UserApi<B, A, V>
where
    B: UserBackend,
    A: AccessReview,
    V: BearerVerifier,
{
    /// The session state of `name` (cached at most the configured TTL).
    pub(super) async fn session(&self, name: &str) -> Result<Option<SessionState>, ApiError> {
        if let Some(state) = self.inner.sessions.get(name) {
            return Ok(state);
        }
        let (entry, _) = self.inner.store.read_credentials(name).await?;
        let state = entry.map(|e| SessionState {
            not_before: e.not_before,
            must_change: e.must_change,
            has_factor: e.needs_second_factor(),
        });
        self.inner.sessions.put(name, state);
        Ok(state)
    }

    /// Step 1 and 2: who calls, refused unless allowed to make a call of `gate`.
    pub(super) async fn authenticate<T>(&self, request: &Request<T>, gate: Gate) -> Result<Caller, ApiError> {
        let missing = || {
            ApiError::Unauthenticated(
                "no bearer token: send \"authorization: Bearer <ID token>\" with an ID token for audience \
                 ichor-ui (ichor auth login --audience ichor-ui)"
                    .to_owned(),
            )
        };
        let header = request.metadata().get("authorization").ok_or_else(missing)?;
        let token = header.to_str().ok().and_then(bearer_token).ok_or_else(missing)?;
        let now = self.inner.clock.now();
        // Routed by the unverified `iss`, then verified fully by that issuer's verifier. A token
        // without a readable `iss` goes to Ichor's verifier, which refuses it.
        match unverified_issuer(token) {
            Some(iss) if iss == self.inner.config.issuer_url => {}
            Some(iss) => {
                return match &self.inner.config.external {
                    Some(external) if iss == external.provider().issuer => {
                        self.authenticate_external(external, token, now).await
                    }
                    _ => Err(ApiError::Unauthenticated(UNTRUSTED_ISSUER.to_owned())),
                };
            }
            None => {}
        }
        let claims = self
            .inner
            .verifier
            .verify(token, now)
            .map_err(|e| ApiError::Unauthenticated(e.to_string()))?;
        if claims.exp <= now {
            return Err(ApiError::Unauthenticated(
                "the bearer token has expired: sign in again".to_owned(),
            ));
        }
        let gone = || {
            ApiError::Unauthenticated(format!(
                "user {:?} does not exist or is disabled: sign in as another user",
                claims.sub
            ))
        };
        if gate.changes() {
            self.inner.store.invalidate(&claims.sub);
            // The session state too: a factor enrolled or a session revoked on another replica
            // a moment ago holds for this change.
            self.inner.sessions.invalidate(&claims.sub);
        }
        let user = self.inner.store.get_user(&claims.sub).await?.ok_or_else(gone)?;
        if user.disabled {
            return Err(gone());
        }
        let session = self.session(&user.name).await?.ok_or_else(|| {
            ApiError::Unauthenticated(format!(
                "user {:?} has no password set, so no session of it is valid: ask an administrator to set one",
                user.name
            ))
        })?;
        // The rule of `credentials::is_token_valid_for`: whole seconds, refused when iat < notBefore.
        if claims.iat.as_second() < session.not_before.as_second() {
            return Err(ApiError::Unauthenticated(
                "the sessions of this user were revoked after this token was issued: sign in again"
                    .to_owned(),
            ));
        }
        if session.has_factor && !claims.amr.iter().any(|v| v == AMR_MFA) {
            // A token of a sign-in without the factor (from before the user enrolled): whoever
            // holds it, with the password or not, acts as nobody until they sign in with it.
            return Err(ApiError::Unauthenticated(
                "this token is from a sign-in without the user's second factor: sign in again".to_owned(),
            ));
        }
        if session.must_change && gate != Gate::AllowMustChange {
            return Err(ApiError::MustChangePassword);
        }
        let settings = self.inner.config.settings.get();
        let policy = &settings.second_factor;
        let second_factor = policy.level_for(&user.roles);
        let must_enrol = policy.must_enrol(&user.roles, session.has_factor);
        if must_enrol && !gate.allowed_while_enrolling() {
            return Err(ApiError::FailedPrecondition(MUST_ENROL_FIRST.to_owned()));
        }
        Ok(Caller {
            name: user.name,
            roles: user.roles,
            display_name: user.display_name,
            email: user.email,
            must_change: session.must_change,
            second_factor,
            must_enrol,
            external: None,
        })
    }

    /// Step 1 for a token of the external provider: verified against its discovery and JWKS;
    /// the caller is the prefixed identity with no Ichor roles (nothing is read from the user
    /// store: there is no `IchorUser`, no password and no session state for it).
    async fn authenticate_external(
        &self,
        external: &ExternalVerifier,
        token: &str,
        now: jiff::Timestamp,
    ) -> Result<Caller, ApiError> {
        let verified = external
            .verify(token, now)
            .await
            .map_err(|e| ApiError::Unauthenticated(e.to_string()))?;
        if verified.exp <= now {
            return Err(ApiError::Unauthenticated(
                "the bearer token has expired: sign in again".to_owned(),
            ));
        }
        Ok(Caller::from_external(verified.identity))
    }

    /// Step 4: refuses unless RBAC allows `caller` every one of `asks`.
    pub(super) async fn require(&self, caller: &Caller, asks: &[Attributes]) -> Result<(), ApiError> {
        let subject = caller.subject();
        for attributes in asks {
            let allowed = self
                .inner
                .access
                .allowed(&subject, attributes)
                .await
                .map_err(|e| ApiError::Unavailable(e.to_string()))?;
            if !allowed {
                return Err(ApiError::Forbidden {
                    user: subject.user.clone(),
                    verb: attributes.verb.clone(),
                    resource: attributes.combined_resource(),
                    on: if attributes.name.is_empty() {
                        String::new()
                    } else {
                        format!(" {:?}", attributes.name)
                    },
                });
            }
        }
        Ok(())
    }

    /// The user, read fresh (after dropping any cached read).
    pub(super) async fn existing_user(&self, name: &str) -> Result<StoredUser, ApiError> {
        self.inner.store.invalidate(name);
        self.inner
            .store
            .get_user(name)
            .await?
            .ok_or_else(|| ApiError::NotFound(name.to_owned()))
    }

    /// A user as the API shows it.
    pub(super) async fn user_message(&self, user: StoredUser) -> Result<proto::User, ApiError> {
        let session = self.session(&user.name).await?;
        Ok(proto::User {
            name: user.name,
            display_name: user.display_name.unwrap_or_default(),
            email: user.email.unwrap_or_default(),
            roles: user.roles,
            disabled: user.disabled,
            password_set: session.is_some(),
            must_change: session.is_some_and(|s| s.must_change),
        })
    }

    /// Hashes a new password for a request of `caller` through the process's argon2id gate
    /// (refused at once, `unavailable`, when it is full or `caller` holds its share of it).
    pub(super) async fn hash(&self, caller: &Caller, password: Password) -> Result<String, ApiError> {
        let caller = match caller.external {
            Some(_) => ApiCaller::External(&caller.name),
            None => ApiCaller::User(&caller.name),
        };
        self.inner
            .config
            .passwords
            .hash(caller, password)
            .await
            .map_err(limit_error)
    }

    /// `caller`'s change of its own password from `old` (checked against `phc`, the stored hash)
    /// to `new`, as a sign-in attempt from `source`: the new hash, or `None` when `old` is wrong.
    pub(super) async fn change_password(
        &self,
        source: IpAddr,
        caller: &str,
        old: Password,
        phc: String,
        new: Password,
    ) -> Result<Option<String>, ApiError> {
        let clock = std::sync::Arc::clone(&self.inner.clock);
        let now = move || clock.now();
        self.inner
            .config
            .passwords
            .change(source, caller, old, phc, new, &now)
            .await
            .map_err(limit_error)
    }

    /// One change of `caller`'s own credentials taken from its budget (shared with the sign-in's
    /// second step): before the password check, so a spent budget costs no argon2id; given back
    /// unless the caller marks it written. Refused, `resource_exhausted`, when spent.
    pub(super) fn account_write(&self, caller: &str) -> Result<AccountWrite, ApiError> {
        self.inner
            .config
            .passwords
            .account_write(caller, self.inner.clock.now())
            .map_err(limit_error)
    }

    /// A re-ask of `caller`'s current `password` (checked against `phc`, the stored hash) before
    /// a change of its second factors, as a sign-in attempt from `source`: true when it is right.
    pub(super) async fn reauthenticate(
        &self,
        source: IpAddr,
        caller: &str,
        password: Password,
        phc: String,
    ) -> Result<bool, ApiError> {
        let clock = std::sync::Arc::clone(&self.inner.clock);
        let now = move || clock.now();
        self.inner
            .config
            .passwords
            .reauthenticate(source, caller, password, phc, &now)
            .await
            .map_err(limit_error)
    }

    /// The source address of `request`, as the sign-in form reads a request's: the TCP peer,
    /// or the client a trusted proxy names in `X-Forwarded-For`.
    pub(super) fn source_of<T>(&self, request: &Request<T>) -> IpAddr {
        let peer = request
            .extensions()
            .get::<axum::extract::ConnectInfo<SocketAddr>>()
            .map(|info| info.0.ip())
            .or_else(|| request.remote_addr().map(|addr| addr.ip()));
        let forwarded: Vec<&str> = request
            .metadata()
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        self.inner.config.passwords.source_of(peer, &forwarded)
    }

    /// The other users, for the last-enabled-admin rule.
    pub(super) async fn all_users(&self) -> Result<Vec<StoredUser>, ApiError> {
        Ok(self.inner.store.list_users().await?)
    }

    /// After this replica wrote `name`'s credentials.
    pub(super) fn forget(&self, name: &str) {
        self.inner.sessions.invalidate(name);
        self.inner.store.invalidate(name);
    }
}

/// The API's answer to a refusal of the password limits: `resource_exhausted` while backing off
/// (as the sign-in form's 429) or when the caller changed its credentials too often,
/// `unavailable` when the gate is full (its 503).
fn limit_error(e: PasswordLimitError) -> ApiError {
    match e {
        PasswordLimitError::Limited { .. } | PasswordLimitError::Changes { .. } => {
            ApiError::ResourceExhausted(e.to_string())
        }
        PasswordLimitError::Busy { .. } => ApiError::Unavailable(e.to_string()),
        PasswordLimitError::Internal(_) => ApiError::Internal(e.to_string()),
    }
}
