//! The external OpenID provider is real and usable: tokens from its own code flow with PKCE pass
//! go-oidc v2 (the verifier inside the kube-apiserver's JWT authenticator) with the accounts'
//! claims and `aud` = client id, are refused for another audience, refresh with rotation (a
//! spent refresh token is refused), and the provider stops cleanly on SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use ichor_testkit::consumers;
use ichor_testkit::external_idp::{self, Account, Client, ExternalIdp, ExternalIdpOptions};
use serde_json::json;

fn go_oidc_verifier() -> Option<PathBuf> {
    consumers::require_path(
        consumers::build_dir().join("go-oidc-verify"),
        "hack/install-test-deps.sh",
    )
}

/// go-oidc's verdict on `token` for `audience`: the verified claims, or its error.
fn go_oidc(
    verifier: &Path,
    idp: &ExternalIdp,
    audience: &str,
    token: &str,
) -> Result<serde_json::Value, String> {
    let out = Command::new(verifier)
        .args(["-issuer", idp.issuer_url(), "-aud", audience, "-token", token])
        .arg("-ca")
        .arg(idp.ca_path())
        .output()
        .unwrap();
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn options() -> ExternalIdpOptions {
    ExternalIdpOptions {
        accounts: [
            (
                "alice".to_owned(),
                Account::new("alice@example.org", &["dev", "ops"]),
            ),
            (
                "mallory".to_owned(),
                Account::new("mallory@example.org", &["system:masters"]),
            ),
        ]
        .into(),
        clients: vec![
            Client::public("kubernetes"),
            Client::with_redirect_uris("ichor-ui", &["https://127.0.0.1:8443/callback"]),
            Client {
                client_secret: Some("s3cret".to_owned()),
                ..Client::public("confidential")
            },
        ],
        ..Default::default()
    }
}

#[test]
#[ignore = "needs oidc-provider and go-oidc: hack/install-test-deps.sh"]
fn go_oidc_accepts_its_id_token_with_the_account_claims_and_refresh_rotates() {
    let Some(verifier) = go_oidc_verifier() else {
        return;
    };
    if !external_idp::available() {
        return;
    }
    let idp = ExternalIdp::start(options()).unwrap();
    eprintln!(
        "external OpenID provider ready in {:?} at {}",
        idp.started_in(),
        idp.issuer_url()
    );

    let minted = Instant::now();
    let tokens = idp.id_token("alice", "kubernetes").unwrap();
    eprintln!("code flow with PKCE took {:?}", minted.elapsed());
    let claims = go_oidc(&verifier, &idp, "kubernetes", &tokens.id_token)
        .unwrap_or_else(|e| panic!("go-oidc refused the provider's ID token: {e}"));
    assert_eq!(claims["iss"], idp.issuer_url());
    assert_eq!(claims["aud"], "kubernetes");
    assert_eq!(claims["sub"], "alice");
    assert_eq!(claims["email"], "alice@example.org");
    assert_eq!(claims["email_verified"], true);
    assert_eq!(claims["name"], "alice");
    assert_eq!(claims["groups"], json!(["dev", "ops"]));
    assert!(claims["nonce"].is_string(), "the flow sent a nonce: {claims}");
    assert_eq!(tokens.id_token_claims().unwrap(), claims);

    let wrong = go_oidc(&verifier, &idp, "ichor-ui", &tokens.id_token).unwrap_err();
    assert!(wrong.contains("expected audience"), "{wrong}");

    // Refresh: a new ID token of the same account, a new refresh token, the old one spent.
    let first = tokens
        .refresh_token
        .clone()
        .expect("offline_access gave a refresh token");
    let refreshed = idp.refresh("kubernetes", &first).unwrap();
    let again = go_oidc(&verifier, &idp, "kubernetes", &refreshed.id_token).unwrap();
    assert_eq!(
        (&again["sub"], &again["groups"]),
        (&claims["sub"], &claims["groups"])
    );
    assert_ne!(refreshed.access_token, tokens.access_token);
    let second = refreshed.refresh_token.clone().expect("the refresh is rotated");
    assert_ne!(second, first);
    let spent = idp.refresh("kubernetes", &first).unwrap_err();
    assert!(format!("{spent:#}").contains("invalid_grant"), "{spent:#}");

    let status = idp.stop().unwrap();
    assert!(status.success(), "the provider's exit on SIGTERM: {status}");
}

#[test]
#[ignore = "needs oidc-provider and go-oidc: hack/install-test-deps.sh"]
fn each_client_id_is_the_audience_and_a_confidential_client_authenticates() {
    let Some(verifier) = go_oidc_verifier() else {
        return;
    };
    if !external_idp::available() {
        return;
    }
    let idp = ExternalIdp::start(options()).unwrap();

    let ui = idp.id_token("alice", "ichor-ui").unwrap();
    assert_eq!(
        go_oidc(&verifier, &idp, "ichor-ui", &ui.id_token).unwrap()["aud"],
        "ichor-ui"
    );
    let refused = go_oidc(&verifier, &idp, "kubernetes", &ui.id_token).unwrap_err();
    assert!(refused.contains("expected audience"), "{refused}");

    // What the apiserver's userValidationRules must refuse comes out as the account says.
    let mallory = idp.id_token("mallory", "kubernetes").unwrap();
    let claims = go_oidc(&verifier, &idp, "kubernetes", &mallory.id_token).unwrap();
    assert_eq!(claims["groups"], json!(["system:masters"]));

    let confidential = idp.id_token("alice", "confidential").unwrap();
    assert_eq!(confidential.id_token_claims().unwrap()["aud"], "confidential");
    let refreshed = idp
        .refresh("confidential", confidential.refresh_token.as_deref().unwrap())
        .unwrap();
    assert_eq!(refreshed.id_token_claims().unwrap()["sub"], "alice");

    let without_offline = idp
        .tokens_for_scope("alice", "kubernetes", "openid email groups")
        .unwrap();
    assert_eq!(without_offline.refresh_token, None);
}

#[test]
#[ignore = "needs oidc-provider: hack/install-test-deps.sh"]
fn unknown_accounts_clients_and_a_failed_start_are_errors_that_say_why() {
    if !external_idp::available() {
        return;
    }
    let idp = ExternalIdp::start(options()).unwrap();
    let unknown = idp.id_token("eve", "kubernetes").unwrap_err();
    assert!(format!("{unknown:#}").contains("answered 200"), "{unknown:#}");
    let no_client = idp.id_token("alice", "nobody").unwrap_err();
    assert!(
        format!("{no_client:#}").contains("no client nobody"),
        "{no_client:#}"
    );
    drop(idp);

    let broken = ExternalIdp::start(ExternalIdpOptions {
        clients: vec![Client::with_redirect_uris("broken", &["not a URL"])],
        ..options()
    })
    .err()
    .expect("a client with an invalid redirect URI stops the provider");
    let message = format!("{broken:#}");
    assert!(message.contains("exited"), "{message}");
    assert!(
        message.contains("redirect_uris"),
        "the error carries the provider's log: {message}"
    );
}
