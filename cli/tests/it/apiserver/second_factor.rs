//! The second-factor policy held by the kube-apiserver itself: an installation requiring a
//! second factor of role `admin` renders a `claimValidationRules` rule on Ichor's entry, and a
//! real apiserver restarted with it (as a policy change restarts every control plane):
//!
//! - accepts an admin who signed in through `ichor auth login` with the password, then the code
//!   of their authenticator app (the test plays the app): kubectl runs as `ichor:<name>` in
//!   group `ichor:admin`;
//! - refuses (401) an admin token without `mfa`, although its issuer (here `ichor dev`, whose own
//!   policy is off) signed it, and names the rule's message in its log;
//! - still accepts a viewer without any factor: the policy names no other role.

use std::time::{Duration, Instant};

use ichor_issuer::api::proto::{
    BeginTotpRequest, ConfirmTotpRequest, user_service_client::UserServiceClient,
};
use ichor_renderers::auth::totp;
use ichor_renderers::authn::second_factor::role_message;
use ichor_renderers::cluster::installations_second_factor;
use ichor_renderers::crd::IchorInstallation;

use crate::apiserver::site::{ADMIN_PASSWORD, RESTART_TIMEOUT, Site, Terminal};
use crate::dev_support::{self, authed};

const ALICE_PASSWORD: &str = "alice's own password, long enough";
const VERA_PASSWORD: &str = "vera's own password, long enough";

/// The installation as an operator writes it: a second factor required of admins.
const INSTALLATION: &str = "apiVersion: ichor.maesh.dev/v1alpha1
kind: IchorInstallation
metadata:
  name: ichor
spec:
  users:
    secondFactor:
      default: optional
      roles:
        admin: required
        viewer: \"off\"
";

/// Enrols an authenticator app for `user` through the `UserService` (as the account page does):
/// its secret, and the step of the code that confirmed it (no later sign-in may reuse that one).
async fn enrol_app(site: &Site, user: &str, password: &str) -> (String, u64) {
    let http = dev_support::http_client(&site.dev);
    let token = dev_support::sign_in(&http, &site.dev, "ichor-ui", None, user, password)
        .await
        .unwrap();
    let mut api = UserServiceClient::new(dev_support::channel(&site.dev).await);
    let begun = api
        .begin_totp(authed(
            BeginTotpRequest {
                password: password.to_owned(),
                code: String::new(),
            },
            &token,
        ))
        .await
        .unwrap()
        .into_inner();
    let now = jiff::Timestamp::now();
    let code = totp::code_at(&begun.secret, now).unwrap();
    let confirmed = api
        .confirm_totp(authed(
            ConfirmTotpRequest {
                ticket: begun.ticket,
                code,
            },
            &token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(confirmed.recovery_codes.len(), 10);
    (begun.secret, totp::current_step(now).unwrap())
}

/// The code of `secret` in the first step after `used` (waits for it, at most one step).
async fn next_code(secret: &str, used: u64) -> String {
    loop {
        let now = jiff::Timestamp::now();
        if totp::current_step(now).unwrap() > used {
            return totp::code_at(secret, now).unwrap();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the control plane: hack/kube/build.sh"]
async fn the_apiserver_requires_a_second_factor_of_admins_and_of_no_one_else() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(mut site) = Site::start("", &[]).await else {
        return;
    };
    // Without the policy, the apiserver accepts the admin's password-only token
    // (`Site::start` waited for exactly that), so a refusal below is the rule's.
    let admin_token = site.admin_token().await;
    dev_support::provision_user(&site.dev, &admin_token, "alice", &["admin"], ALICE_PASSWORD).await;
    let alice = Terminal::open(&site, "alice", ALICE_PASSWORD).await;
    let (secret, used_step) = enrol_app(&site, "alice", ALICE_PASSWORD).await;
    let vera = site.person("vera", &["viewer"], VERA_PASSWORD).await;

    // The installation's policy, rendered as `ichor render` and the controller render it.
    let installation: IchorInstallation = serde_yaml::from_str(INSTALLATION).unwrap();
    let policy = installations_second_factor(&[installation]);
    let config = site.authentication_config_with("", &policy);
    assert!(config.contains("claimValidationRules"), "{config}");
    assert!(config.contains(&role_message("admin")), "{config}");
    assert!(!config.contains("'viewer'"), "{config}");
    let took = site
        .plane
        .restart_apiserver(0, Some(&config), RESTART_TIMEOUT)
        .unwrap();
    eprintln!("apiserver restarted with the second-factor rule in {took:?}");

    // (c) A viewer without a factor is accepted: once the apiserver has read the issuer's keys,
    // vera's fresh token gets through, and her kubectl too.
    let vera_token = site.kube_token("vera", VERA_PASSWORD).await.unwrap();
    let started = Instant::now();
    loop {
        let status = site
            .plane
            .get_with_token(0, "/api", Some(&vera_token))
            .map(|r| r.status);
        if status.as_ref().is_ok_and(|s| *s == 200) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the apiserver never accepted the viewer's token ({status:?}); its log:\n{}",
            site.plane.log(0)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let vera_claims = dev_support::claims(&vera_token);
    assert_eq!(vera_claims["amr"], serde_json::json!(["pwd"]), "{vera_claims}");
    let (user, groups) = vera.whoami(&site).await;
    assert_eq!(user, "ichor:vera");
    assert!(groups.contains(&"ichor:viewer".to_owned()), "{groups:?}");

    // (b) The admin's password-only token, which its issuer still signs (its policy is off), is
    // refused by the apiserver.
    let admin_kube = site.kube_token("admin", ADMIN_PASSWORD).await.unwrap();
    let admin_claims = dev_support::claims(&admin_kube);
    assert_eq!(admin_claims["amr"], serde_json::json!(["pwd"]), "{admin_claims}");
    assert_eq!(
        admin_claims["groups"],
        serde_json::json!(["admin"]),
        "{admin_claims}"
    );
    let refused = site.plane.get_with_token(0, "/api", Some(&admin_kube)).unwrap();
    assert_eq!(refused.status, 401, "{refused:?}");
    // It answers a bare `Unauthorized`; its log names the rule's message.
    let message = role_message("admin");
    let started = Instant::now();
    while !site.plane.log_unquoted(0).contains(&message) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the apiserver's log does not name {message:?}:\n{}",
            site.plane.log(0)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // (a) Alice signs in through the CLI's browser step with her password and the app's code;
    // kubectl then runs as her, an admin.
    let code = next_code(&secret, used_step).await;
    alice.login_with_code(&site, move || code).await;
    let (user, groups) = alice.whoami(&site).await;
    assert_eq!(user, "ichor:alice");
    assert!(groups.contains(&"ichor:admin".to_owned()), "{groups:?}");
    assert!(
        alice
            .can_i(&site, "create", "talosoperations.ichor.maesh.dev")
            .await
    );
}
