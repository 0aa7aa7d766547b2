//! The API's second source of callers with a real provider (panva's `oidc-provider`): its ID
//! token is verified against the provider's discovery and JWKS at the API's clock, so a token is
//! taken until its `exp` and refused after, with the provider's signature checked and the
//! prefixes applied.

use super::*;
use ichor_issuer::{
    api::{Clock, LocalAccessReview, UserApi},
    external::{ExternalVerifier, provider::ProviderInput},
};
use ichor_testkit::external_idp::{self, Account, Client, ExternalIdp, ExternalIdpOptions};
use jiff::Timestamp;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs oidc-provider: hack/install-test-deps.sh"]
async fn an_external_token_is_verified_at_the_apis_clock_and_refused_after_its_expiry() {
    if !external_idp::available() {
        return;
    }
    let idp = ExternalIdp::start(ExternalIdpOptions {
        accounts: [("carol".to_owned(), Account::new("carol@example.org", &["ops"]))].into(),
        clients: vec![Client::public("ichor-ui")],
        ..ExternalIdpOptions::default()
    })
    .unwrap();
    let provider = ProviderInput {
        issuer_url: Some(idp.issuer_url().to_owned()),
        client_id: Some("ichor-ui".to_owned()),
        kube_client_id: Some("kubernetes".to_owned()),
        ca: Some(("idp-ca".to_owned(), Ok(idp.ca_pem().as_bytes().to_vec()))),
        impersonable_groups: vec!["ops".to_owned()],
        ..ProviderInput::default()
    }
    .validate(ISSUER)
    .unwrap()
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(local_store(&dir));
    let clock = Arc::new(TestClock::new(Timestamp::now()));
    let mut config = ichor_testkit::issuer::harness::api_config(ISSUER);
    config.external = Some(ExternalVerifier::new(provider).unwrap());
    let api = UserApi::new(
        store,
        LocalAccessReview::new(authorizer(None)),
        FakeVerifier,
        Arc::clone(&clock) as Arc<dyn Clock>,
        config,
    );

    let tokens = idp.id_token("carol", "ichor-ui").unwrap();
    let exp = tokens.id_token_claims().unwrap()["exp"].as_i64().unwrap();
    let me = api
        .who_am_i(req(&tokens.id_token, WhoAmIRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(me.name, "oidc:carol@example.org");
    assert!(me.roles.is_empty(), "no Ichor role: {:?}", me.roles);
    assert!(!me.must_change);
    // Ichor holds no password or second factor of an external person.
    assert_status(
        api.list_own_factors(req(
            &tokens.id_token,
            ichor_issuer::api::proto::ListOwnFactorsRequest {},
        ))
        .await,
        Code::FailedPrecondition,
        "you signed in with your identity provider",
    );

    // One second before its exp it is taken; at its exp it is refused.
    clock.set(Timestamp::from_second(exp - 1).unwrap());
    api.who_am_i(req(&tokens.id_token, WhoAmIRequest {}))
        .await
        .unwrap();
    clock.set(Timestamp::from_second(exp).unwrap());
    assert_status(
        api.who_am_i(req(&tokens.id_token, WhoAmIRequest {})).await,
        Code::Unauthenticated,
        "expired",
    );

    // A signature that is not the provider's: the payload kept, the signature of another token.
    clock.set(Timestamp::now());
    let other = idp.id_token("carol", "ichor-ui").unwrap().id_token;
    let mut forged: Vec<&str> = tokens.id_token.split('.').collect();
    let other_sig = other.rsplit('.').next().unwrap();
    forged[2] = other_sig;
    assert_status(
        api.who_am_i(req(&forged.join("."), WhoAmIRequest {})).await,
        Code::Unauthenticated,
        "signature",
    );
}
