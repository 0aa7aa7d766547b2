//! The `refresh_token` grant: rotation with reuse detection, the 10-second grace window, the
//! absolute lifetime, and the user's state at each refresh (must change the password, the
//! second-factor policy), so a change applies at the next refresh.

use ichor_renderers::auth::{
    credentials::{AMR_MFA, CredentialsEntry, Family, RefusalReason, Rotation},
    second_factor_policy::{TokenDecision, session_decision},
};

use jiff::Timestamp;

use super::{
    ENROL_FIRST, SIGN_IN_WITH_FACTOR, TokenResponse, client, id_token, live_user, param, refresh_token,
    required, signing_keys, store_error,
};
use crate::{
    keys::LoadedKeys,
    oidc::{
        Issuer,
        errors::OAuthError,
        lock,
        request::{self, AUD_KUBE, Client, Params},
    },
    store::{Change, StoreError, modify_credentials},
    tokens::{self, RefreshClaims},
};

enum Refreshed {
    Issued {
        family: Family,
    },
    Refused(RefusalReason),
    MustChange,
    Policy(TokenDecision),
    NeedsFactor,
    NoEntry,
    /// The family's write cap is spent: answered `slow_down`, nothing written.
    Throttled(jiff::SignedDuration),
}

/// The grant of `params`; `verified` holds the claims of its refresh token when the token
/// endpoint already checked its MAC (see `verified_artifact`), so it is not checked twice.
pub(super) async fn refresh_grant(
    issuer: &Issuer,
    params: &Params,
    verified: Option<RefreshClaims>,
) -> Result<TokenResponse, OAuthError> {
    let client = client(params)?;
    let token = required(params, "refresh_token")?;
    let requested = param(params, "audience")?;
    let now = issuer.now();
    let keys = signing_keys(issuer, now)?;
    let claims = match verified {
        Some(claims) => claims,
        None => tokens::verify_artifact::<RefreshClaims>(&keys, token, issuer.issuer(), now)
            .map_err(|e| OAuthError::invalid_grant(format!("refresh_token: {e}")))?,
    };
    if claims.client_id != client.id() {
        return Err(OAuthError::invalid_grant(
            "refresh_token: issued to another client",
        ));
    }
    // A family this replica found gone never comes back: its tokens, which keep their MAC until
    // the family's end, are refused without a store read.
    if lock(&issuer.gone_families).contains(&claims.fam) {
        return Err(OAuthError::invalid_grant(
            "refresh_token: the session was revoked or has ended",
        ));
    }
    if let Err(wait) = lock(&issuer.family_buckets).reserve(claims.fam.clone(), now) {
        issuer.metrics.backoff_hit("family_rate");
        return Err(OAuthError::slow_down(wait));
    }
    rotate(issuer, client, requested, &keys, &claims, now).await
}

/// The grant past its presentation ceiling: the rotation (held to the family's write cap), and
/// the tokens.
async fn rotate(
    issuer: &Issuer,
    client: Client,
    requested: Option<&str>,
    keys: &LoadedKeys,
    claims: &RefreshClaims,
    now: Timestamp,
) -> Result<TokenResponse, OAuthError> {
    let audience = request::resolve_audience(client, requested.or(Some(claims.audience.as_str())))
        .map_err(|e| OAuthError::invalid_request(e.to_string()))?;
    let user = live_user(issuer, &claims.sub).await?;
    let policy = issuer.settings.get().second_factor.clone();
    let decide = |current: Option<&CredentialsEntry>| {
        let Some(entry) = current else {
            return Ok::<_, StoreError>(Change::Keep(Refreshed::NoEntry));
        };
        if entry.must_change && audience == AUD_KUBE {
            return Ok(Change::Keep(Refreshed::MustChange));
        }
        // The family's `amr` is the sign-in's that started it (a family it does not name yet
        // proves nothing: the rotation below refuses it).
        let proved = entry
            .family(&claims.fam)
            .is_some_and(|f| f.amr.iter().any(|v| v == AMR_MFA));
        if entry.needs_second_factor() && entry.family(&claims.fam).is_some() && !proved {
            // Whatever the policy: a session started with the password alone before the user
            // had a factor ends, and the next sign-in asks for the factor.
            return Ok(match entry.revoke_family(&claims.fam) {
                Some(next) => Change::Put(next, Refreshed::NeedsFactor),
                None => Change::Keep(Refreshed::NeedsFactor),
            });
        }
        match session_decision(
            &policy,
            &user.roles,
            entry.needs_second_factor(),
            proved,
            audience,
        ) {
            TokenDecision::Allowed => {}
            refused => return Ok(Change::Keep(Refreshed::Policy(refused))),
        }
        Ok(match entry.rotate_family(&claims.fam, claims.generation, now) {
            Rotation::Rotated { entry, .. } => match entry.family(&claims.fam).cloned() {
                Some(family) => Change::Put(entry, Refreshed::Issued { family }),
                None => Change::Keep(Refreshed::Refused(RefusalReason::UnknownFamily)),
            },
            Rotation::Grace { .. } => match entry.family(&claims.fam).cloned() {
                Some(family) => Change::Keep(Refreshed::Issued { family }),
                None => Change::Keep(Refreshed::Refused(RefusalReason::UnknownFamily)),
            },
            Rotation::Refused {
                entry: Some(next),
                reason,
            } => Change::Put(next, Refreshed::Refused(reason)),
            Rotation::Refused { entry: None, reason } => Change::Keep(Refreshed::Refused(reason)),
        })
    };
    // Whether the change last decided writes. A rotation takes one write from the family's cap
    // when it is decided; a retry after a conflict decides again on a fresh read and keeps the
    // one it took. Given back only when the last decision wrote nothing: once a rotation's write
    // began it stays spent, whatever the store answered (a put whose answer was lost may have
    // been taken).
    let (mut reserved, mut rotating) = (false, false);
    let outcome = modify_credentials(issuer.store.as_ref(), &claims.sub, |current| {
        let change = decide(current)?;
        rotating = matches!(change, Change::Put(_, Refreshed::Issued { .. }));
        if rotating && !reserved {
            if let Err(wait) = issuer.reserve_family_write(&claims.fam, now) {
                rotating = false;
                return Ok(Change::Keep(Refreshed::Throttled(wait)));
            }
            reserved = true;
        }
        Ok::<_, StoreError>(change)
    })
    .await;
    if reserved && !rotating {
        issuer.refund_family_write(&claims.fam, now);
    }
    let outcome = outcome.map_err(store_error)?;
    // No `invalidate` here: a rotation writes only the credentials entry, which is never cached,
    // and leaves the user (cached at most `USER_CACHE_TTL`) as it was; dropping the cached user
    // would cost a user re-read (a users-directory scan, or an API call) on every refresh.
    if matches!(
        outcome,
        Refreshed::NoEntry | Refreshed::Refused(_) | Refreshed::NeedsFactor
    ) {
        // Every refusal removed the family, or found it absent.
        lock(&issuer.gone_families).insert(&claims.fam);
    }
    let family = match outcome {
        Refreshed::Issued { family } => family,
        Refreshed::Throttled(wait) => return Err(OAuthError::slow_down(wait)),
        Refreshed::NoEntry => {
            return Err(OAuthError::invalid_grant(
                "refresh_token: the user has no credentials",
            ));
        }
        Refreshed::MustChange => {
            return Err(OAuthError::invalid_grant(
                "change your password first: no ichor-kube token is issued until then",
            ));
        }
        Refreshed::NeedsFactor => {
            return Err(OAuthError::invalid_grant(
                "refresh_token: the session began before the user had a second factor: sign in again",
            ));
        }
        Refreshed::Policy(TokenDecision::SignInWithFactor) => {
            return Err(OAuthError::invalid_grant(SIGN_IN_WITH_FACTOR));
        }
        Refreshed::Policy(_) => return Err(OAuthError::invalid_grant(ENROL_FIRST)),
        Refreshed::Refused(reason) => {
            let why = match reason {
                RefusalReason::UnknownFamily => "the session was revoked or has ended",
                RefusalReason::Expired => "the session reached its absolute lifetime",
                RefusalReason::BeforeNotBefore => "the session predates the user's notBefore",
                RefusalReason::Reuse { .. } => {
                    issuer.metrics.refresh_reuse_detections.inc();
                    tracing::warn!(user = %claims.sub, "refresh token reused; family revoked");
                    "the token was already used; the session is revoked"
                }
            };
            return Err(OAuthError::invalid_grant(format!("refresh_token: {why}")));
        }
    };
    let refresh = refresh_token(issuer, keys, &claims.sub, &claims.fam, &family, now)?;
    let amr = family.amr_claim().into_iter().map(str::to_owned).collect();
    let (id_token, ttl) = id_token(issuer, keys, &user, audience, None, amr, now)?;
    issuer.metrics.issued("refresh_token", audience);
    Ok(TokenResponse {
        access_token: id_token.clone(),
        token_type: "Bearer",
        expires_in: ttl,
        id_token,
        refresh_token: Some(refresh),
        scope: "openid offline_access",
    })
}
