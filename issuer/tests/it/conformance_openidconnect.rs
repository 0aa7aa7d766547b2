//! The real `ichor-issuer` binary against the Rust `openidconnect` crate (4.x) as the relying
//! party: discovery, the authorization-code flow with PKCE (this test plays the browser: the
//! authorize URL the crate built is followed with `Accept: application/json` for the ticket, the
//! login is posted, the code is taken from the redirect), then a refresh; every ID token is
//! verified by the crate's own verifier (signature from the JWKS, issuer, audience, expiry and,
//! for the code grant, the nonce).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::conformance_common::*;
use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreIdToken, CoreProviderMetadata};
use openidconnect::{
    AuthorizationCode, ClientId, CsrfToken, IssuerUrl, Nonce, OAuth2TokenResponse as _, PkceCodeChallenge,
    RedirectUrl, Scope, TokenResponse as _,
};

/// Follows the authorize URL as the browser would, signs in, and returns the redirect's
/// `code` after checking its `state` and `iss` (RFC 9207).
async fn browse(issuer: &RunningIssuer, authorize_url: &url::Url, state: &CsrfToken) -> String {
    let to = ichor_testkit::issuer::sign_in::approve(
        &issuer.client,
        authorize_url.as_str(),
        USER,
        PASSWORD,
        ichor_testkit::issuer::sign_in::SlowDown::Refuse,
    )
    .await
    .unwrap_or_else(|refusal| panic!("{refusal}"));
    let redirect = url::Url::parse(&to).unwrap();
    let param = |name: &str| {
        redirect
            .query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    assert_eq!(param("state").as_deref(), Some(state.secret().as_str()));
    assert_eq!(param("iss").as_deref(), Some(issuer.issuer.as_str()));
    param("code").expect("the redirect carries a code")
}

async fn discover(issuer: &RunningIssuer) -> CoreProviderMetadata {
    CoreProviderMetadata::discover_async(IssuerUrl::new(issuer.issuer.clone()).unwrap(), &issuer.client)
        .await
        .expect("openidconnect discovery of the issuer")
}

#[tokio::test]
async fn the_ui_client_signs_in_with_pkce_and_refreshes_through_the_openidconnect_crate() {
    let issuer = RunningIssuer::start(Options::default()).await;
    let metadata = discover(&issuer).await;
    assert_eq!(metadata.issuer().as_str(), issuer.issuer);
    let redirect = format!("{}/auth/callback", issuer.issuer);
    let client = CoreClient::from_provider_metadata(metadata, ClientId::new("ichor-ui".to_owned()), None)
        .set_redirect_uri(RedirectUrl::new(redirect).unwrap());

    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (url, state, nonce) = client
        .authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            CsrfToken::new_random,
            Nonce::new_random,
        )
        .add_scope(Scope::new("offline_access".to_owned()))
        .set_pkce_challenge(challenge)
        .url();
    let code = browse(&issuer, &url, &state).await;

    let response = client
        .exchange_code(AuthorizationCode::new(code))
        .unwrap()
        .set_pkce_verifier(verifier)
        .request_async(&issuer.client)
        .await
        .expect("the code is redeemed");
    let id_token = response.id_token().expect("an ID token");
    let claims = id_token
        .claims(&client.id_token_verifier(), &nonce)
        .expect("openidconnect verifies the ID token and its nonce");
    assert_eq!(claims.subject().as_str(), USER);
    assert_eq!(claims.issuer().as_str(), issuer.issuer);
    assert_eq!(claims.audiences().len(), 1);
    assert_eq!(claims.audiences()[0].as_str(), "ichor-ui");
    assert_eq!(claims.nonce().map(|n| n.secret()), Some(nonce.secret()));

    // A wrong nonce is refused by the same verifier: the nonce check above was real.
    let wrong = id_token.claims(&client.id_token_verifier(), &Nonce::new("another".to_owned()));
    assert!(wrong.is_err(), "a wrong nonce was accepted");

    let refresh = response
        .refresh_token()
        .expect("offline_access gives a refresh token");
    let refreshed = client
        .exchange_refresh_token(refresh)
        .unwrap()
        .request_async(&issuer.client)
        .await
        .expect("the refresh token is rotated");
    let new_refresh = refreshed.refresh_token().expect("a rotated refresh token");
    assert_ne!(new_refresh.secret(), refresh.secret());
    let refreshed_id: &CoreIdToken = refreshed.id_token().expect("a fresh ID token");
    // OIDC Core 12.2: no nonce in an ID token from a refresh; the verifier is told to expect none.
    let claims = refreshed_id
        .claims(&client.id_token_verifier(), |nonce: Option<&Nonce>| match nonce {
            None => Ok(()),
            Some(_) => Err("a refreshed ID token carries a nonce".to_owned()),
        })
        .expect("openidconnect verifies the refreshed ID token");
    assert_eq!(claims.subject().as_str(), USER);
    assert_eq!(claims.audiences()[0].as_str(), "ichor-ui");
}

#[tokio::test]
async fn the_cli_client_gets_an_ichor_kube_token_the_crate_verifies_for_that_audience() {
    let issuer = RunningIssuer::start(Options::default()).await;
    let client = CoreClient::from_provider_metadata(
        discover(&issuer).await,
        ClientId::new("ichor-cli".to_owned()),
        None,
    )
    .set_redirect_uri(RedirectUrl::new(CLI_REDIRECT.to_owned()).unwrap());
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (url, state, nonce) = client
        .authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            CsrfToken::new_random,
            Nonce::new_random,
        )
        .add_extra_param("audience", "ichor-kube")
        .set_pkce_challenge(challenge)
        .url();
    let code = browse(&issuer, &url, &state).await;
    let response = client
        .exchange_code(AuthorizationCode::new(code))
        .unwrap()
        .set_pkce_verifier(verifier)
        .request_async(&issuer.client)
        .await
        .unwrap();
    assert!(
        response.refresh_token().is_none(),
        "no offline_access, no refresh token"
    );
    let id_token = response.id_token().unwrap();

    // The token is for the kube-apiserver (aud ichor-kube), not for the client ichor-cli, so the
    // crate's strict OIDC Core 3.1.3.7 rule (aud contains the client_id) refuses it ...
    assert!(
        id_token.claims(&client.id_token_verifier(), &nonce).is_err(),
        "aud ichor-kube passed a check for client ichor-cli"
    );
    // ... and with that rule off, the signature, issuer, expiry and nonce verify, and the
    // audience is exactly ichor-kube.
    let claims = id_token
        .claims(&client.id_token_verifier().require_audience_match(false), &nonce)
        .expect("openidconnect verifies the ichor-kube ID token");
    let audiences: Vec<&str> = claims.audiences().iter().map(|a| a.as_str()).collect();
    assert_eq!(audiences, ["ichor-kube"]);
    assert_eq!(claims.subject().as_str(), USER);
}
