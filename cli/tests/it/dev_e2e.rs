//! End to end: `ichor dev` as a process, signed in to through the real OIDC flow over HTTPS,
//! the `UserService` called with the generated client over HTTPS, a user disabled the GitOps
//! way (editing its file), and a clean stop on SIGINT.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::process::Command;
use std::time::{Duration, Instant};

use crate::dev_support::{authed, channel, claims, sign_in, start};
use ichor_issuer::api::proto::{
    BeginTotpRequest, ChangeOwnPasswordRequest, ConfirmTotpRequest, CreateUserRequest, ListUsersRequest,
    WhoAmIRequest, create_user_request, user_service_client::UserServiceClient,
};
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ichor_dev_signs_in_the_printed_admin_serves_the_user_service_follows_the_tree_and_stops_on_sigint() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let state = tempfile::tempdir().unwrap();
    let mut dev = start(&state.path().join("dev"), &[]);
    assert_eq!(dev.password.len(), 24, "a 24-character password is printed");
    let ca = std::fs::read_to_string(&dev.ca_file).unwrap();
    let http = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap())
        .build()
        .unwrap();

    // The printed admin signs in for ichor-ui; everything but WhoAmI and ChangeOwnPassword waits
    // for a new password.
    let token = sign_in(&http, &dev, "ichor-ui", None, "admin", &dev.password)
        .await
        .unwrap();
    let mut api = UserServiceClient::new(channel(&dev).await);
    let me = api
        .who_am_i(authed(WhoAmIRequest {}, &token))
        .await
        .unwrap()
        .into_inner();
    assert!(me.must_change);
    let refused = api
        .list_users(authed(ListUsersRequest {}, &token))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    assert!(
        refused.message().contains("change your password first"),
        "{refused:?}"
    );
    let new_admin_password = "a new admin password, long enough";
    api.change_own_password(authed(
        ChangeOwnPasswordRequest {
            old_password: dev.password.clone(),
            new_password: new_admin_password.to_owned(),
            code: String::new(),
        },
        &token,
    ))
    .await
    .unwrap();

    // Signed in again, the admin lists users and creates an operator.
    let token = sign_in(&http, &dev, "ichor-ui", None, "admin", new_admin_password)
        .await
        .unwrap();
    let users = api
        .list_users(authed(ListUsersRequest {}, &token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        users.users.iter().map(|u| u.name.as_str()).collect::<Vec<_>>(),
        ["admin"]
    );
    // The composed service signs and checks enrolment tickets with the issuer's own keys: a
    // ticket of BeginTotp passes ConfirmTotp's check, which then judges the code (nothing is
    // stored, so the admin still signs in with the password alone below).
    let begun = api
        .begin_totp(authed(
            BeginTotpRequest {
                password: new_admin_password.into(),
                code: String::new(),
            },
            &token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(
        begun
            .otpauth_uri
            .starts_with("otpauth://totp/Ichor:admin?secret="),
        "{begun:?}"
    );
    let refused = api
        .confirm_totp(authed(
            ConfirmTotpRequest {
                ticket: begun.ticket,
                code: "abcdef".into(),
            },
            &token,
        ))
        .await
        .unwrap_err();
    assert!(refused.message().starts_with("code: "), "{refused:?}");
    let bob_first = "bob's first password";
    api.create_user(authed(
        CreateUserRequest {
            name: "bob".into(),
            roles: vec!["operator".into()],
            initial_password: Some(create_user_request::InitialPassword::Password(bob_first.into())),
            ..Default::default()
        },
        &token,
    ))
    .await
    .unwrap();

    // Bob changes his first password, then gets an ichor-kube token with his role as groups.
    let bob_ui = sign_in(&http, &dev, "ichor-ui", None, "bob", bob_first)
        .await
        .unwrap();
    let bob_password = "bob's own password, changed";
    api.change_own_password(authed(
        ChangeOwnPasswordRequest {
            old_password: bob_first.into(),
            new_password: bob_password.into(),
            code: String::new(),
        },
        &bob_ui,
    ))
    .await
    .unwrap();
    let kube = sign_in(&http, &dev, "ichor-cli", Some("ichor-kube"), "bob", bob_password)
        .await
        .unwrap();
    let c = claims(&kube);
    assert_eq!(
        (c["aud"].as_str(), c["sub"].as_str()),
        (Some("ichor-kube"), Some("bob"))
    );
    assert_eq!(c["groups"], serde_json::json!(["operator"]));

    // The GitOps path: disabling bob in his file stops his sign-ins within seconds.
    let file = dev.manifests.join("bob.yaml");
    let yaml = std::fs::read_to_string(&file).unwrap();
    assert!(yaml.contains("operator"), "{yaml}");
    let disabled = if yaml.contains("disabled: false") {
        yaml.replace("disabled: false", "disabled: true")
    } else {
        yaml.replace("spec:\n", "spec:\n  disabled: true\n")
    };
    assert_eq!(disabled.matches("disabled: true").count(), 1, "{disabled}");
    std::fs::write(&file, disabled).unwrap();
    let edited = Instant::now();
    loop {
        match sign_in(&http, &dev, "ichor-cli", Some("ichor-kube"), "bob", bob_password).await {
            // Refused at the password step, or (when the edit lands between the two) at the
            // code exchange, which re-reads the user.
            Err(refusal)
                if refusal.contains("This account is disabled")
                    || refusal.contains("the user is disabled") =>
            {
                break;
            }
            // Anything else (a busy password queue on a loaded machine) is not the answer.
            Err(other) => {
                eprintln!("bob's sign-in failed otherwise: {other}");
                assert!(
                    edited.elapsed() < Duration::from_secs(12),
                    "bob is not refused as disabled: {other}"
                );
            }
            Ok(_) => assert!(
                edited.elapsed() < Duration::from_secs(12),
                "bob still signs in 12 s after being disabled"
            ),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!("bob refused {:?} after the edit", edited.elapsed());
    let users = UserServiceClient::new(channel(&dev).await)
        .list_users(authed(ListUsersRequest {}, &token))
        .await
        .unwrap()
        .into_inner();
    let bob = users
        .users
        .iter()
        .find(|u| u.name == "bob")
        .expect("bob is still listed");
    assert!(
        bob.disabled,
        "the edited file was read as valid and disabled: {bob:?}"
    );

    // SIGINT stops the process cleanly and promptly.
    drop(api);
    drop(http);
    let pid = dev.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let asked = Instant::now();
    let status = loop {
        if let Some(status) = dev.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "ichor dev did not stop within 10 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    eprintln!("stopped {:?} after SIGINT", asked.elapsed());
}
